"""``strom.Producer``: the synchronous producer, a thin facade over ``strom.aio.Producer``.

::

    from strom import Producer

    with Producer(bootstrap_servers="localhost:9092", acks="all") as producer:
        future = producer.send("orders", b"payload", key=b"customer-7")
        print(future.result(timeout=10))            # RecordMetadata(...)
        producer.send("orders", b"x", on_delivery=lambda md, err: print(md, err))
        producer.send_many("orders", [b"a", b"b"]).result()
        producer.flush()

``send`` appends to the accumulator in the calling thread (thread-safe: several threads may
share one producer) and returns at once; the asyncio producer runs on the process's shared
background loop (``strom.cluster.BackgroundLoop``), which sends the batches, completes the
futures and runs ``on_delivery`` and done callbacks. Callbacks therefore run on that thread
without any polling; they must be quick and must not call blocking producer methods
(``flush``, ``close``, ``result``); ``send`` from a callback works unless it would block.

Transactions, Kafka's API (``transactional_id`` set)::

    producer = Producer(bootstrap_servers="localhost:9092", transactional_id="enricher-1")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("enriched", b"...")
    producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
    producer.commit_transaction()            # or producer.abort_transaction()
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import time
import weakref
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from strom.cluster import DEFAULT_BOOTSTRAP_SERVERS, BackgroundLoop
from strom.errors import StromError
from strom.producer._batch import DeliveryCallback, RecordFuture, RecordMetadata
from strom.producer._bulk import BulkTracker
from strom.producer._transactions import TxnState
from strom.producer._waits import NeedMetadata, NeedRoom, blocked_too_long
from strom.producer.aio import Headers
from strom.producer.aio import Producer as AsyncProducer
from strom.producer.config import ProducerOptions
from strom.types import OffsetAndMetadata, StagedTransaction, TopicPartition

if TYPE_CHECKING:
    from strom.types import ConsumerGroupMetadata

__all__ = ["Producer", "RecordFuture", "RecordMetadata"]

_T = TypeVar("_T")

# Producers not closed yet: closed (flushed) at interpreter exit, so records queued in the
# daemon loop thread are not silently dropped.
_OPEN: weakref.WeakSet[Producer] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    for producer in list(_OPEN):
        # Exiting anyway: the records' futures carry any error.
        with contextlib.suppress(Exception):
            producer.close(producer.config.delivery_timeout_ms / 1000)


class Producer:
    """Synchronous producer (options: ``ProducerConfig``); thread-safe."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = DEFAULT_BOOTSTRAP_SERVERS,
        **options: Unpack[ProducerOptions],
    ) -> None:
        """Options: ``ProducerConfig`` (a bad value raises ``ConfigurationError``)."""
        self._aio = AsyncProducer(bootstrap_servers, **options)
        self.config = self._aio.config
        self._bg = BackgroundLoop.shared()
        self._bg.run(self._aio.start())
        self._try_send = self._aio._try_send
        self._max_block = self.config.max_block_ms / 1000
        # ``send`` in C when the fast path is built (strom.producer._native); it hands every
        # unusual call (waits, errors, serializers...) to this class's ``send``.
        fast = self._aio._fast_send(Producer.send.__get__(self), awaitable=False)
        if fast is not None:
            self.send = fast  # type: ignore[method-assign]
        _OPEN.add(self)

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _wait(self, need: Exception, topic: str, deadline: float) -> None:
        """Block this thread for what the hot path lacked (up to max_block_ms)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise blocked_too_long(need, topic, self.config.max_block_ms)
        if isinstance(need, NeedRoom):
            if self._bg.in_loop_thread():
                raise blocked_too_long(need, topic, 0)  # blocking here would stall the sender
            self._aio._sender.wakeup()
            if not self._aio._acc.wait_for_room(need.size, left):
                raise blocked_too_long(need, topic, self.config.max_block_ms)
        else:
            self._bg.run(self._aio._wait_for(need, topic, deadline), timeout=left + 1)

    def send(  # noqa: PLR0917 - the issue's (and kafka-python's) positional order
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue one record and return its ``RecordFuture`` at once.

        Blocks only while buffer_memory is full or the topic's metadata is unknown, up to
        max_block_ms (then StromTimeoutError). A record larger than max_request_size or
        buffer_memory raises MessageTooLargeError before anything is sent.
        ``on_delivery(metadata, error)`` runs on the background loop thread.
        """
        try:
            return self._try_send(topic, value, key, headers, partition, timestamp_ms, on_delivery)
        except (NeedMetadata, NeedRoom) as first:
            need: Exception = first
        deadline = time.monotonic() + self._max_block
        while True:
            self._wait(need, topic, deadline)
            try:
                return self._try_send(
                    topic, value, key, headers, partition, timestamp_ms, on_delivery
                )
            except (NeedMetadata, NeedRoom) as again:
                need = again

    def send_many(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> concurrent.futures.Future[int]:
        """Queue many records; one future for the call (the number of records acknowledged,
        or the first error). See ``strom.aio.Producer.send_many``."""
        aio = self._aio
        values, keys = aio.serialize_many(values, keys)
        deadline = time.monotonic() + self._max_block
        while True:
            try:
                chunks = aio.plan_many(topic, values, keys, partition, timestamp_ms)
                break
            except NeedMetadata as need:
                self._wait(need, topic, deadline)
        result: concurrent.futures.Future[int] = concurrent.futures.Future()

        def settle(count: int, error: BaseException | None) -> None:
            if error is not None:
                result.set_exception(error)
            else:
                result.set_result(count)

        tracker = BulkTracker(settle)
        try:
            for part, tss, ks, vs, size in chunks:
                while True:
                    batch = aio._acc.append_many(topic, part, tss, ks, vs, None, size)
                    if batch is not None:
                        tracker.track(batch, len(vs))
                        break
                    self._wait(NeedRoom(size), topic, deadline)
        except BaseException as exc:
            tracker.seal(exc)
            raise
        tracker.seal()
        return result

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued and wait for it (StromTimeoutError after ``timeout`` s)."""
        self._bg.run(self._aio.flush(timeout))

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds) and release the connections; idempotent."""
        if self._bg.in_loop_thread():
            raise StromError("Producer.close() called from a producer callback")
        _OPEN.discard(self)
        self._bg.run(self._aio.close(timeout))

    # -- transactions (see strom.aio.Producer for the semantics) --------------------------------

    def _txn_call(self, what: str, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._bg.in_loop_thread():
            coro.close()
            raise StromError(f"Producer.{what}() called from a producer callback")
        # The coroutine bounds itself by max_block_ms; the margin only guards a lost loop.
        result: _T = self._bg.run(coro, timeout=self._max_block * 2 + 30)
        return result

    def init_transactions(self) -> None:
        """Take the transactional id's producer id and next epoch (fencing older producers
        with the same id); once, before the first transaction."""
        self._txn_call("init_transactions", self._aio.init_transactions())

    def begin_transaction(self) -> None:
        """Start a transaction (``send`` raises outside one on a transactional producer)."""
        self._txn_call("begin_transaction", self._aio.begin_transaction())

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit the consumer's offsets with the transaction (visible only if it commits)."""
        self._txn_call(
            "send_offsets_to_transaction",
            self._aio.send_offsets_to_transaction(offsets, group_metadata),
        )

    def commit_transaction(self) -> None:
        """Flush, then commit; retried on retriable errors and timeouts, never aborted."""
        self._txn_call("commit_transaction", self._aio.commit_transaction())

    def prepare_transaction(self) -> StagedTransaction:
        """Flush and hand the open transaction over (see ``strom.aio.Producer``)."""
        return self._txn_call("prepare_transaction", self._aio.prepare_transaction())

    def abort_transaction(self) -> None:
        """Abort: unsent records fail, in-flight ones are waited for, then EndTxn(abort)."""
        self._txn_call("abort_transaction", self._aio.abort_transaction())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """``with producer.transaction():`` begins a transaction, commits it when the block
        ends, and aborts it when the block raises (unless the producer was fenced); the
        exception propagates."""
        self.begin_transaction()
        try:
            yield
        except BaseException:
            txn = self._aio._txn
            if txn is not None and txn.state is not TxnState.FATAL_ERROR:
                self.abort_transaction()
            raise
        self.commit_transaction()

    def partitions_for(self, topic: str) -> list[int]:
        return self._bg.run(self._aio.partitions_for(topic))

    @property
    def aio(self) -> AsyncProducer:
        """The asyncio producer underneath (lives on the background loop)."""
        return self._aio
