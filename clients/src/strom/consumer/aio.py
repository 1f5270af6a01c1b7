"""``strom.aio.Consumer``: read records from partition leaders, asyncio-native.

::

    from strom import TopicPartition
    from strom.aio import Consumer

    async with Consumer(bootstrap_servers="localhost:9092", auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        async for record in c:
            print(record.offset, record.value)

``assign()`` reads exactly the given partitions. ``subscribe()`` with a ``group_id`` joins
the consumer group on the next ``poll`` (``strom.consumer._coordinator``: the group's leader
assigns partitions with the configured assignor, heartbeats run in the background, the
rebalance listener is called from ``poll``); without a ``group_id`` it reads every partition
of the matching topics (new partitions and topics are picked up on metadata refresh), as
aiokafka does. ``commit``, ``commit_async`` and ``committed`` need a ``group_id``
(``InvalidGroupIdError`` otherwise, as in Kafka); with ``enable_auto_commit`` the positions are
committed every ``auto_commit_interval_ms`` from ``poll``, before partitions are revoked, and
on close.

Positions advance exactly: a record is returned once per session, in offset order per
partition, and ``seek()`` drops whatever was prefetched for that partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Unpack, overload

from strom.cluster import ClusterClient
from strom.consumer._collector import RecordCollector
from strom.consumer._coordinator import ConsumerCoordinator, call_listener
from strom.consumer._fetcher import Fetcher
from strom.consumer._group_options import group_options
from strom.consumer._offset_commits import commit_offsets, current_offsets
from strom.consumer._subscription import SubscriptionState
from strom.consumer.config import ConsumerConfig, ConsumerOptions
from strom.errors import (
    ConfigurationError,
    InvalidGroupIdError,
    OffsetOutOfRangeError,
    StromError,
    StromTimeoutError,
    UnknownTopicOrPartitionError,
)
from strom.protocol.v1 import common_pb2
from strom.security.config import security_of
from strom.types import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

__all__ = ["Consumer"]

log = logging.getLogger("strom.consumer")

_ISOLATION = {
    "read_uncommitted": common_pb2.READ_UNCOMMITTED,
    "read_committed": common_pb2.READ_COMMITTED,
}
#: How often a topic subscription looks again for a topic that does not exist yet.
_MISSING_TOPIC_RETRY_S = 1.0

CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], Any]


def _positive(name: str, value: object, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


class Consumer:
    """Reads records of assigned (or subscribed) partitions; see the module docstring.

    Options carry Kafka's names and defaults: ``ConsumerConfig`` declares them. Not
    thread-safe: use it from its event loop.
    """

    def __init__(self, *topics: str, **options: Unpack[ConsumerOptions]) -> None:
        """Options: ``ConsumerConfig`` (a bad value raises ``ConfigurationError``); ``topics``
        are subscribed to at once, as by ``subscribe(topics)``."""
        config = self.config = ConsumerConfig(**options)
        group = group_options(config)
        self._max_poll_records = config.max_poll_records
        timeout_ms = config.consumer_timeout_ms
        self._consumer_timeout = None if timeout_ms is None else timeout_ms / 1000
        self._group_id = config.group_id
        self._timeout = config.request_timeout_ms / 1000
        self._retry_backoff = config.retry_backoff_ms / 1000
        self._metadata_max_age = config.metadata_max_age_ms / 1000
        self._cluster = ClusterClient(
            config.bootstrap_servers,
            request_timeout_ms=config.request_timeout_ms,
            metadata_max_age_ms=config.metadata_max_age_ms,
            client_id=config.client_id,
            gateway_only=config.gateway_only,
            security=security_of(config),
        )
        self._subs = SubscriptionState(config.auto_offset_reset)
        self._read_committed = config.isolation_level == "read_committed"
        self._fetcher = Fetcher(
            self._cluster,
            self._subs,
            fetch_min_bytes=config.fetch_min_bytes,
            fetch_max_wait_ms=config.fetch_max_wait_ms,
            fetch_max_bytes=config.fetch_max_bytes,
            max_partition_fetch_bytes=config.max_partition_fetch_bytes,
            isolation_level=_ISOLATION[config.isolation_level],
            retry_backoff_ms=config.retry_backoff_ms,
            request_timeout_ms=config.request_timeout_ms,
            client_id=config.client_id,
            before_step=self._resolve_subscription,
        )
        self._subs.on_change = self._fetcher.wake
        self._collector = RecordCollector(
            self._subs, self._fetcher, config.key_deserializer, config.value_deserializer
        )
        self._coordinator: ConsumerCoordinator | None = None
        if group is not None:
            self._coordinator = ConsumerCoordinator(
                self._cluster,
                self._subs,
                group,
                metadata_max_age_ms=config.metadata_max_age_ms,
                wake_poll=self._fetcher.data_ready.set,
            )
        self._leaving: asyncio.Task[None] | None = None
        self._subscription_due = 0.0
        self._subscription_dirty = True
        self._iterator: Iterator[ConsumerRecord] = iter(())
        self._closed = False
        if topics:
            self.subscribe(list(topics))

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the background fetcher (done by the first call that needs it)."""
        self._check_open()
        self._fetcher.start()

    async def close(self) -> None:
        """Leave the group (after the auto-commit and the listener's revocation) at once, stop
        fetching and close every connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._leaving is not None:
                await asyncio.gather(self._leaving, return_exceptions=True)
            if self._coordinator is not None:
                await self._coordinator.close()
        finally:
            await self._fetcher.close()
            await self._cluster.close()

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StromError("the consumer is closed")

    # -- what to read --------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any previous assignment)."""
        self._check_open()
        self._subs.assign(partitions)

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        listener: Any = None,
    ) -> None:
        """Read the partitions of ``topics`` (or of every topic matching ``pattern``): with a
        ``group_id`` the group's share of them, from the next ``poll``.

        ``listener`` may have ``on_partitions_revoked(set)``, ``on_partitions_assigned(set)``
        and ``on_partitions_lost(set)`` (default: ``on_partitions_revoked``), plain or async
        methods, called from ``poll`` when the assignment changes (see docs/clients.md).
        """
        self._check_open()
        self._subs.subscribe(topics, pattern, listener)
        self._subscription_dirty = True
        if self._coordinator is not None and self._subs.mode == "subscribe":
            self._coordinator.subscription_changed()

    def unsubscribe(self) -> None:
        """Forget the subscription or assignment, and every position (a group member leaves
        the group in the background; the listener is not called)."""
        self._check_open()
        was_member = self._subs.mode == "subscribe"
        self._subs.unsubscribe()
        if self._coordinator is not None and was_member:
            self._leaving = asyncio.get_running_loop().create_task(self._coordinator.unsubscribe())

    def subscription(self) -> set[str]:
        return set(self._subs.topics)

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    async def _resolve_subscription(self) -> float | None:
        """Turn a subscription into an assignment (run by the fetcher before each step)."""
        subs = self._subs
        if subs.mode != "subscribe":
            return None
        if self._coordinator is not None:
            return await self._coordinator.watch_metadata()
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not self._subscription_dirty and now < self._subscription_due:
            return self._subscription_due - now
        if subs.pattern is not None:
            names = [t for t in await self._cluster.topics() if subs.matches(t)]
        else:
            names = sorted(subs.topics)
            await self._cluster.refresh(names)
        wanted: list[TopicPartition] = []
        missing = False
        for name in names:
            try:
                wanted.extend(
                    TopicPartition(name, p.partition) for p in await self._cluster.partitions(name)
                )
            except UnknownTopicOrPartitionError:
                missing = True
        self._subscription_dirty = False
        self._subscription_due = loop.time() + (
            _MISSING_TOPIC_RETRY_S if missing else self._metadata_max_age
        )
        old, new = set(subs.assignment), set(wanted)
        if old != new:
            listener = subs.listener
            if listener is not None and old - new:
                await call_listener(listener, "on_partitions_revoked", old - new)
            subs.set_subscribed_assignment(sorted(wanted))
            if listener is not None:
                await call_listener(listener, "on_partitions_assigned", new)
        return self._subscription_due - loop.time()

    # -- reading -------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records fetched so far, waiting up to ``timeout_ms`` for the first one.

        Returns at most ``max_records`` (default ``max_poll_records``), in offset order per
        partition. Raises a partition's pending error once (e.g. ``OffsetOutOfRangeError``
        with ``auto_offset_reset="none"``). Group membership work (joining, the rebalance
        listener, auto-commit) runs here, in the caller's task.
        """
        await self.start()
        if self._subs.mode is None:
            raise StromError("the consumer has neither an assignment nor a subscription")
        limit = self._max_poll_records if max_records is None else max_records
        _positive("max_records", limit)
        coordinator = self._coordinator
        if coordinator is None:
            return await self._poll(timeout_ms, limit)
        if self._leaving is not None:  # an unsubscribe() still leaving the group
            leaving, self._leaving = self._leaving, None
            await asyncio.gather(leaving, return_exceptions=True)
        coordinator.polling = True
        try:
            return await self._poll(timeout_ms, limit)
        finally:
            coordinator.polling = False
            coordinator.poll_done()

    async def _poll(
        self, timeout_ms: int, limit: int
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        ready = self._fetcher.data_ready
        coordinator = self._coordinator
        while True:
            # Cleared before the work below: a wake-up meanwhile is not lost.
            ready.clear()
            if coordinator is not None:
                await coordinator.poll()
            self._collector.raise_pending()
            found = self._collector.collect(limit)
            if found:
                return found
            remaining = deadline - loop.time()
            if remaining <= 0:
                return {}
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await ready.wait()

    async def getmany(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """aiokafka's name for ``poll``."""
        return await self.poll(timeout_ms, max_records)

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self

    async def __anext__(self) -> ConsumerRecord:
        for record in self._iterator:
            return record
        timeout_ms = 3_600_000 if self._consumer_timeout is None else self._consumer_timeout * 1000
        while True:
            batches = await self.poll(int(timeout_ms))
            if batches:
                self._iterator = iter([r for records in batches.values() for r in records])
                return next(self._iterator)
            if self._consumer_timeout is not None:
                raise StopAsyncIteration

    # -- positions -----------------------------------------------------------------------------

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (resolves a pending
        reset first, within request_timeout_ms)."""
        await self.start()
        st = self._subs.state(tp)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while not st.has_valid_position:
            if st.error is not None:
                error, st.error = st.error, None
                raise error
            if st.awaiting_committed and self._coordinator is not None:
                await self._coordinator.refresh_committed_positions()
                if st.awaiting_committed:
                    await asyncio.sleep(self._retry_backoff)
                continue
            if st.reset is None:
                raise OffsetOutOfRangeError(
                    f"{tp.topic}-{tp.partition} has no position and auto_offset_reset is "
                    "'none': seek() first"
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise StromTimeoutError(f"no position for {tp.topic}-{tp.partition} in time")
            self._fetcher.data_ready.clear()
            self._fetcher.wake()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._fetcher.data_ready.wait()
            st = self._subs.state(tp)
        assert st.position is not None
        return st.position

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch (None before one)."""
        hw = self._subs.state(tp).high_watermark
        return None if hw < 0 else hw

    def lag(self, tp: TopicPartition) -> int | None:
        """How far ``position`` is behind the end of ``tp`` as of the last fetch (Kafka's
        ``currentLag``): to the last stable offset under read_committed, to the high
        watermark under read_uncommitted. None before a fetch answered or without a
        position."""
        st = self._subs.state(tp)
        end = st.last_stable_offset if self._read_committed else st.high_watermark
        if end < 0 or st.position is None:
            return None
        return max(end - st.position, 0)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group membership to pass to ``Producer.send_offsets_to_transaction`` (group
        id, generation, member id, static instance id), as of now. Needs a ``group_id``."""
        coordinator = self._group("group_metadata()")
        return ConsumerGroupMetadata(
            group_id=coordinator.group_id,
            generation_id=coordinator.generation,
            member_id=coordinator.member_id,
            group_instance_id=coordinator.options.group_instance_id or None,
        )

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make the next ``poll`` return ``tp``'s records from ``offset``."""
        self._check_open()
        if not isinstance(offset, int) or offset < 0:
            raise ConfigurationError(f"seek offset must be an integer >= 0, got {offset!r}")
        self._subs.state(tp).seek(offset)
        self._fetcher.wake()

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Seek to the log start offset (every assigned partition when none is given)."""
        self._seek_reset("earliest", partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Seek to the end of the log (every assigned partition when none is given)."""
        self._seek_reset("latest", partitions)

    def _seek_reset(self, strategy: str, partitions: Sequence[TopicPartition]) -> None:
        self._check_open()
        for tp in partitions or list(self._subs.assignment):
            self._subs.state(tp).request_reset(strategy)
        self._fetcher.wake()

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching and returning records of these partitions until ``resume``."""
        for tp in partitions:
            self._subs.state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subs.state(tp).paused = False
        self._fetcher.wake()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._subs.assignment.items() if st.paused}

    # -- offsets lookups -----------------------------------------------------------------------

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""
        return await self._list(partitions, common_pb2.EARLIEST)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's end offset (the high watermark: the offset after the last record)."""
        return await self._list(partitions, common_pb2.LATEST)

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset whose timestamp is >= the given one (ms), per partition; None when
        no record is that recent."""
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or ts < 0:
                raise ConfigurationError(f"timestamp for {tp} must be an integer >= 0, got {ts!r}")
        self._check_open()
        found = await self._fetcher.list_offsets(
            {tp: (common_pb2.TIMESTAMP, ts) for tp, ts in timestamps.items()}, self._timeout
        )
        return {
            tp: OffsetAndTimestamp(offset, ts) if offset >= 0 else None
            for tp, (offset, ts) in found.items()
        }

    async def _list(
        self, partitions: Iterable[TopicPartition], spec: int
    ) -> dict[TopicPartition, int]:
        self._check_open()
        found = await self._fetcher.list_offsets(
            {tp: (spec, 0) for tp in partitions}, self._timeout
        )
        return {tp: offset for tp, (offset, _) in found.items()}

    async def partitions_for_topic(self, topic: str) -> set[int]:
        """The partition ids of ``topic`` (UnknownTopicOrPartitionError when it does not exist)."""
        return {p.partition for p in await self._cluster.partitions(topic)}

    async def topics(self) -> set[str]:
        return set(await self._cluster.topics())

    # -- committing ----------------------------------------------------------------------------

    def _group(self, what: str) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise InvalidGroupIdError(f"{what} needs a group_id (this consumer has none)")
        return self._coordinator

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        """Commit ``offsets`` ("the next offset to read" per partition; default: the current
        positions of every assigned partition) for the group, and wait for it.

        Raises ``RebalanceInProgressError`` (retriable) during a rebalance, and
        ``IllegalGenerationError`` / ``UnknownMemberIdError`` when the group has moved on
        without this consumer (its partitions may be someone else's now).
        """
        self._check_open()
        coordinator = self._group("commit()")
        await coordinator.commit(commit_offsets(self._subs.assignment, offsets), wait=True)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> asyncio.Future[None]:
        """Commit without waiting; ``callback(offsets, exception)`` runs when done."""
        loop = asyncio.get_running_loop()
        try:
            self._check_open()
            coordinator = self._group("commit_async()")
            prepared = commit_offsets(self._subs.assignment, offsets)
        except StromError as exc:
            future: asyncio.Future[None] = loop.create_future()
            future.set_exception(exc)
            future.exception()  # the callback reports it; an unobserved future must not warn
            if callback is not None:
                callback(current_offsets(self._subs.assignment, offsets), exc)
            return future
        task = loop.create_task(coordinator.commit(prepared))
        committed = {tp: om for tp, (om, _) in prepared.items()}

        def done(task: asyncio.Task[None]) -> None:
            error: Exception | None = None
            if task.cancelled():
                error = StromError("commit_async was cancelled")
            elif (exc := task.exception()) is not None:
                error = exc if isinstance(exc, Exception) else StromError(repr(exc))
            if callback is not None:
                callback(committed, error)
            elif error is not None:
                log.warning("commit_async failed: %s", error)

        task.add_done_callback(done)
        return task

    @overload
    async def committed(
        self, partitions: TopicPartition, *, timeout_ms: int | None = None
    ) -> OffsetAndMetadata | None: ...

    @overload
    async def committed(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]: ...

    async def committed(
        self,
        partitions: TopicPartition | Iterable[TopicPartition],
        *,
        timeout_ms: int | None = None,
    ) -> OffsetAndMetadata | dict[TopicPartition, OffsetAndMetadata | None] | None:
        """The group's committed offset for one partition (None when there is none), or a
        dict for a set of partitions (OffsetFetch). A coordinator moving or loading, or (with
        read_committed) an offset pending in a transaction, is waited out for up to
        ``timeout_ms`` (default: ``default_api_timeout_ms``), then ``StromTimeoutError``."""
        self._check_open()
        coordinator = self._group("committed()")
        timeout_s = None if timeout_ms is None else _positive("timeout_ms", timeout_ms, 0) / 1000
        if isinstance(partitions, TopicPartition):
            found = await coordinator.fetch_committed([partitions], timeout_s)
            one = found.get(partitions)
            return None if one is None else one[0]
        many = await coordinator.fetch_committed(list(partitions), timeout_s)
        return {tp: None if v is None else v[0] for tp, v in many.items()}
