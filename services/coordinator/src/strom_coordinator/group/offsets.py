"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and the retention rule.

A commit is validated per partition, written to the ``PartitionLog`` (one batch, acks=all) and
only then visible to OffsetFetch; a commit that loses a race with a newer one for the same
partition (each gets a sequence number before it is written) does not overwrite it. Whether a
member may commit at all is asked of a ``CommitGate`` (the membership state machine, which this
module never imports). ``expired_offsets`` says which offsets are past retention (Kafka 2.1+
rules, see docs/consumer-groups.md); ``expiry`` removes them.

Safety: one event loop, not thread-safe. Across the await of an append the group may have been
unloaded or deleted: results reach the cache only if ``groups.get(id) is group`` still holds.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidRequestError,
    InvalidTopicError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from strom_coordinator.group import records
from strom_coordinator.group.api import CommitPartition, FetchedOffset, PartitionResult
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.errors import log_failure
from strom_coordinator.group.model import CommittedOffset, Group, GroupState
from strom_coordinator.group.stats import GroupStatsListener, NullStats
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["CommitGate", "OffsetStore", "expired_offsets", "forget_offsets"]

_MAX_TOPIC_CHARS = 249


class CommitGate(Protocol):
    """Who may commit for a group with members (``membership.Membership`` implements it)."""

    def check_commit(
        self, group: Group, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> None:
        """Raise unless the member may commit in ``generation_id``; a commit is a heartbeat."""
        ...


class OffsetStore:
    """The committed offsets of the groups in ``groups`` (shared with the other concerns of
    the group coordinator; see the module docstring)."""

    def __init__(
        self,
        groups: dict[str, Group],
        log: PartitionLog,
        config: GroupConfig,
        gate: CommitGate,
        *,
        stats: GroupStatsListener | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._groups = groups
        self._log = log
        self._config = config
        self._gate = gate
        self._stats: GroupStatsListener = stats or NullStats()
        self._now_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        self._commit_seq = itertools.count(1)

    async def commit_offsets(
        self,
        partition: int,
        group_id: str,
        generation_id: int,
        member_id: str,
        partitions: Sequence[CommitPartition],
        *,
        group_instance_id: str | None = None,
    ) -> list[PartitionResult]:
        """OffsetCommit for a group of ``partition`` (routed by the caller); applied to the
        cache once the log acknowledged it. Whole-request errors (unknown member, illegal
        generation, ...) are raised."""
        group = self.admit(partition, group_id, generation_id, member_id, group_instance_id)
        now = self._now_ms()
        results: list[PartitionResult] = []
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for p in partitions:
            error = self.commit_error(p)
            results.append(PartitionResult(p.topic, p.partition, error))
            if error is None:
                accepted[(p.topic, p.partition)] = CommittedOffset(
                    p.offset, p.leader_epoch, p.metadata, now
                )
        if not accepted:
            return results
        recs = [
            (
                records.offset_key(group_id, topic, part),
                records.offset_value(
                    records.OffsetValue(o.offset, o.leader_epoch, o.metadata, now)
                ),
            )
            for (topic, part), o in accepted.items()
        ]
        seq = self.next_seq()
        group.pending_commits += 1
        try:
            await self._log.append(partition, recs)
        except Exception as e:
            failure = log_failure(e, commit=True)
            return [
                r if r.error else PartitionResult(r.topic, r.partition, failure) for r in results
            ]
        finally:
            group.pending_commits -= 1
        if self._groups.get(group_id) is group:
            for tp, offset in accepted.items():
                if group.offset_seq.get(tp, 0) < seq:
                    group.offsets[tp] = offset
                    group.offset_seq[tp] = seq
        self._stats.on_commit(group_id, len(accepted))
        return results

    def admit(
        self,
        partition: int,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> Group:
        """The group a commit (plain or transactional) for ``group_id`` of ``partition`` may
        write to, created for a commit outside group management (generation -1); raises when
        the member may not commit (unknown member, illegal generation, group being deleted)."""
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise IllegalGenerationError(f"group {group_id} has no generation {generation_id}")
            group = self._groups[group_id] = Group(group_id, partition)
        elif group.state is GroupState.DEAD:
            raise CoordinatorNotAvailableError(f"group {group_id} is being deleted")
        elif not (generation_id < 0 and group.state is GroupState.EMPTY):
            self._gate.check_commit(group, generation_id, member_id, group_instance_id)
        return group

    def next_seq(self) -> int:
        """The sequence number of a commit about to be written (later commits get higher)."""
        return next(self._commit_seq)

    def commit_error(self, p: CommitPartition) -> BrokerResponseError | None:
        """Why one partition's offset cannot be committed (None: it can)."""
        if not p.topic or len(p.topic) > _MAX_TOPIC_CHARS:
            return InvalidTopicError(f"invalid topic name {p.topic[:_MAX_TOPIC_CHARS]!r}")
        if p.partition < 0:
            return UnknownTopicOrPartitionError(f"partition {p.partition} of {p.topic}")
        if p.offset < 0:
            return InvalidRequestError(f"committed offset {p.offset} is negative")
        limit = self._config.offset_metadata_max_bytes
        if len(p.metadata.encode()) > limit:
            return OffsetMetadataTooLargeError(f"offset metadata is longer than {limit} bytes")
        return None

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]] | None = None,
        *,
        require_stable: bool = False,
    ) -> list[FetchedOffset]:
        """OffsetFetch: the committed offsets (-1 where none); no partitions = all of them.
        With ``require_stable``, a partition with a transactional offset still pending answers
        UNSTABLE_OFFSET_COMMIT instead (the client retries once the transaction ended)."""
        group = self._groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        wanted = list(partitions) if partitions else sorted(offsets)
        found = []
        for topic, part in wanted:
            o = offsets.get((topic, part))
            if require_stable and group is not None and group.has_pending_txn((topic, part)):
                unstable = UnstableOffsetCommitError(
                    f"{topic}-{part} has a transactional offset pending in group {group_id}"
                )
                found.append(FetchedOffset(topic, part, error=unstable))
            elif o is None:
                found.append(FetchedOffset(topic, part))
            else:
                found.append(FetchedOffset(topic, part, o.offset, o.leader_epoch, o.metadata))
        return found

    async def delete_offsets(
        self, partition: int, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> list[PartitionResult]:
        """OffsetDelete for a group of ``partition`` (routed by the caller): refused for topics
        an active consumer group subscribes to."""
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        results: list[PartitionResult] = []
        deletable: list[tuple[str, int]] = []
        if group.state is GroupState.EMPTY:
            deletable = list(partitions)
            results = [PartitionResult(t, p) for t, p in partitions]
        elif group.protocol_type == "consumer":
            subscribed = group.subscribed_topics() or set()
            for topic, part in partitions:
                if topic in subscribed:
                    error = GroupSubscribedToTopicError(f"group {group_id} consumes {topic}")
                    results.append(PartitionResult(topic, part, error))
                else:
                    deletable.append((topic, part))
                    results.append(PartitionResult(topic, part))
        else:
            raise NonEmptyGroupError(f"group {group_id} has members")
        present = [tp for tp in dict.fromkeys(deletable) if tp in group.offsets]
        if not present:
            return results
        seqs = {tp: group.offset_seq.get(tp, 0) for tp in present}
        try:
            await self._log.append(
                partition, [(records.offset_key(group_id, t, p), None) for t, p in present]
            )
        except Exception as e:
            raise log_failure(e, commit=True) from None
        forget_offsets(group, seqs)
        return results


def forget_offsets(group: Group, seqs: Mapping[tuple[str, int], int]) -> None:
    """Drop offsets deleted in the log unless a newer commit landed meanwhile (``seqs``: the
    commit sequence of each offset when its tombstone was written)."""
    for tp, seq in seqs.items():
        if group.offset_seq.get(tp, 0) == seq:
            group.offsets.pop(tp, None)
            group.offset_seq.pop(tp, None)


def expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
    """Offsets of ``group`` past retention (Kafka 2.1+ rules, see docs/consumer-groups.md)."""
    if group.protocol_type is None:  # offsets only (manual assignment): from each commit
        candidates, base = list(group.offsets), None
    elif group.state is GroupState.EMPTY:  # since the group became empty
        candidates, base = list(group.offsets), group.state_timestamp_ms
    else:  # an active consumer group: only topics it no longer subscribes to
        topics = group.subscribed_topics()
        if topics is None:
            return []
        candidates, base = [tp for tp in group.offsets if tp[0] not in topics], None
    expired = []
    for tp in candidates:
        if group.has_pending_txn(tp):  # kept until its transaction ends, as Kafka does
            continue
        o = group.offsets[tp]
        if o.expire_timestamp_ms is not None:
            if now_ms >= o.expire_timestamp_ms:
                expired.append(tp)
        elif (base if base is not None else o.commit_timestamp_ms) + retention_ms <= now_ms:
            expired.append(tp)
    return expired
