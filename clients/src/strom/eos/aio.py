"""``strom.aio.TransactionalLoop``: the asyncio twin of ``strom.TransactionalLoop``.

::

    from strom.aio import TransactionalLoop
    from strom.eos import OutputRecord

    async def enrich(record):  # or a plain function
        return [OutputRecord("enriched", await lookup(record.value), key=record.key)]

    loop = TransactionalLoop("localhost:9092", input_topics=["orders"], group_id="enricher",
                             transactional_id="enricher-1", transform=enrich)
    await loop.run()  # until loop.stop() or a fatal error (raised)

Same options, batching, rebalance handling and KIP-691 error classes as the synchronous loop
(``strom.eos.loop``); it runs in the caller's event loop over ``strom.aio.Consumer`` and
``strom.aio.Producer``. ``transform`` may be a plain function or a coroutine function.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from strom.consumer.aio import Consumer
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
from strom.producer import is_fatal
from strom.producer.aio import Producer
from strom.types import ConsumerRecord, TopicPartition

__all__ = ["AsyncTransform", "TransactionalLoop"]

log = logging.getLogger("strom.eos")

_Outputs = Iterable[OutputRecord | tuple[Any, ...]] | None
#: The user's function: one input record -> its output records (may be a coroutine function).
AsyncTransform = Callable[[ConsumerRecord], _Outputs | Awaitable[_Outputs]]


class TransactionalLoop(LoopCore):
    """Consume ``input_topics`` in ``group_id``, call ``transform`` on each record, write what
    it returns and commit the input offsets, exactly once (``strom.eos.loop`` explains how).
    Event-loop only, except ``stop()``."""

    consumer: Consumer
    producer: Producer

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        input_topics: Iterable[str] | str,
        group_id: str,
        transactional_id: str,
        transform: AsyncTransform,
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
        self._registering: asyncio.Task[None] | None = None
        self.consumer = Consumer(
            bootstrap_servers=bootstrap_servers, group_id=group_id, **self._consumer_options
        )
        self.producer = Producer(
            bootstrap_servers, transactional_id=transactional_id, **self._producer_options
        )

    # -- life cycle ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the producer and the consumer (leaving the group); idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.producer.close(timeout=self.producer.config.max_block_ms / 1000)
        finally:
            await self.consumer.close()

    async def __aenter__(self) -> TransactionalLoop:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until ``stop()`` (the open transaction is committed first) or a fatal error,
        which is raised. Closes both clients when it returns."""
        try:
            await self.producer.init_transactions()
            self.consumer.subscribe(self._topics, listener=_Listener(self))
            while not self._stop.is_set():
                await self._step()
            if self._batch is not None:
                await self._finish(self._batch)
        except BaseException as exc:
            if self._batch is not None and not is_fatal(exc):
                await self._abort_quietly()
            raise
        finally:
            await self.close()

    async def _step(self) -> None:
        timeout_ms, limit = self._poll_args()
        polled = await self.consumer.poll(timeout_ms=timeout_ms, max_records=limit)
        if polled:
            if self._batch is None:
                await self._begin()
                assert self._batch is not None
            if not await self._process(self._batch, polled):
                return
        if self._batch is not None and self._batch.due():
            await self._finish(self._batch)

    async def _begin(self) -> None:
        """Begin a transaction; the group is registered with it at once, in the background
        (see ``strom.eos.loop.TransactionalLoop._begin``)."""
        await self.producer.begin_transaction()
        self._new_batch()
        metadata = self.consumer.group_metadata()
        self._registering = asyncio.ensure_future(
            self.producer.send_offsets_to_transaction({}, metadata)
        )

    async def _registered(self) -> None:
        registering, self._registering = self._registering, None
        if registering is not None:
            await registering

    async def _process(
        self, batch: TxnBatch, polled: dict[TopicPartition, list[ConsumerRecord]]
    ) -> bool:
        """Transform and send; False when the transaction had to be aborted."""
        send = self.producer.send
        try:
            for tp, records in polled.items():
                batch.add(tp, records)
                for record in records:
                    produced = self._transform(record)
                    if inspect.isawaitable(produced):
                        produced = await produced
                    for out in output_records(produced, record):
                        await send(*out.send_args())
                        batch.produced += 1
        except StromError as exc:
            if classify(exc, committing=False) is Action.STOP:
                raise
            await self._abort(f"sending failed: {exc}")
            return False
        return True

    async def _finish(self, batch: TxnBatch) -> None:
        """Commit the open transaction with its input offsets (KIP-691 on errors)."""
        try:
            await self._registered()
            flushing = asyncio.ensure_future(
                self.producer.flush(self.producer.config.max_block_ms / 1000)
            )
            try:
                await self.producer.send_offsets_to_transaction(
                    batch.offsets(), self.consumer.group_metadata()
                )
            finally:
                await asyncio.gather(flushing, return_exceptions=True)
        except StromError as exc:
            if classify(exc, committing=False) is Action.STOP:
                raise
            await self._abort(f"committing the offsets failed: {exc}")
            return
        while True:
            try:
                await self.producer.commit_transaction()
                break
            except StromError as exc:
                action = self._commit_failed(exc)
                if action is Action.STOP:
                    raise
                if action is Action.ABORT:
                    await self._abort(f"the commit failed: {exc}")
                    return
        self._committed(batch)

    # -- aborting --------------------------------------------------------------------------------

    async def _abort(self, reason: str) -> None:
        """Abort the open transaction and rewind the partitions it read that are still ours."""
        batch = self._take_batch(reason)
        if batch is None:
            return
        try:
            await self._registered()
        except StromError as exc:
            if is_fatal(exc):
                raise
        while True:
            try:
                await self.producer.abort_transaction()
                break
            except StromError as exc:
                if is_fatal(exc) or not exc.retriable:
                    raise
                log.warning("abort_transaction() not complete, calling it again: %s", exc)
        self._aborted(batch)

    async def _abort_quietly(self) -> None:
        try:
            await self._abort("the loop is stopping on an error")
        except Exception as exc:
            log.warning("could not abort the open transaction: %s", exc)

    async def _on_revoked(self, partitions: set[TopicPartition]) -> None:
        """Rebalance: abort the open transaction (see the synchronous loop)."""
        if self._batch is not None:
            await self._abort(f"partitions revoked: {sorted(partitions)}")


class _Listener:
    """The consumer's rebalance listener (runs inside ``poll``, on the loop)."""

    def __init__(self, loop: TransactionalLoop) -> None:
        self._loop = loop

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        await self._loop._on_revoked(partitions)

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        await self._loop._on_revoked(partitions)

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        pass
