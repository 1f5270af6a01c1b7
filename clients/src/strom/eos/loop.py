"""``strom.TransactionalLoop``: an exactly-once consume-transform-produce loop.

::

    from strom import OutputRecord, TransactionalLoop

    def enrich(record):
        yield OutputRecord("enriched", record.value.upper(), key=record.key)

    loop = TransactionalLoop(
        "localhost:9092",
        input_topics=["orders"],
        group_id="enricher",
        transactional_id="enricher-1",  # stable per instance: a restart fences the old one
        transform=enrich,
    )
    loop.run()  # until loop.stop() (any thread, or a signal handler) or a fatal error

The loop owns a read_committed ``Consumer`` in the group and a transactional ``Producer``.
Each transaction covers the records of one or more polls (up to ``max_batch_records``, or
``max_batch_interval_ms`` after its first record): their outputs and the input offsets
after them (``send_offsets_to_transaction`` with the consumer's group metadata) commit
together or not at all. Errors are handled as KIP-691 classifies them (``classify``): fenced
→ stop (``run`` raises), abortable → abort, rewind the consumer to where the transaction
started reading (the committed offsets) and go on, a commit that timed out → commit again,
never abort. A rebalance that revokes partitions aborts the open transaction; the partitions'
new owner starts from the committed offsets.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from strom.cluster import BackgroundLoop
from strom.consumer import Consumer
from strom.eos._batch import (
    Action,
    LoopCore,
    LoopOptions,
    OutputRecord,
    TxnBatch,
    classify,
    output_records,
)
from strom.errors import StromError
from strom.producer import Producer, is_fatal
from strom.types import ConsumerRecord, TopicPartition

__all__ = ["TransactionalLoop", "Transform"]

log = logging.getLogger("strom.eos")

#: The user's function: one input record -> its output records (``None``: none).
Transform = Callable[[ConsumerRecord], Iterable[OutputRecord | tuple[Any, ...]] | None]


class TransactionalLoop(LoopCore):
    """Consume ``input_topics`` in ``group_id``, call ``transform`` on each record, write what
    it returns and commit the input offsets, exactly once (see the module docstring).

    ``consumer_options`` and ``producer_options`` are the clients' own options (for example
    ``{"auto_offset_reset": "earliest"}``); the loop sets ``enable_auto_commit=False``,
    ``isolation_level="read_committed"``, the group and the transactional id itself. Not
    thread-safe, except ``stop()``.
    """

    consumer: Consumer
    producer: Producer

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        input_topics: Iterable[str] | str,
        group_id: str,
        transactional_id: str,
        transform: Transform,
        max_batch_records: int = 1000,
        max_batch_interval_ms: int = 100,
        poll_timeout_ms: int = 500,
        consumer_options: Mapping[str, Any] | None = None,
        producer_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            input_topics,
            transform,
            LoopOptions(max_batch_records, max_batch_interval_ms, poll_timeout_ms),
            consumer_options,
            producer_options,
        )
        self._registering: concurrent.futures.Future[None] | None = None
        self._bg = BackgroundLoop.shared()
        self.consumer = Consumer(
            bootstrap_servers=bootstrap_servers, group_id=group_id, **self._consumer_options
        )
        try:
            self.producer = Producer(
                bootstrap_servers, transactional_id=transactional_id, **self._producer_options
            )
        except BaseException:
            self.consumer.close()
            raise

    # -- life cycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the producer and the consumer (leaving the group); idempotent. An open
        transaction is left to the coordinator's timeout or the next instance."""
        if self._closed:
            return
        self._closed = True
        try:
            self.producer.close(timeout=self.producer.config.max_block_ms / 1000)
        finally:
            self.consumer.close()

    def __enter__(self) -> TransactionalLoop:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> None:
        """Run until ``stop()`` (the open transaction is committed first) or a fatal error,
        which is raised (``ProducerFencedError``: a newer instance with the same
        transactional id took over). Closes both clients when it returns."""
        try:
            self.producer.init_transactions()  # fences older instances, ends what they left
            self.consumer.subscribe(self._topics, listener=_Listener(self))
            while not self._stop.is_set():
                self._step()
            if self._batch is not None:
                self._finish(self._batch)
        except BaseException as exc:
            if self._batch is not None and not is_fatal(exc):
                self._abort_quietly()  # a transform's bug, an interrupt: do not leave it open
            raise
        finally:
            self.close()

    def _step(self) -> None:
        timeout_ms, limit = self._poll_args()
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=limit)
        if polled:
            if self._batch is None:
                self._begin()
                assert self._batch is not None
            if not self._process(self._batch, polled):
                return
        if self._batch is not None and self._batch.due():
            self._finish(self._batch)

    def _begin(self) -> None:
        """Begin a transaction and register the group with it at once, in the background
        (``send_offsets_to_transaction`` with no offsets: AddOffsetsToTxn, which waits for the
        previous transaction's markers, then an empty TxnOffsetCommit). The offsets themselves
        follow at the end, when AddOffsetsToTxn has nothing left to write: one replicated
        write fewer between the last record and the commit."""
        self.producer.begin_transaction()
        self._new_batch()
        metadata = self.consumer.group_metadata()
        self._registering = self._bg.submit(
            self.producer.aio.send_offsets_to_transaction({}, metadata)
        )

    def _registered(self) -> None:
        """Wait for the group's registration of ``_begin`` (raises its error)."""
        registering, self._registering = self._registering, None
        if registering is not None:
            registering.result(self.producer.config.max_block_ms / 1000 * 2 + 30)

    def _process(self, batch: TxnBatch, polled: dict[TopicPartition, list[ConsumerRecord]]) -> bool:
        """Transform and send; False when the transaction had to be aborted."""
        send = self.producer.send
        try:
            for tp, records in polled.items():
                batch.add(tp, records)
                for record in records:
                    for out in output_records(self._transform(record), record):
                        send(*out.send_args())
                        batch.produced += 1
        except StromError as exc:
            if classify(exc, committing=False) is Action.STOP:
                raise
            self._abort(f"sending failed: {exc}")
            return False
        return True

    def _finish(self, batch: TxnBatch) -> None:
        """Commit the open transaction with its input offsets (KIP-691 on errors)."""
        try:
            self._registered()
            self._send_offsets(batch)
        except StromError as exc:
            if classify(exc, committing=False) is Action.STOP:
                raise
            self._abort(f"committing the offsets failed: {exc}")
            return
        while True:
            try:
                self.producer.commit_transaction()
                break
            except StromError as exc:
                action = self._commit_failed(exc)
                if action is Action.STOP:
                    raise
                if action is Action.ABORT:
                    self._abort(f"the commit failed: {exc}")
                    return
        self._committed(batch)

    def _send_offsets(self, batch: TxnBatch) -> None:
        """``send_offsets_to_transaction`` (TxnOffsetCommit) while the transaction's last
        records are being sent, overlapped rather than one after the other."""
        offsets = batch.offsets()
        metadata = self.consumer.group_metadata()
        aio = self.producer.aio
        timeout = self.producer.config.max_block_ms / 1000

        async def both() -> None:
            flushing = asyncio.ensure_future(aio.flush(timeout))
            try:
                await aio.send_offsets_to_transaction(offsets, metadata)
            finally:
                await asyncio.gather(flushing, return_exceptions=True)

        self._bg.run(both(), timeout=timeout * 2 + 30)

    # -- aborting --------------------------------------------------------------------------------

    def _abort(self, reason: str) -> None:
        """Abort the open transaction and rewind the partitions it read that are still ours to
        where it started (their committed offsets)."""
        batch = self._take_batch(reason)
        if batch is None:
            return
        try:
            self._registered()  # not in flight while aborting: it would land on the next epoch
        except StromError as exc:
            if is_fatal(exc):
                raise
        while True:
            try:
                self.producer.abort_transaction()
                break
            except StromError as exc:
                if is_fatal(exc) or not exc.retriable:
                    raise
                log.warning("abort_transaction() not complete, calling it again: %s", exc)
        self._aborted(batch)

    def _abort_quietly(self) -> None:
        try:
            self._abort("the loop is stopping on an error")
        except Exception as exc:
            log.warning("could not abort the open transaction: %s", exc)

    def _on_revoked(self, partitions: set[TopicPartition]) -> None:
        """Rebalance: partitions move away, so the open transaction (whose offsets the group
        would refuse) is aborted; the new owners start from the committed offsets."""
        if self._batch is not None:
            self._abort(f"partitions revoked: {sorted(partitions)}")


class _Listener:
    """The consumer's rebalance listener (runs in ``run``'s thread, inside ``poll``)."""

    def __init__(self, loop: TransactionalLoop) -> None:
        self._loop = loop

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self._loop._on_revoked(partitions)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._loop._on_revoked(partitions)

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        pass
