"""The transaction state machine (strom_coordinator.txn.state): every transition and refusal of
the contract, without I/O."""

from __future__ import annotations

import pytest

from strom.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionAbortableError,
)
from strom_coordinator.txn import state
from strom_coordinator.txn.state import FreshProducerIdNeeded, TxnMetadata, TxnState

TID = "orders"
PID = 1000
T0 = 1_000_000
TP = ("t", 0)
TP2 = ("t", 1)


def empty(epoch: int = 0, pid: int = PID) -> TxnMetadata:
    meta = state.new_transactional_id(TID, pid, 60_000, T0)
    return meta.replace(producer_epoch=epoch)


def ongoing(epoch: int = 0, pid: int = PID) -> TxnMetadata:
    meta = state.add_partitions(empty(epoch, pid), pid, epoch, [TP], [], now_ms=T0)
    assert meta is not None
    return meta


def test_ids_and_timeouts_are_validated() -> None:
    with pytest.raises(InvalidRequestError):
        state.check_transactional_id("")
    with pytest.raises(InvalidRequestError, match="reserved"):
        state.check_transactional_id("__strom_coordinator-offsets-1")
    state.check_transactional_id("__strim")
    for bad in (0, -1, 900_001):
        with pytest.raises(InvalidTransactionTimeoutError):
            state.check_timeout(bad, 900_000)
    state.check_timeout(900_000, 900_000)
    state.check_timeout(1, 900_000)


def test_a_new_id_is_empty_at_epoch_zero() -> None:
    meta = empty()
    assert (meta.state, meta.producer_id, meta.producer_epoch) == (TxnState.EMPTY, PID, 0)
    assert meta.start_ms == -1 and meta.partitions == frozenset()


def test_init_producer_bumps_the_epoch_and_forgets_the_ended_transaction() -> None:
    meta = state.end_txn(ongoing(3), PID, 3, True, now_ms=T0).metadata
    assert meta is not None
    done = state.complete(meta, T0 + 1)
    assert state.init_producer_blocker(done) is None
    bumped = state.init_producer(done, 30_000, T0 + 2)
    assert (bumped.state, bumped.producer_epoch, bumped.timeout_ms) == (TxnState.EMPTY, 5, 30_000)
    assert (bumped.txn_producer_id, bumped.txn_epoch) == (-1, -1)
    # The ended transaction's producer (epoch 3) is fenced now, not a retry.
    with pytest.raises(ProducerFencedError):
        state.end_txn(bumped, PID, 3, True, now_ms=T0)


def test_init_producer_waits_for_open_and_preparing_transactions() -> None:
    assert state.init_producer_blocker(ongoing()) is TxnState.ONGOING
    prepared = state.end_txn(ongoing(), PID, 0, False, now_ms=T0).metadata
    assert prepared is not None
    assert state.init_producer_blocker(prepared) is TxnState.PREPARE_ABORT
    with pytest.raises(ConcurrentTransactionsError):
        state.init_producer(prepared, 60_000, T0)
    with pytest.raises(ConcurrentTransactionsError):
        state.init_producer(ongoing(), 60_000, T0)


def test_init_producer_resuming_checks_the_callers_producer() -> None:
    meta = empty(4)
    assert state.init_producer_blocker(meta, PID, 4) is None
    with pytest.raises(ProducerFencedError):
        state.init_producer_blocker(meta, PID, 3)
    with pytest.raises(InvalidProducerIdMappingError):
        state.init_producer_blocker(meta, PID + 1, 4)


def test_epoch_overflow_moves_to_a_fresh_producer_id() -> None:
    top = empty(state.MAX_EPOCH - 2)
    assert state.init_producer(top, 60_000, T0).producer_epoch == state.MAX_EPOCH - 1
    last = empty(state.MAX_EPOCH - 1)
    with pytest.raises(FreshProducerIdNeeded):
        state.init_producer(last, 60_000, T0)
    moved = state.init_producer(last, 60_000, T0, fresh_producer_id=7)
    assert (moved.producer_id, moved.producer_epoch) == (7, 0)


def test_end_txn_overflow_answers_the_fresh_producer_id_and_retries_agree() -> None:
    meta = ongoing(state.MAX_EPOCH - 1)
    with pytest.raises(FreshProducerIdNeeded):
        state.end_txn(meta, PID, state.MAX_EPOCH - 1, True, now_ms=T0)
    answer = state.end_txn(meta, PID, state.MAX_EPOCH - 1, True, now_ms=T0, fresh_producer_id=9)
    assert (answer.producer_id, answer.producer_epoch) == (9, 0)
    prepared = answer.metadata
    assert prepared is not None
    assert (prepared.txn_producer_id, prepared.txn_epoch) == (PID, state.MAX_EPOCH - 1)
    retry = state.end_txn(prepared, PID, state.MAX_EPOCH - 1, True, now_ms=T0)
    assert (retry.metadata, retry.producer_id, retry.producer_epoch) == (None, 9, 0)


def test_add_partitions_begins_and_extends_a_transaction() -> None:
    meta = state.add_partitions(empty(), PID, 0, [TP], [], now_ms=T0 + 5)
    assert meta is not None
    assert (meta.state, meta.partitions, meta.start_ms) == (TxnState.ONGOING, {TP}, T0 + 5)
    assert state.add_partitions(meta, PID, 0, [TP], [], now_ms=T0 + 6) is None
    more = state.add_partitions(meta, PID, 0, [TP2], ["g"], now_ms=T0 + 7)
    assert more is not None
    assert more.partitions == {TP, TP2} and more.groups == {"g"} and more.start_ms == T0 + 5


def test_add_partitions_refusals() -> None:
    meta = ongoing(2)
    with pytest.raises(ProducerFencedError):
        state.add_partitions(meta, PID, 1, [TP2], [], now_ms=T0)
    with pytest.raises(InvalidProducerEpochError):
        state.add_partitions(meta, PID, 3, [TP2], [], now_ms=T0)
    with pytest.raises(InvalidProducerIdMappingError):
        state.add_partitions(meta, PID + 1, 2, [TP2], [], now_ms=T0)
    prepared = state.end_txn(meta, PID, 2, True, now_ms=T0).metadata
    assert prepared is not None
    with pytest.raises(ConcurrentTransactionsError):
        state.add_partitions(prepared, PID, 3, [TP2], [], now_ms=T0)
    with pytest.raises(ProducerFencedError):  # the ended transaction's producer
        state.add_partitions(prepared, PID, 2, [TP2], [], now_ms=T0)


def test_a_completed_transaction_lets_the_next_one_begin_at_the_next_epoch() -> None:
    prepared = state.end_txn(ongoing(0), PID, 0, True, now_ms=T0).metadata
    assert prepared is not None
    done = state.complete(prepared, T0 + 1)
    assert (done.state, done.partitions, done.start_ms) == (TxnState.COMPLETE_COMMIT, set(), -1)
    nxt = state.add_partitions(done, PID, 1, [TP2], [], now_ms=T0 + 2)
    assert nxt is not None
    assert (nxt.state, nxt.partitions, nxt.txn_epoch) == (TxnState.ONGOING, {TP2}, -1)


def test_verify_only_answers_none_only_for_the_exact_ongoing_transaction() -> None:
    meta = ongoing(1)
    assert state.verify_partition(meta, PID, 1, TP) is None
    assert isinstance(state.verify_partition(meta, PID, 1, TP2), InvalidTxnStateError)
    assert isinstance(state.verify_partition(meta, PID, 0, TP), ProducerFencedError)
    assert isinstance(state.verify_partition(meta, PID + 1, 1, TP), InvalidTxnStateError)
    assert isinstance(state.verify_partition(None, PID, 1, TP), InvalidTxnStateError)
    assert isinstance(state.verify_partition(empty(1), PID, 1, TP), InvalidTxnStateError)
    prepared = state.end_txn(meta, PID, 1, True, now_ms=T0).metadata
    assert isinstance(state.verify_partition(prepared, PID, 1, TP), ProducerFencedError)
    assert isinstance(state.verify_partition(prepared, PID, 2, TP), InvalidTxnStateError)


def test_end_txn_prepares_with_the_next_epoch() -> None:
    answer = state.end_txn(ongoing(4), PID, 4, True, now_ms=T0 + 9)
    prepared = answer.metadata
    assert prepared is not None
    assert (answer.producer_id, answer.producer_epoch) == (PID, 5)
    assert prepared.state is TxnState.PREPARE_COMMIT
    assert (prepared.producer_epoch, prepared.txn_producer_id, prepared.txn_epoch) == (5, PID, 4)
    assert prepared.partitions == {TP} and not prepared.aborted_by_timeout
    abort = state.end_txn(ongoing(4), PID, 4, False, now_ms=T0).metadata
    assert abort is not None and abort.state is TxnState.PREPARE_ABORT


@pytest.mark.parametrize("completed", [False, True])
def test_end_txn_retries_get_the_same_answer(completed: bool) -> None:
    meta = state.end_txn(ongoing(4), PID, 4, True, now_ms=T0).metadata
    assert meta is not None
    if completed:
        meta = state.complete(meta, T0)
    retry = state.end_txn(meta, PID, 4, True, now_ms=T0)
    assert (retry.metadata, retry.producer_id, retry.producer_epoch) == (None, PID, 5)
    with pytest.raises(InvalidTxnStateError, match="committed"):
        state.end_txn(meta, PID, 4, False, now_ms=T0)
    with pytest.raises(ProducerFencedError):
        state.end_txn(meta, PID, 3, True, now_ms=T0)


def test_end_txn_while_the_previous_one_is_completing_is_concurrent() -> None:
    meta = state.end_txn(ongoing(4), PID, 4, True, now_ms=T0).metadata
    assert meta is not None
    with pytest.raises(ConcurrentTransactionsError):
        state.end_txn(meta, PID, 5, True, now_ms=T0)


def test_end_txn_with_nothing_added_succeeds_without_a_write() -> None:
    answer = state.end_txn(empty(2), PID, 2, True, now_ms=T0)
    assert (answer.metadata, answer.producer_id, answer.producer_epoch) == (None, PID, 2)
    done = state.complete(state.end_txn(ongoing(2), PID, 2, False, now_ms=T0).metadata, T0)  # type: ignore[arg-type]
    again = state.end_txn(done, PID, 3, True, now_ms=T0)
    assert (again.metadata, again.producer_epoch) == (None, 3)


def test_end_txn_refusals() -> None:
    with pytest.raises(ProducerFencedError):
        state.end_txn(ongoing(4), PID, 3, True, now_ms=T0)
    with pytest.raises(InvalidProducerIdMappingError):
        state.end_txn(ongoing(4), PID + 5, 4, True, now_ms=T0)


def test_timeout_abort_then_abortable_then_abort() -> None:
    meta = ongoing(6)
    assert not state.timed_out(meta, T0 + 60_000)
    assert state.timed_out(meta, T0 + 60_001)
    aborted = state.abort_open(meta, T0 + 60_001, by_timeout=True)
    assert aborted.state is TxnState.PREPARE_ABORT and aborted.aborted_by_timeout
    assert (aborted.producer_epoch, aborted.txn_epoch) == (7, 6)
    for current in (aborted, state.complete(aborted, T0 + 60_002)):
        with pytest.raises(TransactionAbortableError, match="timeout"):
            state.add_partitions(current, PID, 6, [TP2], [], now_ms=T0)
        with pytest.raises(TransactionAbortableError, match="timeout"):
            state.end_txn(current, PID, 6, True, now_ms=T0)
        assert isinstance(state.verify_partition(current, PID, 6, TP), TransactionAbortableError)
        answer = state.end_txn(current, PID, 6, False, now_ms=T0)
        assert (answer.metadata, answer.producer_id, answer.producer_epoch) == (None, PID, 7)
    # InitProducerId clears the memory: epoch 6 is simply fenced from then on.
    fresh = state.init_producer(state.complete(aborted, T0), 60_000, T0)
    with pytest.raises(ProducerFencedError):
        state.end_txn(fresh, PID, 6, False, now_ms=T0)
    # So does the next transaction.
    nxt = state.add_partitions(state.complete(aborted, T0), PID, 7, [TP], [], now_ms=T0)
    assert nxt is not None and not nxt.aborted_by_timeout
    with pytest.raises(ProducerFencedError):
        state.end_txn(nxt, PID, 6, False, now_ms=T0)


def test_only_ongoing_transactions_are_aborted_and_completed_ones_completed() -> None:
    with pytest.raises(InvalidTxnStateError):
        state.abort_open(empty(), T0, by_timeout=True)
    with pytest.raises(InvalidTxnStateError):
        state.complete(ongoing(), T0)
    assert not state.timed_out(empty(), T0 + 10**9)


def test_idle_ids_expire() -> None:
    meta = empty()
    assert not state.expired(meta, T0 + 1000, 1000)
    assert state.expired(meta, T0 + 1001, 1000)
    assert not state.expired(ongoing(), T0 + 10**9, 1000)


def test_protobufs_default_producer_id_and_epoch_count_as_none() -> None:
    assert not state.resumes(0, 0, None) and not state.resumes(-1, -1, empty(3))
    assert not state.resumes(0, 0, empty(3)) and state.init_producer_blocker(empty(3), 0, 0) is None
    assert state.resumes(0, 0, empty(0, pid=0))  # it really is the id's producer
    assert state.resumes(PID, 3, empty(3))


def test_keep_epoch_ends_transactions_at_the_same_epoch() -> None:
    """Clients before KIP-890 part 2 (Kafka EndTxn < v5) run every transaction at one epoch."""
    answer = state.end_txn(ongoing(4), PID, 4, True, now_ms=T0, keep_epoch=True)
    prepared = answer.metadata
    assert prepared is not None and prepared.state is TxnState.PREPARE_COMMIT
    assert (answer.producer_id, answer.producer_epoch) == (PID, 4)
    assert (prepared.producer_epoch, prepared.txn_producer_id, prepared.txn_epoch) == (4, PID, 4)
    # While its markers are written: retries and the next transaction wait, writes are refused.
    with pytest.raises(ConcurrentTransactionsError):
        state.end_txn(prepared, PID, 4, True, now_ms=T0, keep_epoch=True)
    with pytest.raises(ConcurrentTransactionsError):
        state.add_partitions(prepared, PID, 4, [TP2], [], now_ms=T0)
    assert isinstance(state.verify_partition(prepared, PID, 4, TP), InvalidTxnStateError)
    assert state.init_producer_blocker(prepared, PID, 4) is TxnState.PREPARE_COMMIT
    done = state.complete(prepared, T0 + 1)
    # A retry after completion gets the same answer; the other outcome is refused.
    retry = state.end_txn(done, PID, 4, True, now_ms=T0, keep_epoch=True)
    assert (retry.metadata, retry.producer_id, retry.producer_epoch) == (None, PID, 4)
    with pytest.raises(InvalidTxnStateError, match="committed"):
        state.end_txn(done, PID, 4, False, now_ms=T0, keep_epoch=True)
    # A late write of the ended transaction is refused by verification.
    assert isinstance(state.verify_partition(done, PID, 4, TP), InvalidTxnStateError)
    # The next transaction runs at the same epoch, and aborts at it too.
    nxt = state.add_partitions(done, PID, 4, [TP2], [], now_ms=T0 + 2)
    assert nxt is not None and (nxt.state, nxt.producer_epoch, nxt.txn_epoch) == (
        TxnState.ONGOING, 4, -1,
    )  # fmt: skip
    assert state.verify_partition(nxt, PID, 4, TP2) is None
    aborted = state.end_txn(nxt, PID, 4, False, now_ms=T0 + 3, keep_epoch=True)
    assert aborted.metadata is not None and aborted.producer_epoch == 4
    assert aborted.metadata.state is TxnState.PREPARE_ABORT
    # InitProducerId still bumps, fencing the previous incarnation.
    fresh = state.init_producer(state.complete(aborted.metadata, T0 + 4), 60_000, T0 + 5)
    assert fresh.producer_epoch == 5
    with pytest.raises(ProducerFencedError):
        state.add_partitions(fresh, PID, 4, [TP], [], now_ms=T0 + 6)
    with pytest.raises(ProducerFencedError):
        state.end_txn(fresh, PID, 4, True, now_ms=T0 + 6, keep_epoch=True)


def test_keep_epoch_client_is_fenced_by_a_timeout_abort() -> None:
    meta = ongoing(6)
    aborted = state.abort_open(meta, T0 + 60_001, by_timeout=True)
    assert (aborted.producer_epoch, aborted.txn_epoch) == (7, 6)
    for current in (aborted, state.complete(aborted, T0 + 60_002)):
        for committed in (True, False):
            with pytest.raises(ProducerFencedError, match="timeout"):
                state.end_txn(current, PID, 6, committed, now_ms=T0, keep_epoch=True)


def test_keep_epoch_does_not_change_bumping_clients() -> None:
    answer = state.end_txn(ongoing(4), PID, 4, True, now_ms=T0, keep_epoch=False)
    assert answer.producer_epoch == 5
    done = state.complete(answer.metadata, T0)  # type: ignore[arg-type]
    again = state.end_txn(done, PID, 5, True, now_ms=T0)
    assert (again.metadata, again.producer_epoch) == (None, 5)
