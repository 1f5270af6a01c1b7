"""``strom.aio.Producer``: the asyncio producer (the sync ``strom.Producer`` wraps it).

::

    async with Producer(bootstrap_servers="localhost:9092", acks="all") as producer:
        future = await producer.send("orders", b"payload", key=b"customer-7")
        metadata = await future          # RecordMetadata(topic, partition, offset, ...)
        await producer.send_many("orders", [b"a", b"b", b"c"])   # one future for all
        await producer.flush()

``send`` appends the record to its partition's batch and returns a ``RecordFuture`` at once
(it only waits when ``buffer_memory`` is full or the topic's metadata is not known yet, up to
``max_block_ms``). The sender task on the same loop sends batches to partition leaders and
completes the futures; ``on_delivery`` callbacks run on the event loop.

Transactions (``transactional_id=...``; Kafka's API, see ``strom.producer._transactions``)::

    producer = Producer(bootstrap_servers="localhost:9092", transactional_id="orders-enricher")
    await producer.init_transactions()          # fences older producers with this id
    await producer.begin_transaction()
    await producer.send("enriched", b"...")
    await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
    await producer.commit_transaction()         # or abort_transaction()

A transaction can also be handed over open (``prepare_transaction()``) and committed with
others as one decision by another process (``strom.aio.Admin.commit_staged_transactions``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Unpack

from strom.cluster import DEFAULT_BOOTSTRAP_SERVERS, ClusterClient
from strom.errors import (
    ConfigurationError,
    InvalidTxnStateError,
    MessageTooLargeError,
    StromError,
    StromTimeoutError,
    UnknownTopicOrPartitionError,
)
from strom.producer._accumulator import RECORD_OVERHEAD, Accumulator, record_size
from strom.producer._batch import DeliveryCallback, ProducerBatch, RecordFuture, RecordMetadata
from strom.producer._bulk import BulkTracker, Chunk, plan_chunks, serialized
from strom.producer._native import cproducer
from strom.producer._sender import Sender
from strom.producer._transactions import (
    TransactionAbortedError,
    TransactionManager,
    TxnState,
    transaction_offsets,
)
from strom.producer._waits import NeedMetadata, NeedRoom, blocked_too_long
from strom.producer.config import ProducerConfig, ProducerOptions
from strom.producer.partitioner import StickyPartitioner, murmur2_partition
from strom.security.config import security_of
from strom.types import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    StagedTransaction,
    TopicPartition,
)

__all__ = ["Producer", "RecordFuture", "RecordMetadata"]

Headers = Sequence[tuple[str, bytes | None]]


_wall_clock = time.time


class Producer:
    """Asyncio producer (options: ``ProducerConfig``); see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = DEFAULT_BOOTSTRAP_SERVERS,
        **options: Unpack[ProducerOptions],
    ) -> None:
        """Options: ``ProducerConfig`` (a bad value raises ``ConfigurationError``)."""
        config = ProducerConfig(bootstrap_servers=bootstrap_servers, **options)
        self.config = config
        self._cluster = ClusterClient(
            config.bootstrap_servers,
            request_timeout_ms=config.request_timeout_ms,
            metadata_max_age_ms=config.metadata_max_age_ms,
            client_id=config.client_id,
            gateway_only=config.gateway_only,
            security=security_of(config),
        )
        self._acc = Accumulator(
            batch_size=min(config.batch_size, config.max_request_size),
            buffer_memory=config.buffer_memory,
            linger_ms=config.linger_ms,
            compression=config.compression,
            transactional=config.transactional_id is not None,
        )
        self._sender = Sender(config, self._cluster, self._acc)
        self._txn: TransactionManager | None = None
        if config.transactional_id is not None:
            self._txn = TransactionManager(
                config.transactional_id,
                config.transaction_timeout_ms,
                cluster=self._cluster,
                pid=self._sender.pid,
                retry_backoff_ms=config.retry_backoff_ms,
                request_timeout_ms=config.request_timeout_ms,
                max_block_ms=config.max_block_ms,
            )
            self._sender.attach(self._txn)
        self._sticky = StickyPartitioner()
        self._max_record = min(config.max_request_size, config.buffer_memory)
        self._max_block = config.max_block_ms / 1000
        self._key_serializer = config.key_serializer
        self._value_serializer = config.value_serializer
        self._partitioner = config.partitioner
        self._serializing = config.key_serializer is not None or config.value_serializer is not None
        self._metadata = self._cluster.cached_topics  # partition counts, no I/O
        self._sticky_current = self._sticky._current
        self._append = self._acc.append
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the sender on the running loop (``send`` and ``async with`` call it)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._sender.start()
            # From now on ``send`` is the C fast path when it is built: an awaitable already
            # done with the record's future (or this class's ``send`` for unusual calls).
            fast = self._fast_send(Producer.send.__get__(self), awaitable=True)
            if fast is not None:
                self.send = fast  # type: ignore[method-assign]

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the hot path (thread-safe: the sync facade calls it from user threads) ----------------

    def _try_send(  # noqa: PLR0917 - the per-record hot path, positional for speed
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Headers | None,
        partition: int | None,
        timestamp_ms: int | None,
        on_delivery: DeliveryCallback | None,
    ) -> RecordFuture:
        """Append one record or raise NeedMetadata / NeedRoom (the callers wait and retry).

        The C fast path (``_fast_send``) does the same for ordinary records and reads the same
        two refusals, ``sender.fatal`` and ``txn.block``: a new reason to refuse a record
        belongs in one of them (or in FastSend too), or the fast path would not see it."""
        sender = self._sender
        if sender.fatal is not None:
            raise sender.fatal
        if self._txn is not None and self._txn.block is not None:
            raise self._txn.block
        if self._serializing:
            if self._key_serializer is not None:
                key = self._key_serializer(key)
            if self._value_serializer is not None:
                value = self._value_serializer(value)
        key_size = len(key) if key is not None else -1
        value_size = len(value) if value is not None else -1
        if headers:
            size = record_size(key, value, headers)
        else:
            size = RECORD_OVERHEAD + (key_size if key_size > 0 else 0)
            size += value_size if value_size > 0 else 0
        if size > self._max_record:
            raise self._too_large(size)
        partitions = self._metadata.get(topic)
        if partitions is None:
            raise NeedMetadata
        count = len(partitions)
        sticky = False
        if partition is None:
            if self._partitioner is not None:
                partition = self._partitioner(topic, key, count)
            elif key is not None:
                partition = murmur2_partition(key, count)
            else:
                partition = self._sticky_current.get(topic)
                if partition is None or partition >= count:
                    partition = self._sticky.partition(topic, count)
                sticky = True
        if not 0 <= partition < count:
            raise UnknownTopicOrPartitionError(
                f"partition {partition} of '{topic}' does not exist ({count} partitions)"
            )
        if timestamp_ms is None:
            timestamp_ms = int(_wall_clock() * 1000)
        appended = self._append(topic, partition, timestamp_ms, key, value, headers, size)  # type: ignore[arg-type]
        if appended is None:
            raise NeedRoom(size)
        batch, index = appended
        if sticky and batch.closed:
            self._sticky.next(topic, count, partition)  # type: ignore[arg-type]
        future = RecordFuture(batch, index, timestamp_ms, key_size, value_size)
        if on_delivery is not None:
            batch.add_delivery(future, on_delivery)
        return future

    def _fast_send(self, fallback: Callable[..., Any], *, awaitable: bool) -> Any:
        """``send`` in C (``strom.producer._native``) for this producer, handing every
        unusual call to ``fallback`` (the pure-Python ``send``); None when the extension is
        off or serializers or a custom partitioner are set (their calls are Python's)."""
        if cproducer is None or self._serializing or self._partitioner is not None:
            return None
        acc = self._acc
        return cproducer.FastSend(
            acc,
            acc._queues,
            acc._lock,
            acc._fresh_batch,
            self._metadata,
            self._sticky_current,
            self._sticky.next,
            self._sender,
            self._txn,
            fallback,
            RecordFuture,
            self._max_record,
            awaitable,
        )

    def _too_large(self, size: int) -> MessageTooLargeError:
        return MessageTooLargeError(
            f"the record is {size} bytes serialized, larger than max_request_size "
            f"({self.config.max_request_size}) or buffer_memory ({self.config.buffer_memory})"
        )

    def _deadline(self) -> float:
        return time.monotonic() + self._max_block

    async def _wait_for(self, need: Exception, topic: str, deadline: float) -> None:
        """Wait (on the loop) for what ``_try_send`` lacked, up to ``deadline``."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise blocked_too_long(need, topic, self.config.max_block_ms)
        if isinstance(need, NeedMetadata):
            try:
                async with asyncio.timeout(left):
                    await self._cluster.partitions(topic)
            except TimeoutError:
                raise blocked_too_long(need, topic, self.config.max_block_ms) from None
        elif isinstance(need, NeedRoom):
            self._sender.wakeup()
            if not await self._acc.wait_for_room_async(need.size, left):
                raise blocked_too_long(need, topic, self.config.max_block_ms)

    # -- public API ----------------------------------------------------------------------------

    async def send(  # noqa: PLR0917 - the issue's (and kafka-python's) positional order
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue one record; returns its ``RecordFuture`` (await it for the RecordMetadata).

        Waits only while buffer_memory is full or the topic's metadata is unknown, up to
        max_block_ms (then StromTimeoutError). Raises MessageTooLargeError for a record larger
        than max_request_size or buffer_memory, before anything is sent.
        """
        if self._loop is None:
            await self.start()
        deadline = 0.0
        while True:
            try:
                return self._try_send(
                    topic, value, key, headers, partition, timestamp_ms, on_delivery
                )
            except (NeedMetadata, NeedRoom) as need:
                deadline = deadline or self._deadline()
                await self._wait_for(need, topic, deadline)

    def _check_usable(self) -> None:
        """Raise the producer's fatal error, or the error blocking its transaction."""
        if self._sender.fatal is not None:
            raise self._sender.fatal
        if self._txn is not None and self._txn.block is not None:
            raise self._txn.block

    def serialize_many(
        self, values: Sequence[Any], keys: Sequence[Any] | None
    ) -> tuple[Sequence[Any], Sequence[Any] | None]:
        """A send_many call's values and keys through the serializers, once (a wait for
        metadata asks ``plan_many`` again, not this)."""
        self._check_usable()
        return serialized(values, keys, self._key_serializer, self._value_serializer)

    def plan_many(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> list[Chunk]:
        """Split a send_many call's serialized records (``serialize_many``) into chunks of
        (partition, timestamps, keys, values, size), each within batch_size, in record order
        per partition. Raises NeedMetadata (the caller waits and asks again)."""
        self._check_usable()
        return plan_chunks(
            topic,
            self._cluster.partition_count(topic),
            values,
            keys,
            partition,
            timestamp_ms,
            batch_size=self._acc.batch_size,
            max_record=self._max_record,
            partitioner=self._partitioner,
            sticky=self._sticky,
            too_large=self._too_large,
        )

    async def send_many(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[int]:
        """Queue many records at once; returns one future for the whole call, resolving to the
        number of records acknowledged, or failing with the first error.

        Far cheaper per record than ``send`` (records go to the batch encoder in bulk, no
        per-record future). Keys, when given, partition as ``send`` does; without keys the
        records fill sticky partitions batch by batch. Order is kept within each partition.
        """
        if self._loop is None:
            await self.start()
        loop = asyncio.get_running_loop()
        result: asyncio.Future[int] = loop.create_future()

        def settle(count: int, error: BaseException | None) -> None:
            if result.done():
                return
            if error is not None:
                result.set_exception(error)
            else:
                result.set_result(count)

        values, keys = self.serialize_many(values, keys)
        deadline = 0.0
        while True:
            try:
                chunks = self.plan_many(topic, values, keys, partition, timestamp_ms)
                break
            except NeedMetadata as need:
                deadline = deadline or self._deadline()
                await self._wait_for(need, topic, deadline)
        tracker = BulkTracker(lambda n, e: _on_loop(loop, settle, n, e))
        try:
            for part, tss, ks, vs, size in chunks:
                while True:
                    batch = self._acc.append_many(topic, part, tss, ks, vs, None, size)
                    if batch is not None:
                        tracker.track(batch, len(vs))
                        break
                    deadline = deadline or self._deadline()
                    await self._wait_for(NeedRoom(size), topic, deadline)
        except BaseException as exc:
            tracker.seal(exc)
            raise
        tracker.seal()
        return result

    async def flush(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - Kafka's API
        """Send everything queued now and wait until it completes (StromTimeoutError after
        ``timeout`` seconds). Records that failed do not raise here: see their futures."""
        if self._loop is None:
            return
        pending = list(self._acc.incomplete)
        if not pending:
            if self.config.acks == 0:
                await self._quiesce(timeout)
            return
        self._acc.flushing += 1
        try:
            waiting = _completion(pending)
            self._sender.wakeup()
            await _wait(waiting, timeout, f"flush did not complete within {timeout} s")
        finally:
            self._acc.flushing -= 1
        if self.config.acks == 0:
            await self._quiesce(timeout)

    async def _quiesce(self, timeout: float | None) -> None:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                await self._sender.quiesce()
        except TimeoutError:
            raise StromTimeoutError(f"flush did not complete within {timeout} s") from None

    async def close(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - Kafka's API
        """Flush (up to ``timeout`` seconds), then stop: what is still pending fails."""
        if self._closed:
            return
        try:
            if self._loop is not None:
                self._acc.closing = True
                with contextlib.suppress(StromTimeoutError):
                    await self.flush(timeout)
        finally:
            self._closed = True
            if self._sender.fatal is None:
                self._sender.fatal = StromError("send() on a closed producer")
            if self._loop is not None:
                await self._sender.stop()
            await self._cluster.close()

    # -- transactions --------------------------------------------------------------------------

    def _transactions(self, what: str) -> TransactionManager:
        if self._txn is None:
            raise InvalidTxnStateError(
                f"{what} needs a transactional producer: pass transactional_id=..."
            )
        if self._closed:
            raise StromError(f"{what} on a closed producer")
        return self._txn

    async def init_transactions(self) -> None:
        """Register the transactional id with its transaction coordinator: take its producer
        id and next epoch, which fences every older producer with the same id and aborts
        the transaction it left open. Call once, before the first ``begin_transaction``.
        Blocks up to ``max_block_ms`` (then StromTimeoutError; calling it again is fine)."""
        txn = self._transactions("init_transactions()")
        await self.start()
        await txn.init()

    async def begin_transaction(self) -> None:
        """Start a transaction: ``send`` is allowed until ``commit_transaction`` or
        ``abort_transaction``. Raises the pending error after an abortable failure (abort
        first) or a fatal one (close the producer)."""
        self._transactions("begin_transaction()").begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit the consumer's ``offsets`` (the next offsets to read) as part of the
        transaction: the group sees them only if the transaction commits. Pass
        ``consumer.group_metadata()``, so that a consumer that left the group cannot commit
        (a group id string skips that check)."""
        txn = self._transactions("send_offsets_to_transaction()")
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        if not isinstance(group_metadata, ConsumerGroupMetadata) or not group_metadata.group_id:
            raise ConfigurationError(
                "send_offsets_to_transaction() needs consumer.group_metadata() of a consumer "
                f"with a group_id, got {group_metadata!r}"
            )
        await txn.add_offsets(transaction_offsets(offsets), group_metadata)

    async def commit_transaction(self) -> None:
        """Send every record of the transaction, then commit it (EndTxn). Retriable errors
        and timeouts are retried, never turned into an abort, up to ``max_block_ms``: then
        StromTimeoutError, and calling ``commit_transaction()`` again resumes the commit.
        An abortable error (a record that failed, the coordinator's timeout abort:
        TransactionAbortableError...) requires ``abort_transaction()``; a fatal one
        (ProducerFencedError, InvalidProducerEpochError) requires closing the producer."""
        txn = self._transactions("commit_transaction()")
        txn.begin_commit()
        await self._send_transaction(txn, "commit_transaction()")
        await txn.end(commit=True)

    async def _send_transaction(self, txn: TransactionManager, what: str) -> None:
        """Send every record of the transaction (up to ``max_block_ms``) and wait for its
        partitions' registration; raise the first record's failure."""
        try:
            await self.flush(self.config.max_block_ms / 1000)
        except StromTimeoutError as exc:
            raise StromTimeoutError(
                f"{what}: the transaction's records were not all sent within "
                f"max_block_ms ({self.config.max_block_ms} ms); call it again to resume"
            ) from exc
        await txn.wait_adding()
        if txn.error is not None:
            # A record failed: ``fail`` moved the transaction to abortable (or fatal).
            txn.raise_if_fatal()
            raise txn.block or txn.error

    async def prepare_transaction(self) -> StagedTransaction:
        """Stage the open transaction: send its records (up to ``max_block_ms``; then
        StromTimeoutError, and calling it again resumes), raise the first delivery error if
        a record failed (the transaction must then be aborted as usual), and hand the
        transaction over, still open, as a ``StagedTransaction``. Whoever holds it commits
        it (``Admin.commit_staged_transactions``, with others as one decision) or aborts it
        (``Admin.abort_staged_transactions``), from any process; until then it is open and
        ``transaction_timeout_ms`` bounds its life. Afterwards this producer refuses
        send/begin/commit/abort (InvalidTxnStateError), and ``close()`` leaves the
        transaction open."""
        txn = self._transactions("prepare_transaction()")
        txn.begin_prepare()
        await self._send_transaction(txn, "prepare_transaction()")
        producer_id, epoch = txn.staged()
        return StagedTransaction(txn.transactional_id, producer_id, epoch)

    async def abort_transaction(self) -> None:
        """Abort the transaction: records not sent yet fail (TransactionAbortedError), those
        in flight are waited for, then EndTxn(abort); readers with read_committed never see
        its records. Needed after an abortable error; a no-op outside a transaction."""
        txn = self._transactions("abort_transaction()")
        if not txn.begin_abort():
            return
        self._sender.fail_all(
            TransactionAbortedError("the transaction was aborted before this record was sent")
        )
        txn.stop_adding()  # EndTxn(abort) covers whatever it may have added
        await self._wait_incomplete(self.config.max_block_ms / 1000)
        await txn.end(commit=False)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """``async with producer.transaction():`` begins a transaction, commits it when the
        block ends, and aborts it when the block raises (unless the producer was fenced:
        then there is nothing left to abort); the exception propagates."""
        await self.begin_transaction()
        try:
            yield
        except BaseException:
            txn = self._transactions("transaction()")
            if txn.state is not TxnState.FATAL_ERROR:
                await self.abort_transaction()
            raise
        await self.commit_transaction()

    async def _wait_incomplete(self, timeout: float) -> None:  # noqa: ASYNC109
        """Until every batch in flight has completed (StromTimeoutError after ``timeout``)."""
        pending = list(self._acc.incomplete)
        if pending:
            message = (
                f"abort_transaction(): records still in flight after {timeout} s; call it again"
            )
            await _wait(_completion(pending), timeout, message)

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (from metadata)."""
        return [p.partition for p in await self._cluster.partitions(topic)]

    @property
    def cluster(self) -> ClusterClient:
        return self._cluster


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """Call ``fn`` now when on ``loop``'s thread, else schedule it there."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fn(*args)
    else:
        loop.call_soon_threadsafe(fn, *args)


def _settle_none(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _completion(batches: list[ProducerBatch]) -> asyncio.Future[None]:
    """A future of the running loop, done when every one of ``batches`` has completed
    (their callbacks may run on another thread)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    remaining = [len(batches)]

    def one_done(_batch: ProducerBatch) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            _on_loop(loop, _settle_none, waiter)

    for batch in batches:
        batch.add_callback(one_done)
    return waiter


async def _wait(waiter: asyncio.Future[None], timeout: float | None, message: str) -> None:  # noqa: ASYNC109
    """Await ``waiter`` (shielded: it stays for a retry); StromTimeoutError(message) after
    ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            await asyncio.shield(waiter)
    except TimeoutError:
        raise StromTimeoutError(message) from None
