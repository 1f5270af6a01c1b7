"""``prepare_transaction()`` without a cluster: the producer's PREPARING and STAGED states (the
transaction handed over: nothing transactional is allowed any more, closing does not end it),
and a record failing while preparing (the transaction is then aborted as usual). The staged
commit itself is covered by tests/integration/transactions/test_staged_commit.py."""

from __future__ import annotations

import asyncio

import pytest

from strom.aio import Producer as AioProducer
from strom.errors import InvalidTxnStateError, NotEnoughReplicasError, TransactionAbortableError
from strom.producer._transactions import TransactionManager, TxnState
from strom.types import StagedTransaction

NOWHERE = "127.0.0.1:1"  # nothing listens: these tests never reach a server


def ready(producer: AioProducer) -> TransactionManager:
    """As after a successful init_transactions() (producer id 42, epoch 3)."""
    txn = producer._txn
    assert txn is not None
    txn._move(TxnState.INITIALIZING)
    txn.pid.set_id(42, 3)
    txn._move(TxnState.READY)
    return txn


def test_prepare_hands_the_transaction_over_and_refuses_everything_after() -> None:
    async def main() -> None:
        producer = AioProducer(NOWHERE, transactional_id="t-stage")
        txn = ready(producer)
        await producer.begin_transaction()
        staged = await producer.prepare_transaction()
        assert staged == StagedTransaction("t-stage", 42, 3)
        assert txn.state is TxnState.STAGED and not txn.sending
        with pytest.raises(InvalidTxnStateError, match="prepare_transaction"):
            await producer.send("t", b"x", partition=0)
        for call in (
            producer.begin_transaction,
            producer.commit_transaction,
            producer.abort_transaction,
            producer.prepare_transaction,
        ):
            with pytest.raises(InvalidTxnStateError, match="handed over"):
                await call()
        await producer.close(0)  # no EndTxn: there is no server to answer one
        assert txn.state is TxnState.STAGED

    asyncio.run(main())


def test_prepare_needs_an_open_transaction() -> None:
    async def main() -> None:
        producer = AioProducer(NOWHERE, transactional_id="t-stage")
        ready(producer)
        with pytest.raises(InvalidTxnStateError, match="prepare_transaction"):
            await producer.prepare_transaction()
        await producer.close(0)

    asyncio.run(main())


def test_a_record_failing_while_preparing_needs_an_abort() -> None:
    producer = AioProducer(NOWHERE, transactional_id="t-stage")
    txn = ready(producer)
    txn.begin()
    txn.begin_prepare()
    assert txn.state is TxnState.PREPARING and txn.sending  # the flush still sends
    assert isinstance(txn.block, InvalidTxnStateError)  # but no new records
    txn.batch_failed(NotEnoughReplicasError("t-0: not enough replicas"))
    assert txn.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        txn.staged()
    assert txn.begin_abort() is True
    asyncio.run(producer.close(0))
