"""``strom.Consumer``: the synchronous consumer, a thin facade over ``strom.aio.Consumer``.

::

    from strom import Consumer, TopicPartition

    with Consumer(bootstrap_servers="localhost:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        for record in consumer:
            print(record.offset, record.key, record.value)

Every call runs on the process's one background event loop (``BackgroundLoop.shared()``),
where the fetcher keeps prefetching and heartbeats keep the group membership alive between
calls. Options and semantics are those of ``strom.aio.Consumer``; a group's rebalance
listener is called in the thread that called ``poll`` (or ``close``), as in Kafka.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import re
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar, Unpack, overload

from strom.cluster import BackgroundLoop
from strom.consumer.aio import CommitCallback
from strom.consumer.aio import Consumer as AioConsumer
from strom.consumer.config import ConsumerOptions
from strom.errors import StromError
from strom.types import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

__all__ = ["Consumer"]

T = TypeVar("T")

#: A listener call waiting for the calling thread: (method, partitions, its future, loop).
_ListenerCall = tuple[
    Callable[[set[TopicPartition]], Any],
    set[TopicPartition],
    "asyncio.Future[None]",
    asyncio.AbstractEventLoop,
]


class _CallerThreadListener:
    """Hands the user's listener calls from the event loop to the thread blocked in ``poll``
    or ``close`` (through ``inbox``), and waits until that thread has run them."""

    def __init__(self, listener: Any, inbox: queue.SimpleQueue[_ListenerCall | None]) -> None:
        self._listener = listener
        self._inbox = inbox

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        await self._call("on_partitions_revoked", partitions)

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        await self._call("on_partitions_assigned", partitions)

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        lost = hasattr(self._listener, "on_partitions_lost")
        await self._call("on_partitions_lost" if lost else "on_partitions_revoked", partitions)

    async def _call(self, name: str, partitions: set[TopicPartition]) -> None:
        method = getattr(self._listener, name, None)
        if method is None:
            return
        if inspect.iscoroutinefunction(method):
            await method(set(partitions))  # an async listener runs on the loop itself
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._inbox.put((method, set(partitions), done, loop))
        await done


def _settle(future: asyncio.Future[None], error: Exception | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class Consumer:
    """Synchronous consumer (options: ``ConsumerConfig``). Not thread-safe."""

    def __init__(self, *topics: str, **options: Unpack[ConsumerOptions]) -> None:
        """Options: ``ConsumerConfig`` (a bad value raises ``ConfigurationError``); ``topics``
        are subscribed to at once, as by ``subscribe(topics)``."""
        self._bg = BackgroundLoop.shared()
        self._inbox: queue.SimpleQueue[_ListenerCall | None] = queue.SimpleQueue()

        async def create() -> AioConsumer:
            return AioConsumer(*topics, **options)

        self._aio: AioConsumer = self._bg.run(create())
        self.config = self._aio.config
        self._consumer_timeout_ms = self.config.consumer_timeout_ms
        self._group_id = self.config.group_id
        self._iterator: Iterator[ConsumerRecord] = iter(())

    @property
    def aio(self) -> AioConsumer:
        """The asyncio consumer behind this facade (use it only on the background loop)."""
        return self._aio

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._bg.run(coro)

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a plain method on the loop thread: the consumer's state belongs to it."""

        async def call() -> T:
            return fn(*args)

        return self._bg.run(call())

    def _run_with_listener(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop; meanwhile run, in this thread, the listener calls it
        hands over (a group's rebalance listener runs in the thread calling ``poll``)."""
        if self._bg.in_loop_thread():
            return self._bg.run(coro)  # raises: a blocking call on the loop thread
        future = self._bg.submit(coro)
        inbox = self._inbox
        future.add_done_callback(lambda _: inbox.put(None))
        while True:
            item = inbox.get()
            if item is None:
                if future.done():
                    return future.result()
                continue
            method, partitions, done, loop = item
            error: Exception | None = None
            try:
                method(partitions)
            except Exception as exc:
                error = exc
            except BaseException:  # Ctrl-C in the listener: unblock the loop side, then raise
                loop.call_soon_threadsafe(
                    _settle, done, StromError("the rebalance listener was interrupted")
                )
                raise
            loop.call_soon_threadsafe(_settle, done, error)

    # -- what to read --------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._call(self._aio.assign, list(partitions))

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        listener: Any = None,
    ) -> None:
        if listener is not None and self._group_id is not None:
            listener = _CallerThreadListener(listener, self._inbox)
        self._call(self._aio.subscribe, topics, pattern, listener)

    def unsubscribe(self) -> None:
        self._call(self._aio.unsubscribe)

    def subscription(self) -> set[str]:
        return self._aio.subscription()

    def assignment(self) -> set[TopicPartition]:
        return self._call(self._aio.assignment)

    # -- reading -------------------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        return self._run_with_listener(self._aio.poll(timeout_ms, max_records))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        for record in self._iterator:
            return record
        timeout = self._consumer_timeout_ms
        while True:
            batches = self.poll(3_600_000 if timeout is None else timeout)
            if batches:
                self._iterator = iter([r for records in batches.values() for r in records])
                return next(self._iterator)
            if timeout is not None:
                raise StopIteration

    # -- positions -----------------------------------------------------------------------------

    def position(self, tp: TopicPartition) -> int:
        return self._run(self._aio.position(tp))

    def highwater(self, tp: TopicPartition) -> int | None:
        return self._call(self._aio.highwater, tp)

    def lag(self, tp: TopicPartition) -> int | None:
        """Records between the position and the end (the last stable offset under
        read_committed) as of the last fetch; None when unknown."""
        return self._call(self._aio.lag, tp)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For ``Producer.send_offsets_to_transaction`` (see ``strom.aio.Consumer``)."""
        return self._call(self._aio.group_metadata)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._call(self._aio.seek, tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._call(self._aio.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._call(self._aio.seek_to_end, *partitions)

    def pause(self, *partitions: TopicPartition) -> None:
        self._call(self._aio.pause, *partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._call(self._aio.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return self._call(self._aio.paused)

    # -- offsets lookups -----------------------------------------------------------------------

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._aio.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._aio.end_offsets(list(partitions)))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._aio.offsets_for_times(dict(timestamps)))

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self._run(self._aio.partitions_for_topic(topic))

    def topics(self) -> set[str]:
        return self._run(self._aio.topics())

    # -- committing ----------------------------------------------------------------------------

    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        self._run(self._aio.commit(offsets))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> Future[None]:
        """Commit without waiting; returns a ``concurrent.futures.Future``."""

        async def commit() -> None:
            await self._aio.commit_async(offsets, callback)

        return self._bg.submit(commit())

    @overload
    def committed(
        self, partitions: TopicPartition, *, timeout_ms: int | None = None
    ) -> OffsetAndMetadata | None: ...

    @overload
    def committed(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]: ...

    def committed(
        self,
        partitions: TopicPartition | Iterable[TopicPartition],
        *,
        timeout_ms: int | None = None,
    ) -> OffsetAndMetadata | dict[TopicPartition, OffsetAndMetadata | None] | None:
        """The group's committed offset for ``tp`` (None if none), or a dict for several;
        retriable errors are retried for ``timeout_ms`` (default: ``default_api_timeout_ms``),
        then ``StromTimeoutError``."""
        if isinstance(partitions, TopicPartition):
            return self._run(self._aio.committed(partitions, timeout_ms=timeout_ms))
        return self._run(self._aio.committed(list(partitions), timeout_ms=timeout_ms))

    # -- life cycle ----------------------------------------------------------------------------

    def close(self) -> None:
        self._run_with_listener(self._aio.close())

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
