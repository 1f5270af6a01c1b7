"""Reading a fetch's partitions: Kafka's ``readFromLog``. Each partition is read on its own,
in request order, within the fetch's ``max_bytes`` budget; a partition that cannot be read gets
its error and, when the node hosts it, its high watermark and log start. What waits for more
data is ``ReplicaManager.fetch``.

Thread-safety: one event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import structlog

from strom.errors import BrokerResponseError, NotLeaderOrFollowerError
from strom_storage.log import FetchIsolation
from strom_storage.node.hosted import HostedPartitions
from strom_storage.node.loop_watch import APPLY_SLICE_S, LoopSlice
from strom_storage.node.results import FetchPartitionRequest, FetchPartitionResult, as_broker_error

log = structlog.get_logger(__name__)

__all__ = ["read_partitions"]


async def read_partitions(
    hosted: HostedPartitions,
    requests: Sequence[FetchPartitionRequest],
    isolation: FetchIsolation,
    max_bytes: int,
    *,
    refused: Mapping[tuple[str, int], Exception],
    any_replica: bool = False,
) -> list[FetchPartitionResult]:
    """Read every requested partition, yielding the loop every ``APPLY_SLICE_S`` (each
    partition is read on its own; a fetch was never a snapshot across partitions)."""
    results = []
    budget = max_bytes
    returned_any = False
    loop_slice = LoopSlice(APPLY_SLICE_S)
    for request in requests:
        await loop_slice.pause()
        try:
            if (reason := refused.get((request.topic, request.partition))) is not None:
                raise reason
            partition = hosted.get(request.topic, request.partition)
            partition.check_epoch(request.current_leader_epoch)
            if not partition.is_leader and not any_replica:
                raise NotLeaderOrFollowerError(
                    f"node {hosted.node_id} does not lead {request.topic}-{request.partition}"
                )
            limit = min(request.partition_max_bytes, budget)
            data = partition.log.reader.read(
                request.fetch_offset,
                limit,
                isolation=isolation,
                # The first batch of the first non-empty partition always comes back, so a
                # consumer makes progress even past a batch larger than its limits.
                min_one_batch=not returned_any,
            )
        except Exception as exc:
            error = as_broker_error(exc)
            if not isinstance(exc, BrokerResponseError):
                log.exception("read failed", topic=request.topic, partition=request.partition)
            hw, start = _offsets_or_unknown(hosted, request.topic, request.partition)
            results.append(FetchPartitionResult(request.topic, request.partition, error, hw, start))
            continue
        if data.records:
            returned_any = True
            budget = max(0, budget - len(data.records))
        results.append(
            FetchPartitionResult(
                request.topic,
                request.partition,
                high_watermark=data.high_watermark,
                log_start_offset=data.log_start_offset,
                records=data.records,
                last_stable_offset=data.last_stable_offset,
                aborted_transactions=(
                    data.aborted_transactions if isolation is FetchIsolation.TXN_COMMITTED else ()
                ),
            )
        )
    return results


def _offsets_or_unknown(hosted: HostedPartitions, topic: str, index: int) -> tuple[int, int]:
    partition = hosted.find((topic, index))
    if partition is None:
        return -1, -1
    return partition.log.high_watermark, partition.log.log_start_offset
