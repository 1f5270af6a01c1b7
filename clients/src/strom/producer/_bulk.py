"""``send_many``: its records planned into chunks (``plan_chunks``: one partition and at most
``batch_size`` each), and its one future (``BulkTracker``), settled when all its chunks are."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from strom.errors import ConfigurationError, UnknownTopicOrPartitionError
from strom.producer._accumulator import RECORD_OVERHEAD
from strom.producer._batch import ProducerBatch
from strom.producer._waits import NeedMetadata
from strom.producer.config import Serializer
from strom.producer.partitioner import Partitioner, StickyPartitioner, murmur2_partition

__all__ = ["BulkTracker", "Chunk", "plan_chunks", "serialized"]

#: (partition, timestamps, keys, values, size): records of one partition, within batch_size.
Chunk: TypeAlias = tuple[int, list[int], list[Any], list[Any], int]


class BulkTracker:
    """Completion of one ``send_many`` call: counts its chunks, settles once."""

    __slots__ = ("_done", "_error", "_lock", "_pending", "_records", "_sealed", "_settle")

    def __init__(self, settle: Callable[[int, BaseException | None], None]) -> None:
        self._settle = settle
        self._lock = threading.Lock()
        self._pending = 0
        self._records = 0
        self._sealed = False
        self._done = False
        self._error: BaseException | None = None

    def track(self, batch: ProducerBatch, count: int) -> None:
        with self._lock:
            self._pending += 1
            self._records += count
        batch.add_callback(self._chunk_done)

    def _chunk_done(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._pending -= 1
            if batch.error is not None and self._error is None:
                self._error = batch.error
            finish = self._sealed and self._pending == 0 and not self._done
            if finish:
                self._done = True
        if finish:
            self._settle(self._records, self._error)

    def seal(self, error: BaseException | None = None) -> None:
        """No more chunks; ``error`` is a failure that stopped the call part-way."""
        with self._lock:
            self._sealed = True
            if error is not None and self._error is None:
                self._error = error
            finish = self._pending == 0 and not self._done
            if finish:
                self._done = True
        if finish:
            self._settle(self._records, self._error)


def serialized(
    values: Sequence[Any],
    keys: Sequence[Any] | None,
    key_serializer: Serializer | None,
    value_serializer: Serializer | None,
) -> tuple[Sequence[Any], Sequence[Any] | None]:
    """send_many's values and keys through the serializers; keys, when given, pair up with
    the values (ConfigurationError otherwise)."""
    if keys is not None and len(keys) != len(values):
        raise ConfigurationError(
            f"send_many: {len(keys)} keys for {len(values)} values (lengths must match)"
        )
    if value_serializer is not None:
        values = [value_serializer(v) for v in values]
    if keys is not None and key_serializer is not None:
        keys = [key_serializer(k) for k in keys]
    return values, keys


def plan_chunks(  # noqa: PLR0917 - send_many's whole call, positional as there
    topic: str,
    count: int | None,
    values: Sequence[Any],
    keys: Sequence[Any] | None,
    partition: int | None,
    timestamp_ms: int | None,
    *,
    batch_size: int,
    max_record: int,
    partitioner: Partitioner | None,
    sticky: StickyPartitioner,
    too_large: Callable[[int], Exception],
) -> list[Chunk]:
    """Serialized ``values`` (and ``keys``) of a ``topic`` with ``count`` partitions as
    chunks, in record order per partition: keyed records partition as ``send`` does, keyless
    ones fill sticky partitions chunk by chunk. ``count`` None (not cached) raises
    NeedMetadata; a record over ``max_record`` raises ``too_large(size)``."""
    if count is None:
        raise NeedMetadata
    if partition is not None and not 0 <= partition < count:
        raise UnknownTopicOrPartitionError(
            f"partition {partition} of '{topic}' does not exist ({count} partitions)"
        )
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    chunks: list[Chunk] = []
    if keys is None:
        # One partition (given, or sticky: the next one after each full chunk).
        part = partition if partition is not None else sticky.partition(topic, count)
        cur_v: list[Any] = []
        size = 0
        for value in values:
            rsize = RECORD_OVERHEAD + (len(value) if value is not None else 0)
            if rsize > max_record:
                raise too_large(rsize)
            if cur_v and size + rsize > batch_size:
                chunks.append((part, [ts] * len(cur_v), [None] * len(cur_v), cur_v, size))
                if partition is None:
                    sticky.next(topic, count, part)
                    part = sticky.partition(topic, count)
                cur_v, size = [], 0
            cur_v.append(value)
            size += rsize
        if cur_v:
            chunks.append((part, [ts] * len(cur_v), [None] * len(cur_v), cur_v, size))
        return chunks
    groups: dict[int, tuple[list[Any], list[Any], list[int]]] = {}
    for key, value in zip(keys, values, strict=True):
        if partition is not None:
            part = partition
        elif partitioner is not None:
            part = partitioner(topic, key, count)
        elif key is not None:
            part = murmur2_partition(key, count)
        else:
            part = sticky.partition(topic, count)
        rsize = RECORD_OVERHEAD + (len(key) if key is not None else 0)
        rsize += len(value) if value is not None else 0
        if rsize > max_record:
            raise too_large(rsize)
        group = groups.get(part)
        if group is None:
            group = groups[part] = ([], [], [0])
        if group[1] and group[2][0] + rsize > batch_size:
            n = len(group[1])
            chunks.append((part, [ts] * n, group[0], group[1], group[2][0]))
            group = groups[part] = ([], [], [0])
        group[0].append(key)
        group[1].append(value)
        group[2][0] += rsize
    for part, (gk, gv, gs) in groups.items():
        chunks.append((part, [ts] * len(gv), gk, gv, gs[0]))
    return chunks
