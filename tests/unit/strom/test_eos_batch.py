"""The plain parts of ``strom.eos``: what a transform may return, the loop's options, the open
transaction's bookkeeping and KIP-691's classification of errors."""

from __future__ import annotations

import re

import pytest

from strom import OutputRecord, TransactionalLoop
from strom.eos import Action, classify
from strom.eos._batch import (
    LoopCore,
    LoopOptions,
    LoopStats,
    TxnBatch,
    check_client_options,
    output_records,
)
from strom.errors import (
    ConfigurationError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerFencedError,
    StromTimeoutError,
    TransactionAbortableError,
)
from strom.types import ConsumerRecord, TopicPartition


def record(offset: int, partition: int = 0, value: bytes = b"v") -> ConsumerRecord:
    return ConsumerRecord("in", partition, offset, 0, 0, None, value, (), -1, len(value), 0)


def test_outputs_may_be_records_tuples_or_none() -> None:
    got = output_records(
        [OutputRecord("out", b"a"), ("out", b"b", b"k"), ("out", b"c", None, [("h", b"1")], 2)],
        record(7),
    )
    assert got == [
        OutputRecord("out", b"a"),
        OutputRecord("out", b"b", b"k"),
        OutputRecord("out", b"c", None, [("h", b"1")], 2),
    ]
    assert output_records(None, record(7)) == []
    assert output_records(iter(()), record(7)) == []


@pytest.mark.parametrize(
    ("produced", "message"),
    [
        (b"out", "iterable of OutputRecord, got bytes for in-0@7"),
        (OutputRecord("out", b"a"), "iterable of OutputRecord, got OutputRecord"),
        ([b"just bytes"], "got b'just bytes' for in-0@7"),
        ([("out", 1, 2, 3, 4, 5)], "OutputRecord(topic, value, key, headers, partition)"),
        ([(None, b"v")], "needs a topic name, got None for in-0@7"),
    ],
)
def test_a_wrong_output_names_the_input_record(produced: object, message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        output_records(produced, record(7))  # type: ignore[arg-type]


def test_options_are_checked() -> None:
    assert LoopOptions(1, 0, 0) == LoopOptions(1, max_batch_interval_ms=0, poll_timeout_ms=0)
    with pytest.raises(ConfigurationError, match="max_batch_records must be an integer >= 1"):
        LoopOptions(max_batch_records=0)
    with pytest.raises(ConfigurationError, match=r"max_batch_interval_ms .* got -1"):
        LoopOptions(max_batch_interval_ms=-1)
    with pytest.raises(ConfigurationError, match=r"poll_timeout_ms .* got True"):
        LoopOptions(poll_timeout_ms=True)


def test_client_options_that_would_break_exactly_once_are_refused() -> None:
    check_client_options({"enable_auto_commit": False, "auto_offset_reset": "earliest"}, {})
    with pytest.raises(ConfigurationError, match=r"consumer_options\['enable_auto_commit'\]"):
        check_client_options({"enable_auto_commit": True}, {})
    with pytest.raises(ConfigurationError, match="must be 'read_committed'"):
        check_client_options({"isolation_level": "read_uncommitted"}, {})
    with pytest.raises(ConfigurationError, match=r"consumer_options\['group_id'\]"):
        check_client_options({"group_id": "g"}, {})
    with pytest.raises(ConfigurationError, match=r"producer_options\['transactional_id'\]"):
        check_client_options({}, {"transactional_id": "t"})


def test_the_loop_refuses_bad_options_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match="max_batch_records"):
        TransactionalLoop(
            "127.0.0.1:1",
            input_topics="in",
            group_id="g",
            transactional_id="t",
            transform=lambda r: None,
            max_batch_records=0,
        )
    with pytest.raises(ConfigurationError, match="isolation_level"):
        TransactionalLoop(
            "127.0.0.1:1",
            input_topics="in",
            group_id="g",
            transactional_id="t",
            transform=lambda r: None,
            consumer_options={"isolation_level": "read_uncommitted"},
        )


def test_a_batch_commits_the_next_offsets_and_rewinds_to_its_first() -> None:
    batch = TxnBatch(max_records=10, interval_s=60.0, started=100.0)
    p0, p1 = TopicPartition("in", 0), TopicPartition("in", 1)
    batch.add(p0, [record(5), record(6)])
    batch.add(p1, [record(40, 1)])
    batch.add(p0, [record(9)])  # a later poll: offsets may have gaps (markers, aborted data)
    assert batch.consumed == 4
    assert {tp: o.offset for tp, o in batch.offsets().items()} == {p0: 10, p1: 41}
    assert batch.first == {p0: 5, p1: 40}


def test_a_batch_is_due_at_its_interval_or_its_record_limit() -> None:
    batch = TxnBatch(max_records=3, interval_s=0.1, started=100.0)
    assert not batch.due(now=200.0)  # nothing read yet: nothing to commit
    batch.add(TopicPartition("in", 0), [record(0)])
    assert not batch.due(now=100.05)
    assert batch.left_s(now=100.05) == pytest.approx(0.05)
    assert batch.due(now=100.1)
    assert batch.room() == 2
    batch.add(TopicPartition("in", 0), [record(1), record(2)])
    assert batch.room() == 0
    assert batch.due(now=100.0)


@pytest.mark.parametrize(
    ("error", "committing", "action"),
    [
        (ProducerFencedError("newer"), False, Action.STOP),
        (InvalidProducerEpochError("old epoch"), True, Action.STOP),
        (TransactionAbortableError("coordinator aborted it"), False, Action.ABORT),
        (TransactionAbortableError("coordinator aborted it"), True, Action.ABORT),
        (InvalidTxnStateError("not ongoing"), True, Action.ABORT),
        (StromTimeoutError("EndTxn timed out"), True, Action.RETRY_COMMIT),
        (CoordinatorNotAvailableError("moving"), True, Action.RETRY_COMMIT),
        (StromTimeoutError("offsets timed out"), False, Action.ABORT),
        (ValueError("a bug in the transform"), False, Action.STOP),
        (KeyboardInterrupt(), True, Action.STOP),
    ],
)
def test_errors_are_classified_as_kip_691_does(
    error: BaseException, committing: bool, action: Action
) -> None:
    assert classify(error, committing=committing) is action


def core(**options: int) -> LoopCore:
    return LoopCore("in", lambda r: None, LoopOptions(**options), None, None)


def test_the_next_poll_waits_fully_when_idle_and_until_the_batch_is_due_otherwise() -> None:
    loop = core(max_batch_records=10, max_batch_interval_ms=60_000, poll_timeout_ms=500)
    assert loop._poll_args() == (500, 10)
    batch = loop._new_batch()
    batch.add(TopicPartition("in", 0), [record(0), record(1), record(2)])
    timeout_ms, limit = loop._poll_args()
    assert 0 < timeout_ms <= 60_000 and limit == 7
    batch.add(TopicPartition("in", 0), [record(o) for o in range(3, 10)])
    assert loop._poll_args() == (0, 1)  # full: due now, still a valid max_records


def test_a_commit_of_unknown_outcome_is_retried_unless_stopping() -> None:
    loop = core()
    loop._new_batch()
    timeout = StromTimeoutError("EndTxn timed out")
    assert loop._commit_failed(timeout) is Action.RETRY_COMMIT
    assert loop.stats.commit_retries == 1
    assert loop._commit_failed(TransactionAbortableError("aborted")) is Action.ABORT
    loop.stop()
    assert loop._commit_failed(timeout) is Action.STOP
    assert loop._batch is None  # left to the next instance, not aborted
    assert loop.stats.commit_retries == 1


def test_a_committed_batch_is_counted() -> None:
    loop = core()
    batch = loop._new_batch()
    batch.add(TopicPartition("in", 0), [record(0), record(1)])
    batch.produced = 3
    loop._committed(batch)
    assert loop._batch is None
    assert loop.stats == LoopStats(transactions_committed=1, records_consumed=2, records_produced=3)
