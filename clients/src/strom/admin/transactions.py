"""Transaction administration (Kafka's ``kafka-transactions.sh`` and Admin API): list and
describe transactions, describe the producers of partitions, find hanging transactions and
abort them.

The value types are here; ``strom.aio.Admin`` and ``strom.Admin`` have the methods
(``list_transactions``, ``describe_transactions``, ``describe_producers``,
``find_hanging_transactions``, ``abort_transaction``).

Aborting: Strom has no client-facing WriteTxnMarkers (only transaction coordinators write
markers), so a transaction is aborted by its transactional id: ``abort_transaction(id)`` calls
InitProducerId for it, as a new producer with that id would. The coordinator aborts the open
transaction (ABORT markers on each of its partitions), bumps the epoch and so fences the
producer that left it open; that producer's next call fails with ``ProducerFencedError``. A
transaction "hanging" on a partition (open transactional data its coordinator does not know
as part of an ongoing transaction, the case Kafka's ``abort --producer-id`` writes a marker
for) is reported by ``find_hanging_transactions``, with the transactional id when a
coordinator still knows the producer id; fencing that id does not end it (the coordinator
writes markers only to the partitions of its own transaction), and Strom has no client path
to write that partition's marker: partition leaders' transaction verification (KIP-890) is
what keeps such transactions from arising.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from strom.protocol.v1 import transaction_pb2
from strom.types import StagedCommit, StagedTransaction, TopicPartition

__all__ = [
    "HangingTransaction",
    "ProducerState",
    "TransactionDescription",
    "TransactionListing",
    "hanging",
    "staged_commit",
    "staged_member",
    "staged_members_pb",
]

#: Transaction states, Kafka's names.
STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One transactional id as ``list_transactions`` returns it."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transactional id's state at its coordinator (``describe_transactions``)."""

    transactional_id: str
    state: str
    coordinator_id: int
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    #: When the open transaction began (ms since the epoch); None when none is open.
    transaction_start_time_ms: int | None
    partitions: tuple[TopicPartition, ...]
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer as a partition's leader knows it (``describe_producers``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int
    #: First offset of its open transaction on the partition; None when none is open.
    current_txn_start_offset: int | None


@dataclass(frozen=True, slots=True)
class HangingTransaction:
    """An open transaction on a partition that no coordinator is completing."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int
    #: The transactional id when a coordinator still lists the producer id; None when none
    #: does.
    transactional_id: str | None


def listing(t: transaction_pb2.ListedTransaction) -> TransactionListing:
    return TransactionListing(t.transactional_id, t.producer_id, t.state)


def description(t: transaction_pb2.DescribedTransaction) -> TransactionDescription:
    return TransactionDescription(
        transactional_id=t.transactional_id,
        state=t.state,
        coordinator_id=t.coordinator_id,
        producer_id=t.producer_id,
        producer_epoch=t.producer_epoch,
        transaction_timeout_ms=t.transaction_timeout_ms,
        transaction_start_time_ms=(
            t.transaction_start_time_ms if t.transaction_start_time_ms >= 0 else None
        ),
        partitions=tuple(sorted(TopicPartition(p.topic, p.partition) for p in t.partitions)),
        group_ids=tuple(t.group_ids),
    )


def producer_state(p: transaction_pb2.ActiveProducer) -> ProducerState:
    return ProducerState(
        producer_id=p.producer_id,
        producer_epoch=p.producer_epoch,
        last_sequence=p.last_sequence,
        last_timestamp_ms=p.last_timestamp_ms,
        coordinator_epoch=p.coordinator_epoch,
        current_txn_start_offset=(
            p.current_txn_start_offset if p.current_txn_start_offset >= 0 else None
        ),
    )


def open_transactions(
    producers: dict[TopicPartition, list[ProducerState]], max_age_ms: int, now_ms: int | None = None
) -> list[tuple[TopicPartition, ProducerState]]:
    """The open transactions on the partitions whose producer wrote nothing for longer than
    ``max_age_ms`` (the candidates for hanging)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return [
        (tp, p)
        for tp, states in sorted(producers.items())
        for p in states
        if p.current_txn_start_offset is not None and now - p.last_timestamp_ms > max_age_ms
    ]


def hanging(
    candidates: Iterable[tuple[TopicPartition, ProducerState]],
    listed: Sequence[TransactionListing],
    described: dict[str, TransactionDescription],
) -> list[HangingTransaction]:
    """Kafka's FindHangingTransactions test: an open transaction on a partition hangs unless
    a coordinator lists its producer id as Ongoing with the partition in the transaction (a
    coordinator that still completes it)."""
    by_pid: dict[int, TransactionListing] = {t.producer_id: t for t in listed}
    found = []
    for tp, p in candidates:
        entry = by_pid.get(p.producer_id)
        desc = described.get(entry.transactional_id) if entry is not None else None
        if (
            desc is not None
            and desc.state == "Ongoing"
            and desc.producer_id == p.producer_id
            and tp in desc.partitions
        ):
            continue  # its coordinator will commit or abort it (or time it out)
        assert p.current_txn_start_offset is not None
        found.append(
            HangingTransaction(
                partition=tp,
                producer_id=p.producer_id,
                producer_epoch=p.producer_epoch,
                coordinator_epoch=p.coordinator_epoch,
                start_offset=p.current_txn_start_offset,
                last_timestamp_ms=p.last_timestamp_ms,
                transactional_id=entry.transactional_id if entry is not None else None,
            )
        )
    return found


def staged_member(m: transaction_pb2.StagedTransaction) -> StagedTransaction:
    return StagedTransaction(m.transactional_id, m.producer_id, m.producer_epoch)


def staged_members_pb(
    members: Iterable[StagedTransaction],
) -> list[transaction_pb2.StagedTransaction]:
    return [
        transaction_pb2.StagedTransaction(
            transactional_id=m.transactional_id,
            producer_id=m.producer_id,
            producer_epoch=m.producer_epoch,
        )
        for m in members
    ]


def staged_commit(c: transaction_pb2.StagedCommit) -> StagedCommit:
    return StagedCommit(
        commit_id=c.commit_id,
        sequence=c.sequence,
        state=c.state,
        members=tuple(staged_member(m) for m in c.members),
        metadata=bytes(c.metadata),
        failed_members=tuple(staged_member(m) for m in c.failed_members),
    )
