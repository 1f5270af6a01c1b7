"""OffsetCommit and OffsetFetch on a group's coordinator, with Kafka's retries.

Both retry NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and network
errors (finding the coordinator again) until the caller's deadline, as Kafka's consumer does
within ``default.api.timeout.ms``: each request gets at most ``request_timeout_s``, the whole
call ``api_timeout_s``, and a call that runs out of time raises ``StromTimeoutError`` naming
the last error (never an answer it did not get: "no committed offset" comes only from a
coordinator that served the group). What any other commit error means for the membership is
the ``ConsumerCoordinator``'s business: ``send_commit`` returns it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from strom.cluster.retry import Deadline
from strom.consumer._coordinator_link import (
    COORDINATOR_ERRORS,
    CoordinatorLink,
    retriable_group_error,
)
from strom.consumer._subscription import PartitionState
from strom.errors import ConfigurationError, StromError, StromTimeoutError, for_code
from strom.protocol.v1 import common_pb2, coordinator_pb2
from strom.types import OffsetAndMetadata, TopicPartition

__all__ = [
    "CommitOffsets",
    "Committed",
    "commit_offsets",
    "commit_request",
    "current_offsets",
    "fetch_committed",
    "send_commit",
]

_E = common_pb2.ErrorCode
#: ``{tp: (offset, leader epoch)}``: what a commit writes (the epoch -1 when unknown).
CommitOffsets = Mapping[TopicPartition, tuple[OffsetAndMetadata, int]]
#: ``{tp: (offset, leader epoch) | None}``: what OffsetFetch found (None: nothing committed).
Committed = dict[TopicPartition, tuple[OffsetAndMetadata, int] | None]
_RETRIED = COORDINATOR_ERRORS | {_E.COORDINATOR_LOAD_IN_PROGRESS}


def commit_request(
    group_id: str,
    offsets: CommitOffsets,
    *,
    generation: int = -1,
    member_id: str = "",
    group_instance_id: str = "",
) -> coordinator_pb2.OffsetCommitRequest:
    return coordinator_pb2.OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=group_instance_id,
        partitions=[
            coordinator_pb2.OffsetCommitPartition(
                topic=tp.topic,
                partition=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=epoch,
                metadata=om.metadata,
            )
            for tp, (om, epoch) in sorted(offsets.items())
        ],
    )


async def send_commit(
    link: CoordinatorLink,
    request: coordinator_pb2.OffsetCommitRequest,
    request_timeout_s: float,
    api_timeout_s: float | None = None,
) -> tuple[int, str]:
    """Send the commit; ``(0, "")`` when every partition was committed, else the first
    partition error ``(code, message)`` that retrying within ``api_timeout_s`` (default:
    ``request_timeout_s``) did not cure."""
    deadline = Deadline(request_timeout_s if api_timeout_s is None else api_timeout_s)
    while True:
        try:
            response = await link.call(
                "OffsetCommit", request, _rpc_timeout(request_timeout_s, deadline), deadline.at
            )
        except StromError as exc:
            if retriable_group_error(exc) and deadline.allows(link.backoff_s):
                await link.backoff()
                continue
            raise
        failed = [r for r in response.partitions if r.error_code]
        if not failed:
            return 0, ""
        code, message = failed[0].error_code, failed[0].error_message
        if code not in _RETRIED or not deadline.allows(link.backoff_s):
            return code, message
        if code in COORDINATOR_ERRORS:
            link.mark_unknown(for_code(code, message))
        await link.backoff()


async def fetch_committed(
    link: CoordinatorLink,
    group_id: str,
    partitions: Iterable[TopicPartition],
    request_timeout_s: float,
    *,
    api_timeout_s: float | None = None,
    require_stable: bool = False,
) -> Committed:
    """The group's committed offsets for ``partitions`` (OffsetFetch), retrying within
    ``api_timeout_s`` (default: ``request_timeout_s``). With ``require_stable``
    (read_committed consumers, KIP-447) a partition whose offset a transaction still has
    pending answers UNSTABLE_OFFSET_COMMIT, retried here until the transaction has ended:
    otherwise the offset read would be the one before it."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    api_timeout_s = request_timeout_s if api_timeout_s is None else api_timeout_s
    deadline = Deadline(api_timeout_s)
    request = coordinator_pb2.OffsetFetchRequest(
        group_id=group_id,
        partitions=[
            common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition) for tp in wanted
        ],
        require_stable=require_stable,
    )
    while True:
        try:
            response = await link.call(
                "OffsetFetch", request, _rpc_timeout(request_timeout_s, deadline), deadline.at
            )
            code, message = response.error_code, response.error_message
            if not code:
                failed = [p for p in response.partitions if p.error_code]
                if failed:  # per partition there is a code only
                    code = failed[0].error_code
                    message = f"{failed[0].topic}-{failed[0].partition}"
            if code:
                if code in COORDINATOR_ERRORS:
                    link.mark_unknown(for_code(code, message))
                raise for_code(code, f"group {group_id!r}: OffsetFetch: {message}")
        except StromError as exc:
            if not (retriable_group_error(exc) or exc.retriable):
                raise
            if deadline.allows(link.backoff_s):
                await link.backoff()
                continue
            raise StromTimeoutError(
                f"group {group_id!r}: committed offsets not fetched within "
                f"{api_timeout_s * 1000:.0f} ms (last error: {exc})"
            ) from exc
        found: Committed = dict.fromkeys(wanted)
        for p in response.partitions:
            tp = TopicPartition(p.topic, p.partition)
            if tp in found and p.committed_offset >= 0:
                found[tp] = (
                    OffsetAndMetadata(p.committed_offset, p.metadata),
                    p.committed_leader_epoch,
                )
        return found


def _rpc_timeout(request_timeout_s: float, deadline: Deadline) -> float:
    """One request's timeout: ``request_timeout_s``, or what is left of the whole call."""
    return max(min(request_timeout_s, deadline.left()), 0.01)


def commit_offsets(
    assignment: Mapping[TopicPartition, PartitionState],
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
) -> dict[TopicPartition, tuple[OffsetAndMetadata, int]]:
    """``{tp: (offset, leader epoch)}``: the epoch is known when the offset is the
    partition's position (the epoch of the record before it)."""
    prepared = {}
    for tp, om in current_offsets(assignment, offsets).items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"commit() takes TopicPartition keys, got {tp!r}")
        if not isinstance(om.offset, int) or om.offset < 0:
            raise ConfigurationError(
                f"commit offset for {tp.topic}-{tp.partition} must be an integer >= 0, "
                f"got {om.offset!r}"
            )
        st = assignment.get(tp)
        epoch = st.position_epoch if st is not None and st.position == om.offset else -1
        prepared[tp] = (om, epoch)
    return prepared


def current_offsets(
    assignment: Mapping[TopicPartition, PartitionState],
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
) -> dict[TopicPartition, OffsetAndMetadata]:
    """What a commit covers: ``offsets``, or (None) the position of every assigned partition
    that has one."""
    if offsets is not None:
        return {
            tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
            for tp, o in offsets.items()
        }
    return {
        tp: OffsetAndMetadata(st.position)
        for tp, st in assignment.items()
        if st.position is not None and not st.awaiting_committed
    }
