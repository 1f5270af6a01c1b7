"""The transactional producer without a cluster: its options, its state machine (Kafka's
TransactionManager states), KIP-691's fatal/abortable classification, what ``send`` raises in
each state, and transactional batches. Coordinator round trips are covered by
tests/integration/clients/test_transactions.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from strom import ConsumerGroupMetadata, Producer
from strom.aio import Producer as AioProducer
from strom.errors import (
    ConfigurationError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    NotEnoughReplicasError,
    ProducerFencedError,
    StromError,
    TransactionAbortableError,
)
from strom.producer._accumulator import Accumulator
from strom.producer._idempotence import ProducerIdState
from strom.producer._transactions import TransactionManager, TxnState, is_fatal
from strom.producer.config import ProducerConfig
from strom.records import Compression, read_header
from strom.types import TopicPartition

NOWHERE = "127.0.0.1:1"  # nothing listens: these tests never reach a server


# -- options ---------------------------------------------------------------------------------


def test_a_transactional_id_implies_idempotence() -> None:
    config = ProducerConfig(transactional_id="t1")
    assert config.enable_idempotence is True
    assert config.transaction_timeout_ms == 60000


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"transactional_id": ""}, "transactional_id must be a non-empty str"),
        ({"transactional_id": 7}, "transactional_id must be a non-empty str"),
        ({"transactional_id": "__strom_x"}, "reserved"),
        ({"transactional_id": "t", "enable_idempotence": False}, "requires idempotence"),
        ({"transactional_id": "t", "acks": 1}, "transactional_id requires acks='all'"),
        (
            {"transactional_id": "t", "max_in_flight_requests_per_connection": 6},
            "max_in_flight_requests_per_connection <= 5",
        ),
        ({"transaction_timeout_ms": 0}, "transaction_timeout_ms must be between 1"),
        ({"transaction_timeout_ms": "60000"}, "transaction_timeout_ms must be an int"),
    ],
)
def test_bad_transactional_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ProducerConfig(**options)  # type: ignore[arg-type]


# -- the state machine -----------------------------------------------------------------------


@pytest.fixture
def txn() -> Iterator[TransactionManager]:
    producer = AioProducer(NOWHERE, transactional_id="t-unit")
    manager = producer._txn
    assert manager is not None
    yield manager
    asyncio.run(producer.close(0))


def ready(txn: TransactionManager) -> TransactionManager:
    """As after a successful init_transactions() (producer id 42, epoch 3)."""
    txn._move(TxnState.INITIALIZING)
    txn.pid.set_id(42, 3)
    txn._move(TxnState.READY)
    return txn


def test_nothing_but_init_is_allowed_before_init_transactions(txn: TransactionManager) -> None:
    assert txn.state is TxnState.UNINITIALIZED
    assert isinstance(txn.block, InvalidTxnStateError)
    with pytest.raises(InvalidTxnStateError, match="init_transactions"):
        txn.begin()
    with pytest.raises(InvalidTxnStateError, match="init_transactions"):
        txn.begin_commit()


def test_begin_opens_sending_and_commit_closes_it(txn: TransactionManager) -> None:
    ready(txn)
    assert isinstance(txn.block, InvalidTxnStateError)  # send() outside a transaction
    txn.begin()
    assert txn.state is TxnState.IN_TRANSACTION and txn.block is None and txn.sending
    with pytest.raises(InvalidTxnStateError):
        txn.begin()  # no nested transactions
    assert txn.begin_commit() is True
    assert txn.state is TxnState.COMMITTING and txn.sending  # the flush still sends
    assert isinstance(txn.block, InvalidTxnStateError)  # but no new records
    assert txn.begin_commit() is False  # a retried commit resumes
    with pytest.raises(InvalidTxnStateError, match="commit is in progress"):
        txn.begin_abort()  # a commit is never turned into an abort


def test_an_empty_transaction_commits_without_the_coordinator(txn: TransactionManager) -> None:
    ready(txn).begin()
    txn.begin_commit()
    asyncio.run(txn.end(commit=True))  # nothing added: no EndTxn (no server here)
    assert txn.state is TxnState.READY
    assert (txn.pid.producer_id, txn.pid.producer_epoch) == (42, 3)


def test_abort_outside_a_transaction_is_a_no_op(txn: TransactionManager) -> None:
    ready(txn)
    assert txn.begin_abort() is False
    assert txn.state is TxnState.READY


def test_an_abortable_error_needs_an_abort(txn: TransactionManager) -> None:
    failed: list[BaseException] = []
    txn.fail_queued = failed.append
    ready(txn).begin()
    error = NotEnoughReplicasError("t-0: not enough replicas")
    txn.batch_failed(error)
    assert txn.state is TxnState.ABORTABLE_ERROR and not txn.sending
    assert isinstance(txn.block, TransactionAbortableError)
    assert txn.block.__cause__ is error
    assert len(failed) == 1  # the queued batches fail with it
    txn.batch_failed(InvalidTxnStateError("later"))  # the first error is the one kept
    assert txn.error is error
    with pytest.raises(TransactionAbortableError, match="abort_transaction"):
        txn.begin_commit()
    with pytest.raises(TransactionAbortableError):
        txn.begin()
    assert txn.begin_abort() is True
    assert txn.state is TxnState.ABORTING
    txn.batch_failed(error)  # in-flight batches failing while aborting are expected
    assert txn.state is TxnState.ABORTING
    asyncio.run(txn.end(commit=False))  # nothing was added: no EndTxn
    assert txn.state is TxnState.READY and txn.error is None
    txn.begin()
    assert txn.block is None


@pytest.mark.parametrize("error", [ProducerFencedError("fenced"), InvalidProducerEpochError("old")])
def test_a_fenced_producer_is_done(txn: TransactionManager, error: StromError) -> None:
    failed: list[BaseException] = []
    txn.fail_queued = failed.append
    ready(txn).begin()
    txn.batch_failed(error)
    assert txn.state is TxnState.FATAL_ERROR
    assert txn.block is error and failed == [error]
    for step in (txn.begin, txn.begin_commit, txn.begin_abort):
        with pytest.raises(type(error)):
            step()


def test_kip691_classification() -> None:
    assert is_fatal(ProducerFencedError("x"))
    assert is_fatal(InvalidProducerEpochError("x"))
    assert not is_fatal(TransactionAbortableError("x"))
    assert not is_fatal(InvalidTxnStateError("partition not added"))
    assert not is_fatal(NotEnoughReplicasError("x"))


# -- the producer's API ------------------------------------------------------------------------


def test_send_outside_a_transaction_raises_at_once() -> None:
    with Producer(NOWHERE, transactional_id="t-send", max_block_ms=100) as producer:
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            producer.send("topic", b"x")
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            producer.send_many("topic", [b"x"])
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            producer.begin_transaction()


def test_transaction_calls_need_a_transactional_producer() -> None:
    with Producer(NOWHERE, max_block_ms=100) as producer:
        for call in (
            producer.init_transactions,
            producer.begin_transaction,
            producer.commit_transaction,
            producer.abort_transaction,
        ):
            with pytest.raises(InvalidTxnStateError, match="transactional_id"):
                call()


def test_send_offsets_needs_the_consumer_group_metadata() -> None:
    async def run() -> None:
        async with AioProducer(NOWHERE, transactional_id="t-offsets") as producer:
            assert producer._txn is not None
            ready(producer._txn).begin()
            with pytest.raises(ConfigurationError, match="group_metadata"):
                await producer.send_offsets_to_transaction({}, ConsumerGroupMetadata(""))
            with pytest.raises(ConfigurationError, match="must be an integer >= 0"):
                await producer.send_offsets_to_transaction(
                    {TopicPartition("in", 0): -1}, ConsumerGroupMetadata("g")
                )

    asyncio.run(run())


def test_init_transactions_times_out_and_can_be_called_again() -> None:
    async def run() -> None:
        async with AioProducer(
            NOWHERE, transactional_id="t-init", max_block_ms=300, request_timeout_ms=100
        ) as producer:
            with pytest.raises(StromError, match="max_block_ms"):
                await producer.init_transactions()
            assert producer._txn is not None
            assert producer._txn.state is TxnState.UNINITIALIZED

    asyncio.run(run())


def test_a_transactional_producer_builds_transactional_batches() -> None:
    acc = Accumulator(
        batch_size=1024, buffer_memory=1 << 20, linger_ms=0, compression=Compression.NONE,
        transactional=True,
    )  # fmt: skip
    appended = acc.append("t", 0, 1000, None, b"v", None, 20)
    assert appended is not None
    header = read_header(appended[0].build())
    assert header.is_transactional and not header.is_control
    plain = Accumulator(
        batch_size=1024, buffer_memory=1 << 20, linger_ms=0, compression=Compression.NONE
    )
    appended = plain.append("t", 0, 1000, None, b"v", None, 20)
    assert appended is not None
    assert not read_header(appended[0].build()).is_transactional


def test_producer_id_state_restarts_sequences_at_a_new_epoch() -> None:
    pid = ProducerIdState()
    pid.set_id(42, 3)
    assert pid.assign(("t", 0), 5) == 0
    assert pid.assign(("t", 0), 5) == 5
    pid.set_id(42, 4)  # EndTxn answered the next epoch
    assert pid.assign(("t", 0), 1) == 0


def test_the_transaction_context_commits_or_aborts() -> None:
    with Producer(NOWHERE, transactional_id="t-context", max_block_ms=100) as producer:
        txn = producer.aio._txn
        assert txn is not None
        ready(txn)
        with producer.transaction():
            assert txn.state is TxnState.IN_TRANSACTION
        assert txn.state is TxnState.READY  # committed (nothing added: no EndTxn)
        with pytest.raises(RuntimeError, match="boom"), producer.transaction():
            raise RuntimeError("boom")
        assert txn.state is TxnState.READY  # aborted, the error propagated


def test_a_partition_is_held_back_until_added_and_asked_for_once() -> None:
    async def run() -> None:
        producer = AioProducer(
            NOWHERE, transactional_id="t-gate", max_block_ms=2000, request_timeout_ms=100
        )
        txn = producer._txn
        assert txn is not None
        ready(txn).begin()
        a, b, c = ("t", 0), ("t", 1), ("u", 0)
        txn.partitions.add(a)
        assert txn.gate([a, b]) == [a]  # b waits for AddPartitionsToTxn
        await asyncio.sleep(0)  # the AddPartitionsToTxn task starts (and retries: no server)
        assert txn._adding_now == frozenset({b}) and txn.touched
        assert txn.gate([a, b, c]) == [a]  # b is in flight: only c is queued
        assert txn._to_add == {c}
        txn.begin_abort()
        assert txn.gate([a, b, c]) == []  # nothing is sent while aborting
        txn.stop_adding()
        await txn.wait_adding()
        assert txn._to_add == set() and txn._adding_now == frozenset()
        await producer.close(0)

    asyncio.run(run())
