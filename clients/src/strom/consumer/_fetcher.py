"""The consumer's fetcher: prefetching per storage node, offset resets, record decoding.

One manager task wakes whenever something changes (an assignment, a seek, a completed fetch,
data drained by ``poll``) and, for each leader node without a request in flight, sends one
``Fetch`` for that node's positioned, un-paused partitions whose buffered bytes are under
``max_partition_fetch_bytes`` (and while the whole buffer is under ``fetch_max_bytes``). So
each node always has one long-poll fetch in flight while the application works through the
data already fetched. Responses are kept as raw bytes; ``decode_records`` turns a chunk into
``ConsumerRecord`` tuples only when ``poll`` reaches it.

Partitions without a position get one ``ListOffsets`` per node (``auto_offset_reset``). Leader
errors (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...) and network errors mark the topic's
metadata stale; the manager refreshes it and routes the next fetch to the new leader. A topic
the metadata refuses (TOPIC_AUTHORIZATION_FAILED: no DESCRIBE) makes ``poll`` raise
``TopicAuthorizationFailedError`` for its partitions, as a refused Fetch does (no READ).

Under ``isolation_level="read_committed"`` fetches ask for READ_COMMITTED: the leader returns
data up to the last stable offset and, with each chunk, the aborted transactions overlapping
it (producer id, first offset); ``decode_records`` drops those transactions' batches with
Kafka's algorithm (``strom.consumer.aborted``). Control batches (COMMIT/ABORT markers) are never
returned under either level; positions step over them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from itertools import repeat
from typing import Any

from strom.cluster import METADATA_ERRORS, ClusterClient, list_offsets, storage_call, where
from strom.cluster.retry import Backoff
from strom.consumer._subscription import PartitionState, SubscriptionState
from strom.consumer.aborted import AbortedTransaction, AbortedTransactionFilter
from strom.consumer.config import Deserializer
from strom.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    StromError,
    TopicAuthorizationFailedError,
    TruncatedBatchError,
    for_code,
)
from strom.protocol.v1 import common_pb2, storage_pb2
from strom.records import decode_columns, read_header
from strom.records.header import ATTR_CONTROL, ATTR_TIMESTAMP_TYPE
from strom.types import ConsumerRecord, TopicPartition

__all__ = ["Fetcher", "decode_records", "next_fetch_offset"]

log = logging.getLogger("strom.consumer")


_E = common_pb2.ErrorCode
_METADATA_BACKOFF_MIN_S = 0.05
_METADATA_BACKOFF_MAX_S = 1.0

_new_record = partial(tuple.__new__, ConsumerRecord)


def _sizes(items: list[bytes | None]) -> list[int]:
    if None in items:
        return [-1 if item is None else len(item) for item in items]
    return list(map(len, items))  # type: ignore[arg-type]


def _deserialize(fn: Callable[[bytes], Any], items: list[bytes | None]) -> list[Any]:
    return [None if item is None else fn(item) for item in items]


def decode_records(  # noqa: PLR0917 - positional, the hot path
    raw: bytes,
    tp: TopicPartition,
    position: int,
    key_deserializer: Deserializer | None = None,
    value_deserializer: Deserializer | None = None,
    aborted: Sequence[AbortedTransaction] | None = None,
) -> tuple[list[ConsumerRecord], int]:
    """The records of ``raw`` (whole batches from one fetch) at or above ``position``, and the
    offset after the last batch (past any records compaction removed, and control batches).
    ``aborted``: the chunk's aborted transactions (read_committed), whose batches are dropped.

    Whole batches are decoded in one call each (``decode_columns``) and the tuples built by
    ``map`` over the columns: no per-record Python code runs unless a deserializer is set.
    The cyclic GC is paused meanwhile: tuples of bytes cannot form cycles, and its collections
    triggered by these allocations cost as much as building the records (measured).
    """
    paused_gc = gc.isenabled()
    if paused_gc:
        gc.disable()
    try:
        return _decode(
            raw,
            tp,
            position,
            key_deserializer,
            value_deserializer,
            AbortedTransactionFilter(aborted) if aborted else None,
        )
    finally:
        if paused_gc:
            gc.enable()


def _decode(  # noqa: PLR0917 - positional, the hot path
    raw: bytes,
    tp: TopicPartition,
    position: int,
    key_deserializer: Deserializer | None,
    value_deserializer: Deserializer | None,
    aborted: AbortedTransactionFilter | None,
) -> tuple[list[ConsumerRecord], int]:
    out: list[ConsumerRecord] = []
    next_offset = position
    topic, partition = tp.topic, tp.partition
    for columns in decode_columns(raw, allow_truncated_tail=True):
        header = columns.header
        end = header.base_offset + header.last_offset_delta + 1
        if end <= position:
            continue
        next_offset = max(next_offset, end)
        attributes = header.attributes
        offsets, timestamps = columns.offsets, columns.timestamps
        keys, values, headers = columns.keys, columns.values, columns.headers
        if aborted is not None:
            if aborted.drops(header, keys, values):
                continue
        elif attributes & ATTR_CONTROL:
            continue
        if not offsets:
            continue
        if offsets[0] < position:
            start = bisect_left(offsets, position)
            offsets, timestamps = offsets[start:], timestamps[start:]
            keys, values, headers = keys[start:], values[start:], headers[start:]
        count = len(offsets)
        key_sizes, value_sizes = _sizes(keys), _sizes(values)
        if key_deserializer is not None:
            keys = _deserialize(key_deserializer, keys)
        if value_deserializer is not None:
            values = _deserialize(value_deserializer, values)
        out.extend(
            map(
                _new_record,
                zip(
                    repeat(topic, count),
                    repeat(partition, count),
                    offsets,
                    timestamps,
                    repeat(1 if attributes & ATTR_TIMESTAMP_TYPE else 0, count),
                    keys,
                    values,
                    headers,
                    key_sizes,
                    value_sizes,
                    repeat(header.partition_leader_epoch, count),
                    strict=True,
                ),
            )
        )
    return out, next_offset


def next_fetch_offset(raw: bytes) -> int | None:
    """The offset after the last complete batch of ``raw`` (None when there is none)."""
    pos, end, found = 0, len(raw), None
    while pos < end:
        try:
            header = read_header(raw, pos)
        except TruncatedBatchError:
            break
        found = header.base_offset + header.last_offset_delta + 1
        pos += header.size
    return found


class Fetcher:
    """Keeps one Fetch in flight per leader node for the assigned partitions (see module doc).

    Not thread-safe: it lives on the consumer's event loop.
    """

    def __init__(
        self,
        cluster: ClusterClient,
        subscriptions: SubscriptionState,
        *,
        fetch_min_bytes: int,
        fetch_max_wait_ms: int,
        fetch_max_bytes: int,
        max_partition_fetch_bytes: int,
        isolation_level: int,
        retry_backoff_ms: int,
        request_timeout_ms: int,
        client_id: str,
        before_step: Callable[[], Awaitable[float | None]] | None = None,
    ) -> None:
        self._cluster = cluster
        self._subs = subscriptions
        self._min_bytes = fetch_min_bytes
        self._max_wait_ms = fetch_max_wait_ms
        self._max_bytes = fetch_max_bytes
        self._partition_max_bytes = max_partition_fetch_bytes
        self._isolation = isolation_level
        self._backoff = retry_backoff_ms / 1000
        self._timeout = request_timeout_ms / 1000
        self._client_id = client_id
        self._before_step = before_step
        self._wake = asyncio.Event()
        #: Set when records or an error are ready for ``poll``, or a position was reset.
        self.data_ready = asyncio.Event()
        self._fetches: dict[int, asyncio.Task[None]] = {}
        self._resets: dict[int, asyncio.Task[None]] = {}
        self._stale: set[str] = set()
        self._metadata_at = 0.0
        self._metadata_backoff = Backoff(
            max(self._backoff, _METADATA_BACKOFF_MIN_S),
            max(self._backoff, _METADATA_BACKOFF_MAX_S),
        )
        self._task: asyncio.Task[None] | None = None
        #: An error of the manager itself (metadata), raised by the next poll.
        self.error: StromError | None = None

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        self._wake.set()

    async def close(self) -> None:
        tasks = [t for t in (self._task, *self._fetches.values(), *self._resets.values()) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    # -- the manager ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                delay = await self._step()
            except asyncio.CancelledError:
                raise
            except StromError as exc:
                # Retriable (the gateway restarting...): try again; the rest reaches poll.
                if exc.retriable:
                    log.debug("consumer fetcher step failed, retrying: %s", exc)
                else:
                    self.error = exc
                    self.data_ready.set()
                delay = self._backoff
            except Exception as exc:  # a bug must surface in poll, not kill fetching silently
                log.exception("consumer fetcher step failed")
                self.error = StromError(f"consumer fetcher failed: {exc!r}")
                self.data_ready.set()
                delay = self._backoff
            if delay is None:
                await self._wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()

    async def _step(self) -> float | None:
        """Refresh what needs refreshing, start fetches and resets; the delay until the next
        step is due by itself (None: only when woken)."""
        delays: list[float] = []
        if self._before_step is not None:
            delay = await self._before_step()
            if delay is not None:
                delays.append(delay)
        loop = asyncio.get_running_loop()
        now = loop.time()
        cluster, assignment = self._cluster, self._subs.assignment
        missing = {
            tp.topic
            for tp in assignment
            if tp.topic in self._stale
            or (leader := cluster.cached(tp)) is None
            or leader.leader < 0
        }
        if missing:
            wait = self._metadata_at - now
            if wait > 0:
                delays.append(wait)
            else:
                for topic in missing:
                    cluster.mark_stale(topic)
                try:
                    await cluster.refresh(sorted(missing))
                    self._stale -= missing
                except TopicAuthorizationFailedError as exc:
                    # The others were refreshed; these stay missing and raise from poll.
                    self._stale -= missing
                    self._refused(missing & exc.unauthorized_topics)
                except StromError as exc:
                    log.debug("metadata refresh failed: %s", exc)
                # Back off growing while leaders stay unknown; reset once all are known.
                delay = self._metadata_backoff.next()
                self._metadata_at = loop.time() + delay
                delays.append(delay)
        else:
            self._metadata_backoff.reset()
        now = loop.time()
        resets: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp, st in assignment.items():
            if st.reset is None or st.inflight:
                continue
            if st.backoff_until > now:
                delays.append(st.backoff_until - now)
                continue
            leader = cluster.cached(tp)
            if leader is not None and leader.leader >= 0 and tp.topic not in self._stale:
                resets[leader.leader].append(tp)
        for node, tps in resets.items():
            if node not in self._resets:
                self._resets[node] = loop.create_task(self._reset(node, tps))
        if self._subs.buffered_bytes() < self._max_bytes:
            fetches: dict[int, list[tuple[TopicPartition, int]]] = defaultdict(list)
            for tp in self._subs.fetchable(now, self._partition_max_bytes):
                leader = cluster.cached(tp)
                if leader is not None and leader.leader >= 0 and tp.topic not in self._stale:
                    fetches[leader.leader].append((tp, leader.leader_epoch))
            for node, parts in fetches.items():
                if node not in self._fetches:
                    self._fetches[node] = loop.create_task(self._fetch(node, parts))
        for st in assignment.values():
            if st.backoff_until > now and not st.inflight:
                delays.append(st.backoff_until - now)
        return max(min(delays), 0.001) if delays else None

    # -- fetch ---------------------------------------------------------------------------------

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, int]]) -> None:
        request = storage_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=self._max_wait_ms,
            min_bytes=self._min_bytes,
            max_bytes=self._max_bytes,
            isolation_level=self._isolation,  # type: ignore[arg-type]
            client_id=self._client_id,
        )
        sent: list[tuple[TopicPartition, PartitionState, int, int]] = []
        for tp, epoch in parts:
            st = self._subs.assignment[tp]
            assert st.fetch_offset is not None
            st.inflight = True
            sent.append((tp, st, st.generation, st.fetch_offset))
            request.partitions.add(
                topic=tp.topic,
                partition=tp.partition,
                fetch_offset=st.fetch_offset,
                current_leader_epoch=epoch,
                partition_max_bytes=self._partition_max_bytes,
            )
        try:
            response = await self._call(node, "Fetch", request, self._max_wait_ms / 1000)
        except StromError as exc:
            self._request_failed([(tp, st) for tp, st, _, _ in sent], exc)
            return
        finally:
            for _, st, _, _ in sent:
                st.inflight = False
            self._fetches.pop(node, None)
            self.wake()
        results = {(r.topic, r.partition): r for r in response.partitions}
        for tp, st, generation, offset in sent:
            result = results.get((tp.topic, tp.partition))
            if result is not None and self._current(tp, st, generation, offset):
                self._fetched(tp, st, offset, result)

    def _current(
        self, tp: TopicPartition, st: PartitionState, generation: int, offset: int
    ) -> bool:
        """Whether a response still applies: same assignment, no seek or reset since sent."""
        return (
            self._subs.assignment.get(tp) is st
            and st.generation == generation
            and st.fetch_offset == offset
        )

    def _fetched(
        self,
        tp: TopicPartition,
        st: PartitionState,
        offset: int,
        result: storage_pb2.FetchPartitionResult,
    ) -> None:
        code = result.error_code
        if code == _E.NONE:
            st.high_watermark = result.high_watermark
            st.log_start_offset = result.log_start_offset
            st.last_stable_offset = result.last_stable_offset
            raw = result.records
            if not raw:
                return
            try:
                next_offset = next_fetch_offset(raw)
            except CorruptRecordError as exc:
                next_offset, st.error = None, exc
            if next_offset is None:
                st.error = st.error or CorruptRecordError(
                    f"{tp.topic}-{tp.partition}: the fetch at offset {offset} held no whole batch"
                )
            else:
                st.raw.append(raw)
                st.raw_aborted.append(
                    [(a.producer_id, a.first_offset) for a in result.aborted_transactions]
                    if result.aborted_transactions
                    else None
                )
                st.raw_bytes += len(raw)
                st.fetch_offset = next_offset
            self.data_ready.set()
        elif code == _E.OFFSET_OUT_OF_RANGE:
            if self._subs.default_reset == "none":
                st.error = OffsetOutOfRangeError(
                    f"{tp.topic}-{tp.partition}: offset {offset} is out of range and "
                    "auto_offset_reset is 'none' (seek() to a valid offset)"
                )
                self.data_ready.set()
            else:
                log.info(
                    "%s-%d: offset %d out of range, resetting to %s",
                    tp.topic,
                    tp.partition,
                    offset,
                    self._subs.default_reset,
                )
                if st.buffered():
                    # Records fetched before the log moved on are still valid: deliver them.
                    st.reset_after_buffer = self._subs.default_reset
                else:
                    st.request_reset(self._subs.default_reset)
        else:
            self._partition_failed(tp, st, for_code(code, where(tp, result.error_message)))

    def _partition_failed(self, tp: TopicPartition, st: PartitionState, exc: StromError) -> None:
        if getattr(exc, "code", None) in METADATA_ERRORS or exc.retriable:
            log.debug("%s-%d: %s; retrying", tp.topic, tp.partition, exc)
            if getattr(exc, "code", None) in METADATA_ERRORS:
                self._stale.add(tp.topic)
            st.backoff_until = asyncio.get_running_loop().time() + self._backoff
        else:
            st.error = exc
            self.data_ready.set()

    def _refused(self, topics: set[str]) -> None:
        """Metadata refused ``topics`` (no DESCRIBE): their partitions raise from ``poll``."""
        for tp, st in self._subs.assignment.items():
            if tp.topic in topics and st.error is None:
                st.error = TopicAuthorizationFailedError(
                    where(tp, f"not authorized to describe topic '{tp.topic}'"), [tp.topic]
                )
                self.data_ready.set()

    def _request_failed(
        self, parts: list[tuple[TopicPartition, PartitionState]], exc: StromError
    ) -> None:
        for tp, st in parts:
            if self._subs.assignment.get(tp) is st:
                self._partition_failed(tp, st, exc)

    async def _call(self, node: int, method: str, request: Any, extra_s: float = 0.0) -> Any:
        return await storage_call(self._cluster, node, method, request, self._timeout + extra_s)

    # -- offset resets -------------------------------------------------------------------------

    async def _reset(self, node: int, tps: list[TopicPartition]) -> None:
        request = storage_pb2.ListOffsetsRequest(replica_id=-1, isolation_level=self._isolation)  # type: ignore[arg-type]
        sent: list[tuple[TopicPartition, PartitionState, int, str]] = []
        for tp in tps:
            st = self._subs.assignment[tp]
            leader = self._cluster.cached(tp)
            assert st.reset is not None and leader is not None
            st.inflight = True
            sent.append((tp, st, st.generation, st.reset))
            request.partitions.add(
                topic=tp.topic,
                partition=tp.partition,
                spec=common_pb2.EARLIEST if st.reset == "earliest" else common_pb2.LATEST,
                current_leader_epoch=leader.leader_epoch,
            )
        try:
            response = await self._call(node, "ListOffsets", request)
        except StromError as exc:
            self._request_failed([(tp, st) for tp, st, _, _ in sent], exc)
            return
        finally:
            for _, st, _, _ in sent:
                st.inflight = False
            self._resets.pop(node, None)
            self.wake()
        results = {(r.topic, r.partition): r for r in response.partitions}
        for tp, st, generation, strategy in sent:
            result = results.get((tp.topic, tp.partition))
            if result is None or self._subs.assignment.get(tp) is not st:
                continue
            if st.generation != generation or st.reset != strategy:
                continue
            if result.error_code:
                self._partition_failed(
                    tp, st, for_code(result.error_code, where(tp, result.error_message))
                )
            else:
                st.seek(result.offset)
        self.data_ready.set()

    async def list_offsets(
        self, specs: dict[TopicPartition, tuple[int, int]], timeout_s: float
    ) -> dict[TopicPartition, tuple[int, int]]:
        """``strom.cluster.list_offsets`` with this fetcher's isolation level."""
        return await list_offsets(
            self._cluster,
            specs,
            isolation_level=self._isolation,
            timeout_s=timeout_s,
            backoff_s=self._backoff,
        )
