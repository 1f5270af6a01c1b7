"""``strom.Consumer``: the synchronous consumer, a thin facade over ``strom.aio.Consumer``.

::

    from strom import Consumer, TopicPartition

    with Consumer(bootstrap_servers="localhost:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        for record in consumer:
            print(record.offset, record.key, record.value)

Every call runs on the process's one background event loop (``BackgroundLoop.shared()``),
where the fetcher keeps prefetching between calls. Options and semantics are those of
``strom.aio.Consumer``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from strom._loop import BackgroundLoop
from strom.aio._fetcher import Deserializer
from strom.aio.consumer import CommitCallback, MiB
from strom.aio.consumer import Consumer as AioConsumer
from strom.types import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

__all__ = ["Consumer"]

T = TypeVar("T")


class Consumer:
    """Synchronous consumer (see ``strom.aio.Consumer`` for the options). Not thread-safe."""

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Sequence[str] = "localhost:9092",
        client_id: str = "strom-python",
        group_id: str | None = None,
        key_deserializer: Deserializer = None,
        value_deserializer: Deserializer = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        max_poll_records: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 50 * MiB,
        max_partition_fetch_bytes: int = 1 * MiB,
        isolation_level: str = "read_uncommitted",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        consumer_timeout_ms: int | None = None,
    ) -> None:
        self._bg = BackgroundLoop.shared()
        self._consumer_timeout_ms = consumer_timeout_ms

        async def create() -> AioConsumer:
            return AioConsumer(
                *topics,
                bootstrap_servers=bootstrap_servers,
                client_id=client_id,
                group_id=group_id,
                key_deserializer=key_deserializer,
                value_deserializer=value_deserializer,
                auto_offset_reset=auto_offset_reset,
                enable_auto_commit=enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms,
                max_poll_records=max_poll_records,
                fetch_min_bytes=fetch_min_bytes,
                fetch_max_wait_ms=fetch_max_wait_ms,
                fetch_max_bytes=fetch_max_bytes,
                max_partition_fetch_bytes=max_partition_fetch_bytes,
                isolation_level=isolation_level,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                metadata_max_age_ms=metadata_max_age_ms,
                consumer_timeout_ms=consumer_timeout_ms,
            )

        self._aio: AioConsumer = self._bg.run(create())
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

    # -- what to read --------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._call(self._aio.assign, list(partitions))

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        listener: Any = None,
    ) -> None:
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
        return self._run(self._aio.poll(timeout_ms, max_records))

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

    def committed(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self._run(self._aio.committed(tp))

    # -- life cycle ----------------------------------------------------------------------------

    def close(self) -> None:
        self._run(self._aio.close())

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
