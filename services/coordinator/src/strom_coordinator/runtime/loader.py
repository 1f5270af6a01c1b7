"""Reading one partition of an internal topic from its start to its high watermark, for its
shard's replay when a coordinator takes the partition over.

Fetches go to the partition leader (replica id -1: up to the high watermark, which covers every
record written with acks=all), with the client library's metadata refresh on leader moves.
Control batches are skipped; tombstones are replayed as ``None`` values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from strom.cluster import METADATA_ERRORS, ClusterClient, list_offsets, storage_call, where
from strom.errors import StromError, StromTimeoutError, for_code
from strom.protocol.v1 import common_pb2, storage_pb2
from strom.records import decode_batches
from strom.types import TopicPartition

__all__ = ["read_partition"]

_E = common_pb2.ErrorCode
_FETCH_BYTES = 8 << 20
_BACKOFF_S = 0.1

#: ``(key, value, timestamp_ms)`` of each record, in offset order.
Replay = Callable[[bytes, bytes | None, int], None]


async def log_range(
    cluster: ClusterClient, tp: TopicPartition, timeout_s: float
) -> tuple[int, int]:
    """(log start offset, high watermark) of ``tp``."""
    start = await list_offsets(cluster, {tp: (common_pb2.EARLIEST, 0)}, timeout_s=timeout_s)
    end = await list_offsets(cluster, {tp: (common_pb2.LATEST, 0)}, timeout_s=timeout_s)
    return start[tp][0], end[tp][0]


async def read_partition(
    cluster: ClusterClient, tp: TopicPartition, replay: Replay, *, timeout_s: float
) -> int:
    """Replay every keyed record of ``tp`` below its current high watermark; returns how many.

    ``timeout_s`` bounds each request's retries (not the whole read)."""
    position, end = await log_range(cluster, tp, timeout_s)
    count = 0
    loop = asyncio.get_running_loop()
    while position < end:
        deadline = loop.time() + timeout_s
        while True:
            result = await _fetch(cluster, tp, position, timeout_s)
            if result.error_code == _E.NONE:
                break
            error = for_code(result.error_code, where(tp, result.error_message))
            if result.error_code == _E.OFFSET_OUT_OF_RANGE and result.log_start_offset > position:
                position = result.log_start_offset  # removed meanwhile (DeleteRecords)
                continue
            if result.error_code not in METADATA_ERRORS and not error.retriable:
                raise error
            if loop.time() + _BACKOFF_S > deadline:
                raise StromTimeoutError(f"reading {tp.topic}-{tp.partition} failed: {error}")
            cluster.mark_stale(tp.topic)
            await asyncio.sleep(_BACKOFF_S)
        moved = False
        for batch in decode_batches(result.records, allow_truncated_tail=True):
            header = batch.header
            if header.last_offset < position:
                continue
            if not header.is_control:
                for record in batch.records:
                    if position <= record.offset < end and record.key is not None:
                        replay(record.key, record.value, record.timestamp)
                        count += 1
            position = header.last_offset + 1
            moved = True
        if not moved:  # a leader always returns the batch at ``position`` below its HW
            raise StromError(f"{tp.topic}-{tp.partition}: no batch at offset {position} < {end}")
    return count


async def _fetch(
    cluster: ClusterClient, tp: TopicPartition, offset: int, timeout_s: float
) -> storage_pb2.FetchPartitionResult:
    request = storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=_FETCH_BYTES,
        partitions=[
            storage_pb2.FetchPartition(
                topic=tp.topic,
                partition=tp.partition,
                fetch_offset=offset,
                partition_max_bytes=_FETCH_BYTES,
            )
        ],
        client_id="strom-coordinator",
    )
    try:
        leader = await cluster.leader(tp)
        response = await storage_call(cluster, leader.leader, "Fetch", request, timeout_s)
    except StromError as exc:
        if not exc.retriable:
            raise
        return storage_pb2.FetchPartitionResult(
            error_code=_E.NETWORK_EXCEPTION, error_message=str(exc)
        )
    (result,) = response.partitions
    return result
