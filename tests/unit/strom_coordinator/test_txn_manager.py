"""The transaction manager without a network: an in-memory log, a marker writer that records
(or holds) markers, a counter for fresh producer ids; persistence before answers, markers
after, failover by replaying the log into a second manager."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from group_unitkit import MemoryLog

from strom.errors import (
    CoordinatorLoadInProgressError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    NotCoordinatorError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
    TransactionCoordinatorFencedError,
)
from strom_coordinator.txn import records, state
from strom_coordinator.txn.completion import MarkerJob
from strom_coordinator.txn.manager import TransactionManager, TxnConfig
from strom_coordinator.txn.state import TxnMetadata, TxnState

T = TypeVar("T")
TID = "orders"
TP = ("t", 0)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@dataclass
class Markers:
    jobs: list[MarkerJob] = field(default_factory=list)
    gate: asyncio.Event | None = None
    fail_with: BaseException | None = None
    #: How many writes fail with ``fail_with`` (None: all).
    failures: int | None = None

    async def write(self, job: MarkerJob) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None and (self.failures is None or self.failures > 0):
            if self.failures is not None:
                self.failures -= 1
            raise self.fail_with
        self.jobs.append(job)


@dataclass
class World:
    log: MemoryLog = field(default_factory=MemoryLog)
    markers: Markers = field(default_factory=Markers)
    clock: list[int] = field(default_factory=lambda: [1_000_000])
    next_pid: list[int] = field(default_factory=lambda: [100])
    fenced: list[int] = field(default_factory=list)

    def manager(self, *, load: bool = True, **config: int) -> TransactionManager:
        async def fresh() -> int:
            self.next_pid[0] += 1
            return self.next_pid[0]

        m = TransactionManager(
            self.log,
            TxnConfig(**config),
            fresh_producer_id=fresh,
            group_partition_for=lambda group: 3,
            markers=self.markers,
            coordinator_epoch=lambda partition: 42,
            on_fenced=self.fenced.append,
            wall_clock_ms=lambda: self.clock[0],
        )
        m.partition_count = 1
        if load:
            m.begin_loading(0)
            m.finish_loading(0)
        return m


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_init_gives_a_fresh_id_then_bumps_the_epoch_which_fences() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        assert await m.init_producer_id(TID, 60_000) == (101, 0)
        assert await m.init_producer_id(TID, 60_000) == (101, 1)
        with pytest.raises(ProducerFencedError):
            await m.add_partitions(TID, 101, 0, [TP])
        with pytest.raises(InvalidProducerIdMappingError):
            await m.add_partitions(TID, 555, 1, [TP])
        with pytest.raises(InvalidRequestError):
            await m.init_producer_id("__strom_coordinator-offsets-0", 60_000)
        # every state change was written before it was answered
        values = [records.decode_value(TID, v) for _, v in w.log.records() if v is not None]
        assert [v.producer_epoch for v in values] == [0, 1]

    run(main())


def test_commit_writes_prepare_then_markers_then_complete() -> None:
    async def main() -> None:
        w = World()
        w.markers.gate = asyncio.Event()
        m = w.manager()
        pid, epoch = await m.init_producer_id(TID, 60_000)
        await m.add_partitions(TID, pid, epoch, [TP, ("t", 1)])
        await m.add_offsets(TID, pid, epoch, "g")
        meta = m.get(TID)
        assert meta is not None
        assert meta.partitions == {TP, ("t", 1), ("__consumer_offsets", 3)}
        assert meta.groups == {"g"}
        assert await m.end_txn(TID, pid, epoch, True) == (pid, epoch + 1)
        assert m.get(TID).state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
        # a retry answers the same while the markers are pending
        assert await m.end_txn(TID, pid, epoch, True) == (pid, epoch + 1)
        w.markers.gate.set()
        await settle()
        (job,) = w.markers.jobs
        assert (job.producer_id, job.producer_epoch, job.committed) == (pid, epoch, True)
        assert job.coordinator_epoch == 42
        assert job.partitions == (TP, ("t", 1)) and job.groups == ("g",)
        done = m.get(TID)
        assert done is not None and done.state is TxnState.COMPLETE_COMMIT
        states = [records.decode_value(TID, v).state for _, v in w.log.records() if v]
        assert states[-2:] == [TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
        assert await m.end_txn(TID, pid, epoch, True) == (pid, epoch + 1)

    run(main())


def test_init_aborts_an_open_transaction_first() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        pid, epoch = await m.init_producer_id(TID, 60_000)
        await m.add_partitions(TID, pid, epoch, [TP])
        assert await m.init_producer_id(TID, 60_000) == (pid, epoch + 2)
        (job,) = w.markers.jobs
        assert (job.producer_epoch, job.committed) == (epoch, False)
        meta = m.get(TID)
        assert meta is not None and meta.state is TxnState.EMPTY

    run(main())


def test_timeout_abort_then_abortable_then_abort() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        pid, epoch = await m.init_producer_id(TID, 1_000)
        await m.add_partitions(TID, pid, epoch, [TP])
        w.clock[0] += 1_000
        assert await m.abort_timed_out() == 0
        w.clock[0] += 1
        assert await m.abort_timed_out() == 1
        await settle()
        (job,) = w.markers.jobs
        assert (job.producer_epoch, job.committed) == (epoch, False)
        assert m.get(TID).state is TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
        with pytest.raises(TransactionAbortableError, match="timeout"):
            await m.add_partitions(TID, pid, epoch, [("t", 1)])
        with pytest.raises(TransactionAbortableError):
            await m.end_txn(TID, pid, epoch, True)
        assert await m.end_txn(TID, pid, epoch, False) == (pid, epoch + 1)

    run(main())


def test_verify_only_never_changes_state() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        pid, epoch = await m.init_producer_id(TID, 60_000)
        before = len(w.log.batches)
        (result,) = await m.verify_partitions(TID, pid, epoch, [TP])
        assert result.error is not None
        await m.add_partitions(TID, pid, epoch, [TP])
        ok, missing = await m.verify_partitions(TID, pid, epoch, [TP, ("t", 9)])
        assert ok.error is None and missing.error is not None
        assert len(w.log.batches) == before + 1

    run(main())


def test_a_new_owner_completes_prepared_transactions_and_keeps_ongoing_clocks() -> None:
    async def main() -> None:
        w = World()
        w.markers.gate = asyncio.Event()  # the first owner never gets its markers out
        first = w.manager()
        pid, epoch = await first.init_producer_id(TID, 60_000)
        await first.add_partitions(TID, pid, epoch, [TP])
        await first.end_txn(TID, pid, epoch, True)
        other_pid, other_epoch = await first.init_producer_id("slow", 5_000)
        await first.add_partitions("slow", other_pid, other_epoch, [TP])
        first.unload(0)
        with pytest.raises(NotCoordinatorError):
            await first.end_txn(TID, pid, epoch + 1, True)

        w.markers.gate = None
        second = w.manager(load=False)
        second.begin_loading(0)
        with pytest.raises(CoordinatorLoadInProgressError):
            await second.end_txn(TID, pid, epoch, True)
        for key, value in w.log.records(0):
            second.replay(0, key, value, 0)
        second.finish_loading(0)
        await settle()
        (job,) = w.markers.jobs
        assert (job.producer_id, job.producer_epoch, job.committed) == (pid, epoch, True)
        assert second.get(TID).state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        assert second.get("slow").state is TxnState.ONGOING  # type: ignore[union-attr]
        w.clock[0] += 5_001
        assert await second.abort_timed_out() == 1

    run(main())


def test_a_fenced_marker_gives_the_partition_up() -> None:
    async def main() -> None:
        w = World()
        w.markers.fail_with = TransactionCoordinatorFencedError("newer coordinator epoch")
        m = w.manager()
        pid, epoch = await m.init_producer_id(TID, 60_000)
        await m.add_partitions(TID, pid, epoch, [TP])
        await m.end_txn(TID, pid, epoch, False)
        await settle()
        assert w.fenced == [0]
        assert m.get(TID).state is TxnState.PREPARE_ABORT  # type: ignore[union-attr]

    run(main())


def test_list_describe_and_expire() -> None:
    async def main() -> None:
        w = World()
        m = w.manager(transactional_id_expiration_ms=10_000)
        pid, epoch = await m.init_producer_id(TID, 60_000)
        await m.init_producer_id("idle", 60_000)
        await m.add_partitions(TID, pid, epoch, [TP])
        w.clock[0] += 2_000
        listed = await m.list_transactions(["ongoing"])
        assert [(t.transactional_id, t.state) for t in listed] == [(TID, "Ongoing")]
        assert len(await m.list_transactions(producer_ids=[pid])) == 1
        assert await m.list_transactions(duration_ms=2_000) == []
        assert len(await m.list_transactions(duration_ms=1_999)) == 1
        found, missing = await m.describe_transactions([TID, "nope"])
        assert found.metadata is not None and found.metadata.partitions == {TP}
        assert isinstance(missing.error, TransactionalIdNotFoundError)
        w.clock[0] += 10_000
        assert await m.expire() == 1
        assert m.get("idle") is None and m.get(TID) is not None
        assert w.log.records()[-1] == (records.transaction_key("idle"), None)

    run(main())


def test_epoch_overflow_takes_a_fresh_producer_id_and_marks_with_the_old_one() -> None:
    async def main() -> None:
        w = World()
        m = w.manager(load=False)
        last = state.MAX_EPOCH - 1
        ongoing = TxnMetadata(TID, 7, last, 60_000, TxnState.ONGOING,
                              partitions=frozenset({TP}), start_ms=w.clock[0])  # fmt: skip
        m.begin_loading(0)
        m.replay(0, records.transaction_key(TID), records.encode_value(ongoing), 0)
        m.finish_loading(0)
        assert await m.end_txn(TID, 7, last, True) == (101, 0)
        await settle()
        (job,) = w.markers.jobs
        assert (job.producer_id, job.producer_epoch) == (7, last)
        assert await m.end_txn(TID, 7, last, True) == (101, 0)  # a retry
        await m.add_partitions(TID, 101, 0, [TP])  # the next transaction, on the new id

    run(main())


def test_an_unexpected_marker_failure_is_retried() -> None:
    async def main() -> None:
        w = World()
        w.markers.fail_with, w.markers.failures = RuntimeError("boom"), 1
        m = w.manager()
        pid, epoch = await m.init_producer_id(TID, 60_000)
        await m.add_partitions(TID, pid, epoch, [TP])
        await m.end_txn(TID, pid, epoch, True)
        for _ in range(50):
            await asyncio.sleep(0.01)
            if m.get(TID).state is TxnState.COMPLETE_COMMIT:  # type: ignore[union-attr]
                break
        assert m.get(TID).state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        assert len(w.markers.jobs) == 1

    run(main())


def test_keep_epoch_runs_transactions_at_one_epoch_and_survives_a_new_owner() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        pid, epoch = await m.init_producer_id(TID, 60_000)
        for committed in (True, False, True):
            await m.add_partitions(TID, pid, epoch, [TP])
            answer = await m.end_txn(TID, pid, epoch, committed, keep_epoch=True)
            assert answer == (pid, epoch)
            await settle()
            done = m.get(TID)
            assert done is not None and done.state.completed
        # Every marker carries the one epoch; the state read back by a new owner agrees.
        assert [(j.producer_epoch, j.committed) for j in w.markers.jobs] == [
            (epoch, True), (epoch, False), (epoch, True),
        ]  # fmt: skip
        m.unload(0)
        second = w.manager(load=False)
        second.begin_loading(0)
        for key, value in w.log.records(0):
            second.replay(0, key, value, 0)
        second.finish_loading(0)
        assert await second.end_txn(TID, pid, epoch, True, keep_epoch=True) == (pid, epoch)
        await second.add_partitions(TID, pid, epoch, [TP])
        # InitProducerId still fences the old incarnation: it aborts the open transaction
        # (a bump) and bumps again.
        assert await second.init_producer_id(TID, 60_000) == (pid, epoch + 2)
        with pytest.raises(ProducerFencedError):
            await second.end_txn(TID, pid, epoch, False, keep_epoch=True)

    run(main())
