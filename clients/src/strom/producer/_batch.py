"""A producer batch and the per-record futures tied to it.

``ProducerBatch`` is one v2 record batch for one partition while it fills, waits, flies and is
retried. It completes once (base offset or error) and then completes every record in it:
``RecordFuture`` is a four-slot view (batch, index, timestamp, sizes) rather than a future
with its own lock, because per-record cost decides the producer's speed.

Completion runs on the producer's event loop; callbacks registered on a batch run there, in
registration order. Blocking waiters (``RecordFuture.result``) share one ``threading.Event``
per batch, created only when somebody actually waits.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from strom.errors import StromError, StromTimeoutError
from strom.producer._native import BatchBase, FutureBase
from strom.records import BatchBuilder

__all__ = ["DeliveryCallback", "ProducerBatch", "RecordFuture", "RecordMetadata"]

#: ``on_delivery(metadata, error)``: exactly one of the two is None.
DeliveryCallback = Callable[["RecordMetadata | None", "BaseException | None"], Any]

# Hands a batch's completion over to blocking waiters (taken once per batch, never per record).
_WAIT_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record was written. ``offset`` is -1 with acks=0 (unknown)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class ProducerBatch(BatchBase):
    """One batch of one partition. Filled under the accumulator's lock; everything after
    ``close()`` happens on the event loop.

    The per-record fields (``size``, ``count``, ``closed``, ``append``, ``deliveries``) are
    ``BatchBase``'s, a C struct when the producer's fast path is built. ``deliveries`` holds
    the records' ``on_delivery`` callbacks and done callbacks as ``(future, callback)`` pairs
    (``(None, call)`` for a done callback), run in registration order before the batch's own
    ``callbacks`` when it completes."""

    __slots__ = (
        "attempts",
        "base_offset",
        "base_sequence",
        "builder",
        "callbacks",
        "created",
        "data",
        "done",
        "error",
        "event",
        "log_append_time",
        "loop",
        "partition",
        "producer_epoch",
        "producer_id",
        "retry_at",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        builder: BatchBuilder,
        now: float,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.topic = topic
        self.loop = loop  # the producer's event loop, which completes the batch
        self.partition = partition
        self.builder: BatchBuilder | None = builder
        self.created = now
        # The record writer's append (BatchBuilder.append without its Python frame: this is
        # the per-record path).
        self.append: Callable[..., int] = builder._append
        self.size = 0  # estimated bytes of the records appended, held in buffer_memory
        self.count = 0
        self.closed = False
        self.data: bytes | None = None
        self.attempts = 0
        self.retry_at = 0.0
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.callbacks: list[Callable[[ProducerBatch], Any]] | None = None
        self.deliveries: list[tuple[Any, Any]] | None = None  # created by the first one
        self.event: threading.Event | None = None

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.topic}-{self.partition}, records={self.count}, "
            f"seq={self.base_sequence}, attempts={self.attempts})"
        )

    def build(self) -> bytes:
        """The batch's bytes (built once; the builder is dropped)."""
        if self.data is None:
            assert self.builder is not None
            self.data = self.builder.build()
            self.builder = None
            self.append = _sealed
        return self.data

    def add_callback(self, fn: Callable[[ProducerBatch], Any]) -> None:
        """Run ``fn(batch)`` at completion (at once, in this thread, if already complete)."""
        with _WAIT_LOCK:
            if not self.done:
                if self.callbacks is None:
                    self.callbacks = [fn]
                else:
                    self.callbacks.append(fn)
                return
        fn(self)

    def add_delivery(self, future: RecordFuture | None, callback: Any) -> None:
        """Run ``callback(metadata, error)`` for ``future`` at completion (``callback()`` when
        ``future`` is None); at once, in this thread, if the batch already completed."""
        with _WAIT_LOCK:
            if not self.done:
                deliveries = self.deliveries
                if deliveries is None:
                    self.deliveries = [(future, callback)]
                else:
                    deliveries.append((future, callback))
                return
        _run_delivery(future, callback)

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Settle the batch (once) and run the records' callbacks, then its own; a failing
        callback is reported via the loop's exception handler and does not stop the others."""
        with _WAIT_LOCK:
            if self.done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self.done = True
            event = self.event
            callbacks = self.callbacks
            self.callbacks = None
            deliveries = self.deliveries
            self.deliveries = None
        self.builder = None
        self.append = _sealed
        self.data = None
        if event is not None:
            event.set()
        if deliveries:
            for future, callback in deliveries:
                try:
                    _run_delivery(future, callback)
                except Exception as exc:  # a user callback must not break the sender
                    _report(exc)
        if callbacks:
            for fn in callbacks:
                try:
                    fn(self)
                except Exception as exc:  # a user callback must not break the sender
                    _report(exc)

    def wait(self, timeout: float | None) -> bool:
        """Block until complete; False when ``timeout`` seconds passed first. Refuses to
        block the producer's own event-loop thread, which is the one that would complete it."""
        if self.done:
            return True
        if (
            (timeout is None or timeout > 0)
            and self.loop is not None
            and _running_loop() is self.loop
        ):
            raise StromError(
                "RecordFuture.result()/exception() would block the producer's event-loop "
                "thread (inside a callback or a coroutine?); await the future or use "
                "add_done_callback"
            )
        with _WAIT_LOCK:
            if self.done:
                return True
            if self.event is None:
                self.event = threading.Event()
            event = self.event
        return event.wait(timeout)

    def expired(self, now: float, delivery_timeout: float) -> bool:
        return now - self.created >= delivery_timeout


def _run_delivery(future: RecordFuture | None, callback: Any) -> None:
    if future is None:
        callback()
        return
    error = future._batch.error
    if error is not None:
        callback(None, error)
    else:
        callback(future._metadata(), None)


def _sealed(*_args: object) -> int:
    raise RuntimeError("the batch is closed")


def _report(exc: BaseException) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        import traceback

        traceback.print_exception(exc)
        return
    loop.call_exception_handler({"message": "strom producer callback failed", "exception": exc})


class RecordFuture(FutureBase):
    """The outcome of one ``send()``: ``result(timeout)``, ``exception(timeout)``, ``done()``,
    ``add_done_callback(fn)``; awaitable in asyncio code (``metadata = await future``).

    Done callbacks run on the producer's event-loop thread (or at once in the caller's thread
    when the record is already complete); they must not block. Built as
    ``RecordFuture(batch, index, timestamp, key_size, value_size)``: ``FutureBase`` holds the
    five fields (a C struct with the fast path, which creates futures without a Python call).
    """

    __slots__ = ()

    _batch: ProducerBatch
    _index: int
    _timestamp: int
    _key_size: int
    _value_size: int

    def __repr__(self) -> str:
        batch = self._batch
        state = "pending" if not batch.done else ("failed" if batch.error else "done")
        return f"RecordFuture({batch.topic}-{batch.partition}, {state})"

    def done(self) -> bool:
        return self._batch.done

    def _metadata(self) -> RecordMetadata:
        batch = self._batch
        return RecordMetadata(
            batch.topic,
            batch.partition,
            batch.base_offset + self._index if batch.base_offset >= 0 else -1,
            batch.log_append_time if batch.log_append_time >= 0 else self._timestamp,
            self._key_size,
            self._value_size,
        )

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the delivery error, or StromTimeoutError when
        ``timeout`` seconds pass first."""
        batch = self._batch
        if not batch.done and not batch.wait(timeout):
            raise StromTimeoutError(f"record not acknowledged within {timeout} s")
        if batch.error is not None:
            raise batch.error
        return self._metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        batch = self._batch
        if not batch.done and not batch.wait(timeout):
            raise StromTimeoutError(f"record not acknowledged within {timeout} s")
        return batch.error

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        self._batch.add_delivery(None, functools.partial(fn, self))

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        batch = self._batch
        if not batch.done:
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()

            def wake(_batch: ProducerBatch) -> None:
                if _running_loop() is loop:
                    if not waiter.done():
                        waiter.set_result(None)
                else:
                    loop.call_soon_threadsafe(_settle, waiter)

            batch.add_callback(wake)
            yield from waiter.__await__()
        if batch.error is not None:
            raise batch.error
        return self._metadata()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
