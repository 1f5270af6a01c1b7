"""Finding hanging transactions (Kafka's FindHangingTransactions test), without a cluster: which
open transactions on partitions are old enough to look at, and which of those no coordinator
is completing."""

from __future__ import annotations

from strom.admin.transactions import (
    ProducerState,
    TransactionDescription,
    TransactionListing,
    hanging,
    open_transactions,
)
from strom.types import TopicPartition

NOW = 10_000_000
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def producer(pid: int, *, start: int | None, last_ms: int, epoch: int = 2) -> ProducerState:
    return ProducerState(pid, epoch, 7, last_ms, 3, start)


def described(txn_id: str, pid: int, state: str, *tps: TopicPartition) -> TransactionDescription:
    return TransactionDescription(txn_id, state, 1, pid, 2, 60000, NOW - 1, tuple(tps), ())


def test_only_open_transactions_older_than_the_limit_are_candidates() -> None:
    producers = {
        TP0: [
            producer(1, start=10, last_ms=NOW - 120_000),  # open, 2 min quiet
            producer(2, start=None, last_ms=NOW - 600_000),  # nothing open
            producer(3, start=40, last_ms=NOW - 1_000),  # open, recent
        ],
        TP1: [producer(4, start=0, last_ms=NOW - 60_001)],
    }
    found = open_transactions(producers, 60_000, now_ms=NOW)
    assert [(tp, p.producer_id) for tp, p in found] == [(TP0, 1), (TP1, 4)]


def test_a_transaction_its_coordinator_is_completing_is_not_hanging() -> None:
    candidates = [(TP0, producer(1, start=10, last_ms=0))]
    listed = [TransactionListing("app-1", 1, "Ongoing")]
    assert hanging(candidates, listed, {"app-1": described("app-1", 1, "Ongoing", TP0)}) == []


def test_an_open_transaction_unknown_to_every_coordinator_hangs() -> None:
    (found,) = hanging([(TP0, producer(9, start=10, last_ms=5))], [], {})
    assert (found.partition, found.producer_id, found.start_offset) == (TP0, 9, 10)
    assert (found.producer_epoch, found.coordinator_epoch, found.last_timestamp_ms) == (2, 3, 5)
    assert found.transactional_id is None


def test_a_partition_outside_the_coordinators_transaction_hangs() -> None:
    # The coordinator's transaction of this producer id does not hold TP1: nobody will write
    # TP1's marker (Kafka's case of a late write re-opening a finished transaction).
    candidates = [(TP0, producer(1, start=10, last_ms=0)), (TP1, producer(1, start=3, last_ms=0))]
    listed = [TransactionListing("app-1", 1, "Ongoing")]
    (found,) = hanging(candidates, listed, {"app-1": described("app-1", 1, "Ongoing", TP0)})
    assert found.partition == TP1 and found.transactional_id == "app-1"


def test_a_producer_id_whose_transaction_has_ended_hangs() -> None:
    candidates = [(TP0, producer(1, start=10, last_ms=0))]
    listed = [TransactionListing("app-1", 1, "CompleteCommit")]
    (found,) = hanging(candidates, listed, {})
    assert found.transactional_id == "app-1"  # named, for the operator
