"""The record accumulator: per-partition queues of batches and the buffer-memory bound.

Pure data structure, no I/O. ``append`` runs in the sending thread (any thread for the sync
producer, the event loop for the asyncio one) under one lock, taken once per record;
everything else is called by the sender on the event loop. A partition's queue holds its
batches oldest first: the head is drained when it is full (``batch_size``), older than
``linger_ms``, retried and due, or a flush or close is in progress. The last batch of a
queue is the one that fills.

``buffer_memory`` bounds the bytes of records appended but not yet completed (acknowledged or
failed): ``append`` returns None instead of exceeding it and the caller waits for room
(``wait_for_room`` in a thread, ``wait_for_room_async`` on the loop), up to ``max_block_ms``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from strom.producer._batch import ProducerBatch
from strom.producer._native import AccumulatorBase, cproducer
from strom.records import BatchBuilder, Compression

__all__ = ["Accumulator", "PartitionKey", "record_size"]

PartitionKey = tuple[str, int]

# Per-record bytes beyond key and value in the estimate (varints, attributes, deltas).
RECORD_OVERHEAD = 12


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[Any] | None) -> int:
    """Estimated encoded size of one record (used for batch_size and buffer_memory)."""
    size = RECORD_OVERHEAD + (len(key) if key is not None else 0)
    size += len(value) if value is not None else 0
    if headers:
        for name, data in headers:
            size += len(name) + (len(data) if data is not None else 0) + 4
    return size


class Accumulator(AccumulatorBase):
    """Per-partition batch queues bounded by ``buffer_memory``; thread-safe.

    ``used``, ``buffer_memory`` and ``batch_size`` are ``AccumulatorBase``'s fields (a C
    struct when the producer's fast path is built: its ``FastSend`` appends under ``_lock``
    as ``append`` does, opening batches with ``_fresh_batch``)."""

    def __init__(
        self,
        *,
        batch_size: int,
        buffer_memory: int,
        linger_ms: float,
        compression: Compression,
        wakeup: Callable[[], None] = lambda: None,
        transactional: bool = False,
    ) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.linger = linger_ms / 1000
        self.compression = compression
        #: Batches carry the transactional attribute (a transactional producer's).
        self.transactional = transactional
        self.wakeup = wakeup
        self.loop: asyncio.AbstractEventLoop | None = None  # set by the sender when it starts
        self.used = 0
        self.flushing = 0
        self.closing = False
        # The C fast path's lock has threading.Lock's interface and is taken from C directly.
        self._lock = threading.Lock() if cproducer is None else cproducer.Lock()
        self._room = threading.Condition(self._lock)
        self._room_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._queues: dict[PartitionKey, deque[ProducerBatch]] = {}
        self.incomplete: set[ProducerBatch] = set()

    # -- the sending side ----------------------------------------------------------------------

    def _new_batch(self, key: PartitionKey, queue: deque[ProducerBatch]) -> ProducerBatch:
        batch = ProducerBatch(
            key[0],
            key[1],
            BatchBuilder(compression=self.compression, is_transactional=self.transactional),
            time.monotonic(),
            self.loop,
        )
        queue.append(batch)
        self.incomplete.add(batch)
        return batch

    def _fresh_batch(self, pk: PartitionKey) -> ProducerBatch:
        """Close the open batch of ``pk`` (if any) and open a new one; under ``_lock`` (the C
        fast path's way to a new batch)."""
        queue = self._queues.get(pk)
        if queue is None:
            queue = self._queues[pk] = deque()
        elif queue:
            queue[-1].closed = True
        return self._new_batch(pk, queue)

    def append(  # noqa: PLR0917 - the per-record hot path, positional for speed
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Any] | None,
        size: int,
    ) -> tuple[ProducerBatch, int] | None:
        """Append one record; returns (batch, index in it), or None when buffer_memory has no
        room for ``size`` bytes. Raises TypeError/ValueError for a bad record (nothing added)."""
        wake = False
        with self._lock:
            if self.used + size > self.buffer_memory:
                return None
            pk = (topic, partition)
            queue = self._queues.get(pk)
            if queue is None:
                queue = self._queues[pk] = deque()
            batch = queue[-1] if queue else None
            if batch is None or batch.closed:
                batch = self._new_batch(pk, queue)
                wake = True
            elif batch.size + size > self.batch_size:
                batch.closed = True
                batch = self._new_batch(pk, queue)
                wake = True
            try:
                index = batch.append(timestamp, key, value, headers)
            except BaseException:
                if batch.count == 0:
                    self._drop_empty(pk, queue, batch)
                raise
            batch.count = index + 1
            batch.size += size
            self.used += size
            if batch.size >= self.batch_size:
                batch.closed = True
                wake = True
        if wake:
            self.wakeup()
        return batch, index

    def append_many(  # noqa: PLR0917 - parallel columns, as BatchBuilder.append_many
        self,
        topic: str,
        partition: int,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        headers: Sequence[Any] | None,
        size: int,
    ) -> ProducerBatch | None:
        """Append records (all or none) to one batch of the partition; the caller keeps each
        call within batch_size. Returns the batch, or None when buffer_memory has no room."""
        with self._lock:
            if self.used + size > self.buffer_memory:
                return None
            pk = (topic, partition)
            queue = self._queues.get(pk)
            if queue is None:
                queue = self._queues[pk] = deque()
            batch = queue[-1] if queue else None
            if batch is None or batch.closed or batch.size + size > self.batch_size:
                if batch is not None:
                    batch.closed = True
                batch = self._new_batch(pk, queue)
            builder = batch.builder
            assert builder is not None
            try:
                builder.append_many(timestamps, keys, values, headers)
            except BaseException:
                if batch.count == 0:
                    self._drop_empty(pk, queue, batch)
                raise
            batch.count += len(values)
            batch.size += size
            self.used += size
            if batch.size >= self.batch_size:
                batch.closed = True
        self.wakeup()
        return batch

    def _drop_empty(
        self, pk: PartitionKey, queue: deque[ProducerBatch], batch: ProducerBatch
    ) -> None:
        queue.remove(batch)
        self.incomplete.discard(batch)
        if not queue:
            del self._queues[pk]

    def wait_for_room(self, size: int, timeout: float) -> bool:
        """Block the calling thread until ``size`` bytes fit; False after ``timeout`` s."""
        with self._room:
            return self._room.wait_for(lambda: self.used + size <= self.buffer_memory, timeout)

    async def wait_for_room_async(self, size: int, timeout: float) -> bool:  # noqa: ASYNC109
        """Wait on the running loop until ``size`` bytes fit; False after ``timeout`` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with self._lock:
                if self.used + size <= self.buffer_memory:
                    return True
                waiter = loop.create_future()
                self._room_waiters.append((loop, waiter))
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                async with asyncio.timeout(left):
                    await waiter
            except TimeoutError:
                return False

    # -- the sender side (event loop) ----------------------------------------------------------

    def ready(self, now: float) -> tuple[list[PartitionKey], float | None]:
        """Partitions whose head batch may be sent now, and the next time another becomes
        ready by itself (linger or retry backoff), or None."""
        ready: list[PartitionKey] = []
        next_at: float | None = None
        force = self.flushing > 0 or self.closing
        linger = self.linger
        with self._lock:
            for pk, queue in self._queues.items():
                if not queue:
                    continue
                head = queue[0]
                if head.attempts:
                    at = head.retry_at
                elif head.closed or force:
                    at = now
                else:
                    at = head.created + linger
                if at <= now:
                    ready.append(pk)
                elif next_at is None or at < next_at:
                    next_at = at
        return ready, next_at

    def queued_partitions(self) -> list[PartitionKey]:
        """Partitions with at least one batch queued (ready or lingering)."""
        with self._lock:
            return [pk for pk, queue in self._queues.items() if queue]

    def pop(
        self, pk: PartitionKey, now: float, *, fresh_only: bool = False, max_size: int = 0
    ) -> ProducerBatch | None:
        """Take the head batch of ``pk`` if it may be sent now (closing it); with
        ``fresh_only`` only a never-sent one, with ``max_size`` only one at most that big."""
        with self._lock:
            queue = self._queues.get(pk)
            if not queue:
                return None
            head = queue[0]
            if max_size and head.size > max_size:
                return None
            if head.attempts:
                if fresh_only or head.retry_at > now:
                    return None
            elif not (
                head.closed or self.flushing or self.closing or now - head.created >= self.linger
            ):
                return None
            queue.popleft()
            head.closed = True
            if not queue:
                del self._queues[pk]
            return head

    def has_ready(self, pk: PartitionKey, now: float) -> bool:
        with self._lock:
            queue = self._queues.get(pk)
            if not queue:
                return False
            head = queue[0]
            if head.attempts:
                return head.retry_at <= now
            return bool(
                head.closed or self.flushing or self.closing or now - head.created >= self.linger
            )

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a batch to retry back at the front of its queue, in first-drain order (by
        sequence with idempotence), ahead of never-sent batches."""
        pk = (batch.topic, batch.partition)
        with self._lock:
            queue = self._queues.get(pk)
            if queue is None:
                queue = self._queues[pk] = deque()
            position = 0
            for other in queue:
                if not other.attempts or _order(other) > _order(batch):
                    break
                position += 1
            queue.insert(position, batch)

    def release(self, batch: ProducerBatch) -> None:
        """A batch completed: give its bytes back and wake whoever waits for room."""
        with self._lock:
            self.incomplete.discard(batch)
            self.used -= batch.size
            batch.size = 0
            self._room.notify_all()
            waiters, self._room_waiters = self._room_waiters, []
        for loop, waiter in waiters:
            loop.call_soon_threadsafe(_settle, waiter)

    def take_expired(self, now: float, delivery_timeout: float) -> list[ProducerBatch]:
        """Remove and return the queued batches older than ``delivery_timeout`` seconds."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for pk, queue in list(self._queues.items()):
                keep = deque(b for b in queue if not b.expired(now, delivery_timeout))
                if len(keep) != len(queue):
                    expired.extend(b for b in queue if b.expired(now, delivery_timeout))
                    if keep:
                        self._queues[pk] = keep
                    else:
                        del self._queues[pk]
        for batch in expired:
            batch.closed = True
        return expired

    def head_size(self, pk: PartitionKey) -> int:
        """Estimated size of the head batch of ``pk`` (0 when none)."""
        with self._lock:
            queue = self._queues.get(pk)
            return queue[0].size if queue else 0

    def take_sequenced(self, pk: PartitionKey) -> list[ProducerBatch]:
        """Remove and return the batches of ``pk`` that already have a sequence number."""
        with self._lock:
            queue = self._queues.get(pk)
            if not queue:
                return []
            taken = [b for b in queue if b.base_sequence >= 0]
            if taken:
                rest = deque(b for b in queue if b.base_sequence < 0)
                if rest:
                    self._queues[pk] = rest
                else:
                    del self._queues[pk]
            return taken

    def take_all(self, pk: PartitionKey | None = None) -> list[ProducerBatch]:
        """Remove and return every queued batch (of ``pk``, or of all partitions)."""
        with self._lock:
            if pk is not None:
                queue = self._queues.pop(pk, None)
                taken = list(queue or ())
            else:
                taken = [b for q in self._queues.values() for b in q]
                self._queues.clear()
        for batch in taken:
            batch.closed = True
        return taken

    def queued(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())


def _order(batch: ProducerBatch) -> tuple[int, float]:
    return (batch.base_sequence, batch.created)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
