"""Transactions as a partition leader sees them: verifying a transaction's first write to a
partition with its coordinator before appending it, and the values of WriteTxnMarkers and
DescribeProducers.

Verification (KIP-890): ``Log.append_as_leader`` refuses a transactional batch that would open a
transaction on the partition (``InvalidTxnStateError``) unless the caller names its
(producer id, epoch) as verified. ``ReplicaManager.append`` then hands the batch to
``node.deferred_appends``, which asks ``TxnVerifier`` (the transaction coordinator, through
``strom_storage.txn``) whether the partition belongs to that producer's ongoing transaction,
and appends with ``verified=`` only when it does. Appends of a
partition that arrive while one of its appends waits for a verification queue behind it
(``VerificationQueue``), so pipelined requests still append in arrival order; requests that
write no transactional batch never wait and never allocate anything here.

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from strom.errors import BrokerResponseError, InvalidTxnStateError

__all__ = [
    "DeferredAppend",
    "TxnMarker",
    "TxnMarkerResult",
    "TxnVerifier",
    "VerificationQueue",
    "verification_requests",
]

PartitionKey = tuple[str, int]
ProducerKey = tuple[int, int]  # (producer id, producer epoch)


class TxnVerifier(Protocol):
    """Asks a transactional id's coordinator whether partitions are part of the ongoing
    transaction of exactly ``producer_id`` at ``producer_epoch`` (AddPartitionsToTxn with
    verify_only)."""

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[PartitionKey],
    ) -> Mapping[PartitionKey, BrokerResponseError | None]:
        """Per partition None (part of the transaction) or why not; every partition asked
        gets an answer. Never raises for a coordinator problem: that is the answer
        (COORDINATOR_NOT_AVAILABLE when it cannot be reached)."""
        ...


@dataclass(slots=True)
class DeferredAppend:
    """A produce entry whose append waits: for a verification, or behind another append of
    its partition that does."""

    result_index: int
    key: PartitionKey
    data: bytes | memoryview
    #: The (producer id, epoch) pairs to verify; None: not known yet (queued behind another).
    needs: set[ProducerKey] | None = None
    error: BrokerResponseError | None = None


@dataclass(slots=True)
class _Turn:
    """One request's place in the queues of the partitions it defers."""

    done: asyncio.Future[None]
    before: set[asyncio.Future[None]] = field(default_factory=set)


class VerificationQueue:
    """Keeps the appends of a partition in arrival order while some wait for verification.

    ``tails`` maps a partition to the completion future of the last request that deferred an
    append of it; the fast path checks only ``if queue.tails and key in queue.tails``.
    """

    def __init__(self) -> None:
        self.tails: dict[PartitionKey, asyncio.Future[None]] = {}

    def enter(self, keys: Sequence[PartitionKey]) -> _Turn:
        """Take a turn on ``keys`` (the partitions one request defers)."""
        turn = _Turn(asyncio.get_running_loop().create_future())
        for key in keys:
            previous = self.tails.get(key)
            if previous is not None and previous is not turn.done:
                turn.before.add(previous)
            self.tails[key] = turn.done
        return turn

    async def wait(self, turn: _Turn) -> None:
        """Until every earlier request's deferred appends of the same partitions are done."""
        for previous in turn.before:
            await asyncio.shield(previous)

    def leave(self, turn: _Turn, keys: Sequence[PartitionKey]) -> None:
        """Release the partitions (always, also after a failure or cancellation)."""
        for key in keys:
            if self.tails.get(key) is turn.done:
                del self.tails[key]
        if not turn.done.done():
            turn.done.set_result(None)


def verification_requests(
    transactional_id: str, deferred: Sequence[DeferredAppend]
) -> dict[ProducerKey, list[PartitionKey]]:
    """The partitions to verify per (producer id, epoch): one AddPartitionsToTxn per producer.
    Entries of a request without a transactional id fail here with INVALID_TXN_STATE."""
    requests: dict[ProducerKey, list[PartitionKey]] = {}
    for entry in deferred:
        if entry.error is not None or not entry.needs:
            continue
        if not transactional_id:
            entry.error = InvalidTxnStateError(
                f"{entry.key[0]}-{entry.key[1]}: a transactional batch needs the produce "
                "request's transactional_id (the producer's transactional.id)"
            )
            continue
        for producer in entry.needs:
            keys = requests.setdefault(producer, [])
            if entry.key not in keys:
                keys.append(entry.key)
    return requests


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One marker of a WriteTxnMarkers request: end ``producer_id``'s transaction at
    ``producer_epoch`` on ``partitions``."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[PartitionKey, ...]


@dataclass(frozen=True, slots=True)
class TxnMarkerResult:
    """Per partition of a marker, in request order: None (written and committed, or a
    duplicate) or the error."""

    producer_id: int
    partitions: tuple[tuple[str, int, BrokerResponseError | None], ...]
