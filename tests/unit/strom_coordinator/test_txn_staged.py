"""Staged commits without a network: the pure decision logic (``txn.staged``), the record
codec, and ``StagedCommits`` over an in-memory log with a real ``TransactionManager`` as the
members' coordinator (every member local): the decision is written before any member is
committed, replays and retries, refusals that write nothing, lost members, and a new owner
finishing a decision left Committing."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from group_unitkit import MemoryLog

from strom.errors import (
    CoordinatorNotAvailableError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTxnStateError,
    NotCoordinatorError,
    ProducerFencedError,
    StromError,
    TransactionAbortableError,
)
from strom.types import StagedTransaction
from strom_coordinator.txn import records, staged
from strom_coordinator.txn.completion import MarkerJob
from strom_coordinator.txn.manager import TransactionManager, TxnConfig
from strom_coordinator.txn.staged import Decision, MemberOutcome, RequestKind, StagedState
from strom_coordinator.txn.state import TxnMetadata, TxnState

T = TypeVar("T")
TP = ("t", 0)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def member(tid: str, pid: int = 7, epoch: int = 3) -> StagedTransaction:
    return StagedTransaction(tid, pid, epoch)


# -- the pure logic ------------------------------------------------------------------------------


def test_classify_new_retry_replayed() -> None:
    a, b = member("a"), member("b")
    stored = staged.decide("q", 5, [a, b], b"m", 1)
    assert staged.classify(None, 0, [a]) is RequestKind.NEW
    assert staged.classify(stored, 6, [a]) is RequestKind.NEW
    assert staged.classify(stored, 5, [b, a]) is RequestKind.RETRY
    assert staged.classify(stored, 5, [a]) is RequestKind.REPLAYED
    assert staged.classify(stored, 4, [a, b]) is RequestKind.REPLAYED


@pytest.mark.parametrize(
    ("commit_id", "sequence", "members", "metadata", "match"),
    [
        ("", 0, [], b"", "empty"),
        ("__strom_x", 0, [], b"", "reserved"),
        ("q", -1, [], b"", "negative"),
        ("q", 0, [member("a"), member("a", 8)], b"", "twice"),
        ("q", 0, [member("")], b"", "invalid member"),
        ("q", 0, [member("a", -1, -1)], b"", "no producer id"),
        ("q", 0, [], b"x" * (staged.MAX_METADATA_BYTES + 1), "metadata"),
    ],
)
def test_bad_requests_are_refused(
    commit_id: str, sequence: int, members: list[StagedTransaction], metadata: bytes, match: str
) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        staged.check_request(commit_id, sequence, members, metadata)


def test_member_problem_accepts_exactly_its_open_or_idle_transaction() -> None:
    m = member("a", 7, 3)

    def meta(state: TxnState, pid: int = 7, epoch: int = 3) -> TxnMetadata:
        return TxnMetadata("a", pid, epoch, 60_000, state)

    assert staged.member_problem(m, meta(TxnState.ONGOING)) is None
    assert staged.member_problem(m, meta(TxnState.EMPTY)) is None  # staged with nothing written
    assert staged.member_problem(m, meta(TxnState.COMPLETE_COMMIT)) is None
    for bad in (
        None,
        meta(TxnState.ONGOING, epoch=4),
        meta(TxnState.ONGOING, pid=8),
        meta(TxnState.PREPARE_ABORT, epoch=4),
        meta(TxnState.PREPARE_COMMIT),
    ):
        problem = staged.member_problem(m, bad)
        assert isinstance(problem, InvalidTxnStateError) and "'a'" in str(problem)


def test_member_outcomes() -> None:
    assert staged.member_outcome(None) is MemberOutcome.COMMITTED
    assert staged.member_outcome(TransactionAbortableError("x")) is MemberOutcome.FAILED
    assert staged.member_outcome(ProducerFencedError("x")) is MemberOutcome.FAILED
    assert staged.member_outcome(InvalidTxnStateError("x")) is MemberOutcome.FAILED
    assert staged.member_outcome(CoordinatorNotAvailableError("x")) is MemberOutcome.RETRY
    assert staged.member_outcome(NotCoordinatorError("x")) is MemberOutcome.RETRY


def test_finish_only_from_committing() -> None:
    d = staged.decide("q", 1, [member("a"), member("b")], b"", 1)
    done = staged.finish(d, [member("b")], 2)
    assert done.state is StagedState.COMMITTED and done.failed_members == (member("b"),)
    with pytest.raises(InvalidTxnStateError):
        staged.finish(done, [], 3)


# -- records ---------------------------------------------------------------------------------------


def test_staged_record_round_trip_and_key_kinds() -> None:
    d = Decision("q-é", 9, StagedState.COMMITTING, (member("a"), member("b", 1, 0)),
                 b"\x00{json}", (member("c"),), 123)  # fmt: skip
    key = records.staged_commit_key("q-é")
    assert records.decode_key(key) == records.StagedCommitKey("q-é")
    assert records.decode_key(records.transaction_key("q-é")) == "q-é"  # distinct key types
    assert records.decode_staged_value("q-é", records.encode_staged_value(d)) == d
    with pytest.raises(InvalidRecordError):
        records.decode_staged_value("q", b'{"version": 0, "sequence": 1}')
    with pytest.raises(InvalidRecordError, match="too new"):
        records.decode_staged_value("q", b'{"version": 99}')


# -- StagedCommits over a real manager -------------------------------------------------------------


@dataclass
class Markers:
    jobs: list[MarkerJob] = field(default_factory=list)

    async def write(self, job: MarkerJob) -> None:
        self.jobs.append(job)


@dataclass
class LocalMembers:
    """``MemberCalls`` over one manager serving every id (all members local); ``hold``
    keeps EndTxn waiting, ``unreachable`` answers it as a coordinator that cannot be
    reached."""

    manager: TransactionManager | None = None
    hold: asyncio.Event | None = None
    unreachable: int = 0
    ended: list[str] = field(default_factory=list)

    async def describe(self, transactional_ids: Sequence[str]) -> dict[str, TxnMetadata | None]:
        assert self.manager is not None
        return {tid: self.manager.get(tid) for tid in transactional_ids}

    async def end(self, m: StagedTransaction) -> None:
        assert self.manager is not None
        if self.hold is not None:
            await self.hold.wait()
        if self.unreachable > 0:
            self.unreachable -= 1
            raise CoordinatorNotAvailableError("not now")
        await self.manager.end_txn(m.transactional_id, m.producer_id, m.producer_epoch, True)
        self.ended.append(m.transactional_id)


@dataclass
class Stats:
    staged: list[tuple[int, int]] = field(default_factory=list)

    def on_markers(self, committed: bool, count: int) -> None:
        pass

    def on_staged_commit(self, members: int, failed: int) -> None:
        self.staged.append((members, failed))


@dataclass
class World:
    log: MemoryLog = field(default_factory=MemoryLog)
    markers: Markers = field(default_factory=Markers)
    clock: list[int] = field(default_factory=lambda: [1_000_000])
    next_pid: list[int] = field(default_factory=lambda: [100])
    stats: Stats = field(default_factory=Stats)

    def manager(self, members: LocalMembers | None = None) -> TransactionManager:
        async def fresh() -> int:
            self.next_pid[0] += 1
            return self.next_pid[0]

        calls = members or LocalMembers()
        m = TransactionManager(
            self.log, TxnConfig(), fresh_producer_id=fresh, group_partition_for=lambda g: 0,
            markers=self.markers, coordinator_epoch=lambda p: 1, stats=self.stats,
            wall_clock_ms=lambda: self.clock[0], staged_members=calls,
        )  # fmt: skip
        calls.manager = m
        m.partition_count = 1
        m.begin_loading(0)
        for _, batch in self.log.batches:
            for key, value in batch:
                m.replay(0, key, value, 0)
        m.finish_loading(0)
        return m

    async def stage(
        self, m: TransactionManager, tid: str, *, write: bool = True
    ) -> StagedTransaction:
        """What a producer's prepare_transaction() leaves behind: an open transaction."""
        pid, epoch = await m.init_producer_id(tid, 60_000)
        if write:
            await m.add_partitions(tid, pid, epoch, [TP])
        return StagedTransaction(tid, pid, epoch)


def decisions(log: MemoryLog) -> list[Decision]:
    out = []
    for key, value in log.records():
        decoded = records.decode_key(key)
        if isinstance(decoded, records.StagedCommitKey) and value is not None:
            out.append(records.decode_staged_value(decoded.commit_id, value))
    return out


def state_of(m: TransactionManager, tid: str) -> TxnState:
    meta = m.get(tid)
    assert meta is not None
    return meta.state


def test_commit_writes_the_decision_before_any_member_then_commits_all() -> None:
    async def main() -> None:
        w = World()
        calls = LocalMembers(hold=asyncio.Event())
        m = w.manager(calls)
        a, b = await w.stage(m, "a"), await w.stage(m, "b")
        empty = await w.stage(m, "empty", write=False)  # staged with nothing written
        request = asyncio.ensure_future(m.staged.commit("q", 0, [a, b, empty], b"meta"))
        for _ in range(50):
            await asyncio.sleep(0)
        # decided and durable, no member touched yet
        (decided,) = decisions(w.log)
        assert decided.state is StagedState.COMMITTING and decided.metadata == b"meta"
        assert state_of(m, "a") is TxnState.ONGOING
        assert (m.staged.describe("q") or decided).state is StagedState.COMMITTING
        calls.hold.set()  # type: ignore[union-attr]
        already, done = await request
        assert not already and done.state is StagedState.COMMITTED and done.failed_members == ()
        assert [d.state for d in decisions(w.log)] == [
            StagedState.COMMITTING,
            StagedState.COMMITTED,
        ]
        for _ in range(50):
            await asyncio.sleep(0)
        assert state_of(m, "a") is TxnState.COMPLETE_COMMIT
        assert state_of(m, "b") is TxnState.COMPLETE_COMMIT
        assert w.stats.staged == [(3, 0)]

    run(main())


def test_replay_commits_nothing_and_retry_answers_like_the_first_call() -> None:
    async def main() -> None:
        w = World()
        calls = LocalMembers()
        m = w.manager(calls)
        a = await w.stage(m, "a")
        first = await m.staged.commit("q", 3, [a])
        written = len(w.log.batches)
        assert await m.staged.commit("q", 3, [a]) == (False, first[1])  # a retry
        replayed_member = await w.stage(m, "a2")
        already, stored = await m.staged.commit("q", 3, [replayed_member])
        assert already and stored == first[1]
        already, _ = await m.staged.commit("q", 2, [replayed_member])
        assert already
        assert state_of(m, "a2") is TxnState.ONGOING  # left for the caller to abort
        assert len(w.log.batches) == written + 2  # only a2's own InitProducerId/AddPartitions
        assert calls.ended == ["a"]

    run(main())


def test_a_member_not_open_refuses_the_whole_commit_and_writes_nothing() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        a = await w.stage(m, "a")
        b = await w.stage(m, "b")
        await m.init_producer_id("b", 60_000)  # fences b: its transaction is aborted
        before = len(w.log.batches)
        with pytest.raises(InvalidTxnStateError, match="'b'"):
            await m.staged.commit("q", 0, [a, b])
        with pytest.raises(InvalidTxnStateError, match="unknown"):
            await m.staged.commit("q", 0, [a, member("never")])
        assert len(w.log.batches) == before and decisions(w.log) == []
        assert state_of(m, "a") is TxnState.ONGOING and m.staged.describe("q") is None

    run(main())


def test_a_member_expiring_after_the_decision_is_reported_failed() -> None:
    async def main() -> None:
        w = World()
        calls = LocalMembers(hold=asyncio.Event())
        m = w.manager(calls)
        a, b = await w.stage(m, "a"), await w.stage(m, "b")
        request = asyncio.ensure_future(m.staged.commit("q", 0, [a, b]))
        for _ in range(50):
            await asyncio.sleep(0)
        w.clock[0] += 60_001  # both past their timeout: the sweep aborts them
        assert await m.abort_timed_out() == 2
        calls.hold.set()  # type: ignore[union-attr]
        already, done = await request
        assert not already and set(done.failed_members) == {a, b}
        assert w.stats.staged == [(2, 2)]

    run(main())


def test_retriable_member_errors_are_retried() -> None:
    async def main() -> None:
        w = World()
        calls = LocalMembers(unreachable=3)
        m = w.manager(calls)
        a = await w.stage(m, "a")
        _, done = await m.staged.commit("q", 0, [a])
        assert done.failed_members == () and calls.ended == ["a"]

    run(main())


def test_a_new_owner_finishes_a_decision_left_committing() -> None:
    async def main() -> None:
        w = World()
        calls = LocalMembers(hold=asyncio.Event())  # the first owner never drives a member
        first = w.manager(calls)
        a, b = await w.stage(first, "a"), await w.stage(first, "b")
        request = asyncio.ensure_future(first.staged.commit("q", 4, [a, b], b"x"))
        for _ in range(50):
            await asyncio.sleep(0)
        first.unload(0)  # the partition moves away (its owner died)
        with pytest.raises(NotCoordinatorError):
            await request
        second = w.manager()  # loads the log: the decision is still Committing
        for _ in range(200):
            await asyncio.sleep(0)
        done = second.staged.describe("q")
        assert done is not None and done.state is StagedState.COMMITTED and done.sequence == 4
        assert state_of(second, "a") is TxnState.COMPLETE_COMMIT
        assert state_of(second, "b") is TxnState.COMPLETE_COMMIT
        # the caller's retry is recognised
        assert await second.staged.commit("q", 4, [a, b]) == (False, done)

    run(main())


def test_requests_of_one_commit_id_are_serialised() -> None:
    async def main() -> None:
        w = World()
        calls = LocalMembers(hold=asyncio.Event())
        m = w.manager(calls)
        a, b = await w.stage(m, "a"), await w.stage(m, "b")
        first = asyncio.ensure_future(m.staged.commit("q", 0, [a]))
        second = asyncio.ensure_future(m.staged.commit("q", 1, [b]))
        for _ in range(50):
            await asyncio.sleep(0)
        assert [d.sequence for d in decisions(w.log)] == [0]  # the second waits
        calls.hold.set()  # type: ignore[union-attr]
        assert (await first)[1].sequence == 0
        assert (await second)[1].sequence == 1
        assert [(d.sequence, d.state) for d in decisions(w.log)] == [
            (0, StagedState.COMMITTING), (0, StagedState.COMMITTED),
            (1, StagedState.COMMITTING), (1, StagedState.COMMITTED),
        ]  # fmt: skip

    run(main())


def test_list_transactions_prefix_filter() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        for tid in ("job-1-0", "job-1-1", "job-2-0", "other"):
            await w.stage(m, tid)
        listed = await m.list_transactions(prefix="job-1-")
        assert [t.transactional_id for t in listed] == ["job-1-0", "job-1-1"]

    run(main())


def test_staged_errors_reach_the_caller_as_strom_errors() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        with pytest.raises(StromError):
            await m.staged.commit("", 0, [])

    run(main())


def test_committed_decisions_expire_like_idle_ids() -> None:
    async def main() -> None:
        w = World()
        m = w.manager()
        a = await w.stage(m, "a")
        await m.staged.commit("q", 2, [a])
        w.clock[0] += 604_800_000  # transactional.id.expiration.ms, not more
        assert await m.staged.expire(604_800_000) == 0
        w.clock[0] += 1
        assert await m.staged.expire(604_800_000) == 1
        assert m.staged.describe("q") is None
        key, value = w.log.records()[-1]
        assert records.decode_key(key) == records.StagedCommitKey("q") and value is None
        assert w.manager().staged.describe("q") is None  # the tombstone replays too

    run(main())
