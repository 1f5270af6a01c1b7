"""One Spark task's read: an offset range of one partition, straight from its leader.

Each call opens its own ``ClusterClient`` (bootstrap through the gateway, then a channel to the
leader) on a private background loop, so ``read()`` keeps no state between tasks. The next
``Fetch`` is in flight while the current response is turned into an Arrow batch: the network
wait overlaps the decoding. Leader moves and network errors refresh the metadata and retry.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Iterator

import pyarrow as pa

from strom.cluster import (
    METADATA_ERRORS,
    BackgroundLoop,
    ClusterClient,
    list_offsets,
    storage_call,
    where,
)
from strom.errors import StromError, StromTimeoutError, TruncatedBatchError, for_code
from strom.protocol.v1 import common_pb2, storage_pb2
from strom.records.header import read_header
from strom.security import SecurityConfig
from strom.types import TopicPartition
from strom_spark.arrow import records_to_arrow
from strom_spark.offsets import data_loss
from strom_spark.options import SourceOptions
from strom_spark.planning import OffsetRange

__all__ = ["fetch_partition", "next_offset", "read_range"]

_E = common_pb2.ErrorCode
_MAX_WAIT_MS = 500
_BACKOFF_S = 0.1
_DELETED = "deleted by retention or delete-records before this query read them"


def next_offset(raw: bytes, position: int) -> int:
    """The offset after the last whole batch of ``raw`` (``position`` when there is none)."""
    pos, end = 0, len(raw)
    while pos < end:
        try:
            header = read_header(raw, pos)
        except TruncatedBatchError:
            break
        position = max(position, header.base_offset + header.last_offset_delta + 1)
        pos += header.size
    return position


async def fetch_partition(  # noqa: PLR0917 - the connector's own helper
    cluster: ClusterClient,
    tp: TopicPartition,
    offset: int,
    max_bytes: int,
    timeout_s: float,
    read_committed: bool = False,
) -> storage_pb2.FetchPartitionResult:
    """One Fetch from the leader, retried across leader changes until ``timeout_s``
    (``read_committed``: up to the last stable offset, with the aborted transactions)."""
    deadline = time.monotonic() + timeout_s
    last: StromError | None = None
    while True:
        leader = await cluster.leader(tp)
        request = storage_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=_MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=(
                common_pb2.READ_COMMITTED if read_committed else common_pb2.READ_UNCOMMITTED
            ),
            client_id=cluster.client_id,
        )
        request.partitions.add(
            topic=tp.topic,
            partition=tp.partition,
            fetch_offset=offset,
            current_leader_epoch=leader.leader_epoch,
            partition_max_bytes=max_bytes,
        )
        try:
            response = await storage_call(cluster, leader.leader, "Fetch", request, timeout_s)
        except StromError as exc:
            if not exc.retriable:
                raise
            last = exc
        else:
            (result,) = response.partitions
            if result.error_code not in METADATA_ERRORS:
                return result
            last = for_code(result.error_code, where(tp, result.error_message))
        cluster.mark_stale(tp.topic)
        if time.monotonic() + _BACKOFF_S > deadline:
            raise StromTimeoutError(f"fetch {where(tp, '')} from {offset} failed: {last}")
        await asyncio.sleep(_BACKOFF_S)  # retry backoff, not synchronisation


async def _bounds(cluster: ClusterClient, tp: TopicPartition, timeout_s: float) -> tuple[int, int]:
    """(log start offset, high watermark) of ``tp`` now."""
    earliest = await list_offsets(cluster, {tp: (common_pb2.EARLIEST, 0)}, timeout_s=timeout_s)
    latest = await list_offsets(cluster, {tp: (common_pb2.LATEST, 0)}, timeout_s=timeout_s)
    return earliest[tp][0], latest[tp][0]


def read_range(options: SourceOptions, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``r`` as Arrow batches (one per Fetch response)."""
    if r.size <= 0:
        return
    tp = r.tp
    timeout_s = options.request_timeout_ms / 1000
    bg = BackgroundLoop("strom-spark-fetch")
    cluster = ClusterClient(
        options.bootstrap_servers,
        request_timeout_ms=options.request_timeout_ms,
        client_id="strom-spark",
        security=SecurityConfig(**options.security) if options.security else None,  # type: ignore[arg-type]
    )

    def fetch(offset: int) -> concurrent.futures.Future[storage_pb2.FetchPartitionResult]:
        return bg.submit(
            fetch_partition(
                cluster, tp, offset, options.fetch_max_bytes, timeout_s, options.read_committed
            )
        )

    pending: concurrent.futures.Future[storage_pb2.FetchPartitionResult] | None = fetch(r.start)
    position = r.start
    fail = options.fail_on_data_loss
    try:
        while pending is not None:
            result = pending.result()
            pending = None
            if result.error_code == _E.OFFSET_OUT_OF_RANGE:
                start, high = bg.run(_bounds(cluster, tp, timeout_s))
                if position < start:
                    data_loss(tp, position, min(start, r.end), _DELETED, fail)
                    position = start
                elif position >= high:
                    data_loss(tp, position, r.end, f"the log now ends at {high}", fail)
                    return
                else:  # a leader still catching up: the range is there, ask again
                    bg.run(asyncio.sleep(_BACKOFF_S))
                if position < r.end:
                    pending = fetch(position)
                continue
            if result.error_code != _E.NONE:
                raise for_code(result.error_code, where(tp, result.error_message))
            raw = result.records
            after = next_offset(raw, position)
            if after == position:
                if result.high_watermark <= position:
                    why = f"the high watermark is now {result.high_watermark}"
                    data_loss(tp, position, r.end, why, fail)
                    return
                pending = fetch(position)
                continue
            if after < r.end:
                pending = fetch(after)
            aborted = [(a.producer_id, a.first_offset) for a in result.aborted_transactions]
            batch = records_to_arrow(
                raw,
                tp,
                position,
                r.end,
                include_headers=options.include_headers,
                aborted=aborted if options.read_committed else None,
            )
            position = after
            if batch is not None:
                yield batch
    finally:
        if pending is not None:
            pending.cancel()
        try:
            bg.run(cluster.close())
        finally:
            bg.stop()
