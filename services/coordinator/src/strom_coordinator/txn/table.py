"""``TxnTable``: the transactional ids of the hosted ``__transaction_state`` partitions, and how
a change of one is written: routed to its partition (``partitions.hosting.HostedPartitions``),
under the id's lock, persisted to the ``PartitionLog`` (acks=all) and only then applied.

Every partition has a load generation, bumped when it is loaded or unloaded: a write checks
afterwards that its partition is still the same load (NOT_COORDINATOR otherwise). The manager,
the marker completion, the expiry and the staged commits share one table.

Safety: one event loop, not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from strom.errors import InvalidProducerIdMappingError, NotCoordinatorError, StromError
from strom_coordinator.partitions.hosting import HostedPartitions, PartitionState
from strom_coordinator.partitions.log import PartitionLog
from strom_coordinator.txn import records
from strom_coordinator.txn.records import TRANSACTION_STATE_TOPIC
from strom_coordinator.txn.state import FreshProducerIdNeeded, TxnMetadata

__all__ = ["FreshProducerId", "TxnTable"]

FreshProducerId = Callable[[], Awaitable[int]]
_T = TypeVar("_T")


class TxnTable:
    """The ids of the hosted partitions, their locks and the partitions' load generations."""

    def __init__(
        self,
        log: PartitionLog,
        loader: PartitionState,
        *,
        fresh_producer_id: FreshProducerId,
    ) -> None:
        self.log = log
        self.txns: dict[str, TxnMetadata] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        #: Load generation of each hosted partition (bumped on load and unload).
        self.generations: dict[int, int] = {}
        self.partitions = HostedPartitions(
            loader, topic=TRANSACTION_STATE_TOPIC, key_kind="transactional id"
        )
        self._fresh = fresh_producer_id

    async def fresh_producer_id(self) -> int:
        return await self._fresh()

    def generation(self, partition: int) -> int:
        return self.generations.get(partition, 0)

    def bump_generation(self, partition: int) -> None:
        self.generations[partition] = self.generation(partition) + 1

    def served(self) -> list[TxnMetadata]:
        """The states of the ids of served partitions (not of those still loading)."""
        return [
            meta
            for tid, meta in self.txns.items()
            if (p := self.partition_of(tid)) is not None and self.partitions.is_served(p)
        ]

    def partition_of(self, transactional_id: str) -> int | None:
        try:
            return self.partitions.partition_for(transactional_id)
        except StromError:
            return None

    def lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self.locks.get(transactional_id)
        if lock is None:
            lock = self.locks[transactional_id] = asyncio.Lock()
        return lock

    def check(self, partition: int) -> int:
        """The partition's load generation; NOT_COORDINATOR when it is not served (any more)."""
        if not self.partitions.is_served(partition):
            raise NotCoordinatorError(
                f"this coordinator does not own {TRANSACTION_STATE_TOPIC}-{partition} (any more)"
            )
        return self.generation(partition)

    def check_generation(self, partition: int, generation: int) -> None:
        if self.generation(partition) != generation or not self.partitions.is_served(partition):
            raise NotCoordinatorError(
                f"{TRANSACTION_STATE_TOPIC}-{partition} moved to another coordinator"
            )

    def known(self, transactional_id: str, producer_id: int) -> TxnMetadata:
        meta = self.txns.get(transactional_id)
        if meta is None:
            raise InvalidProducerIdMappingError(
                f"{transactional_id!r} has no producer id {producer_id}: call InitProducerId"
            )
        return meta

    async def with_fresh(self, transition: Callable[[int | None], _T]) -> _T:
        """Run ``transition``; on epoch overflow once more with a fresh producer id."""
        try:
            return transition(None)
        except FreshProducerIdNeeded:
            return transition(await self._fresh())

    async def queue_write(self, partition: int, meta: TxnMetadata) -> asyncio.Future[None]:
        """Start persisting ``meta`` and return the write to await: once this returns, the
        record has its place in the partition's log order (``PartitionLog`` orders appends
        by call), ahead of any write started later."""
        key = records.transaction_key(meta.transactional_id)
        write = asyncio.ensure_future(
            self.log.append(partition, [(key, records.encode_value(meta))])
        )
        await asyncio.sleep(0)  # the append runs up to its first suspension: it is queued
        return write

    async def write(self, partition: int, generation: int, meta: TxnMetadata) -> None:
        """Persist ``meta`` (acks=all), then make it the id's state."""
        key = records.transaction_key(meta.transactional_id)
        await self.log.append(partition, [(key, records.encode_value(meta))])
        self.check_generation(partition, generation)
        self.txns[meta.transactional_id] = meta
