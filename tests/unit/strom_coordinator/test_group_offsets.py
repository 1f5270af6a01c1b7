"""Committed offsets: acks before visibility, log failures, replay, tombstones, expiry, deletes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from group_unitkit import (
    MemoryLog,
    RecordingStats,
    join,
    member_id,
    request,
    serving_manager,
    start,
)

from strom.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidCommitOffsetSizeError,
    InvalidTopicError,
    MessageTooLargeError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    RequestTimedOutError,
    StromTimeoutError,
    UnknownMemberIdError,
    UnknownServerError,
)
from strom.group.protocol import Subscription, encode_subscription
from strom_coordinator.group import records
from strom_coordinator.group.api import CommitPartition, LeaveMember
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.manager import GroupManager

MINUTE = 60_000


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def commit(*offsets: tuple[str, int, int]) -> list[CommitPartition]:
    return [CommitPartition(t, p, o, 7, "meta") for t, p, o in offsets]


async def offsets(m: GroupManager, group: str = "g") -> dict[tuple[str, int], int]:
    return {(o.topic, o.partition): o.offset for o in await m.fetch_offsets(group)}


def replayed(log: MemoryLog, config: GroupConfig | None = None) -> GroupManager:
    fresh = serving_manager(MemoryLog(), config or GroupConfig(group_min_session_timeout_ms=10))
    fresh.begin_loading(0)
    marker = records.ownership_marker(3, 9)
    fresh.replay(0, *marker, 0)
    for key, value in log.records(0):
        fresh.replay(0, key, value, 0)
    fresh.replay(0, b"\x00", b"garbage", 0)  # malformed records are skipped
    fresh.replay(0, None, b"no key", 0)
    fresh.finish_loading(0)
    return fresh


def test_simple_commit_is_visible_only_after_the_log_acknowledged() -> None:
    async def scenario() -> None:
        log = MemoryLog(gate=asyncio.Event())
        stats = RecordingStats()
        m = serving_manager(log, stats=stats)
        pending = start(m.commit_offsets("g", -1, "", commit(("t", 0, 5), ("t", 1, 9))))
        await asyncio.sleep(0.01)
        assert not pending.done()
        assert await offsets(m) == {}
        [missing] = await m.fetch_offsets("g", [("t", 0)])
        assert missing.offset == -1 and missing.leader_epoch == -1
        assert log.gate is not None
        log.gate.set()
        results = await pending
        assert [r.error for r in results] == [None, None]
        assert await offsets(m) == {("t", 0): 5, ("t", 1): 9}
        [got] = await m.fetch_offsets("g", [("t", 1)])
        assert (got.offset, got.leader_epoch, got.metadata) == (9, 7, "meta")
        assert stats.commits == [("g", 2)]
        assert len(log.batches) == 1 and len(log.batches[0][1]) == 2  # one batch

    run(scenario)


@pytest.mark.parametrize(
    ("failure", "seen"),
    [
        (NotCoordinatorError("fenced"), NotCoordinatorError),
        (NotEnoughReplicasError("isr"), CoordinatorNotAvailableError),
        (RequestTimedOutError("slow"), CoordinatorNotAvailableError),
        (MessageTooLargeError("big"), InvalidCommitOffsetSizeError),
        (StromTimeoutError("client"), CoordinatorNotAvailableError),
        (RuntimeError("bug"), UnknownServerError),
    ],
)
def test_failed_append_answers_the_error_and_changes_nothing(
    failure: BaseException, seen: type[Exception]
) -> None:
    async def scenario() -> None:
        log = MemoryLog(fail_with=failure)
        m = serving_manager(log)
        [r] = await m.commit_offsets("g", -1, "", commit(("t", 0, 5)))
        assert isinstance(r.error, seen)
        assert await offsets(m) == {}

    run(scenario)


def test_per_partition_validation() -> None:
    async def scenario() -> None:
        m = serving_manager(config=GroupConfig(offset_metadata_max_bytes=4))
        results = await m.commit_offsets(
            "g",
            -1,
            "",
            [
                CommitPartition("t", 0, 1, -1, "1234"),
                CommitPartition("t", 1, 1, -1, "12345"),
                CommitPartition("", 0, 1),
                CommitPartition("x" * 300, 0, 1),
            ],
        )
        errors = [type(r.error) if r.error else None for r in results]
        assert errors == [None, OffsetMetadataTooLargeError, InvalidTopicError, InvalidTopicError]
        assert await offsets(m) == {("t", 0): 1}

    run(scenario)


def test_group_commit_rules() -> None:
    async def scenario() -> None:
        m = serving_manager()
        with pytest.raises(IllegalGenerationError):
            await m.commit_offsets("g", 4, "someone", commit(("t", 0, 1)))
        a = await join(m)
        # CompletingRebalance: the member must sync first.
        with pytest.raises(RebalanceInProgressError):
            await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 1)))
        await m.sync_group("g", 1, a.member_id, assignments={})
        with pytest.raises(UnknownMemberIdError):  # a simple commit into an active group
            await m.commit_offsets("g", -1, "", commit(("t", 0, 1)))
        with pytest.raises(UnknownMemberIdError):
            await m.commit_offsets("g", 1, "ghost", commit(("t", 0, 1)))
        with pytest.raises(IllegalGenerationError):
            await m.commit_offsets("g", 2, a.member_id, commit(("t", 0, 1)))
        [ok] = await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 3)))
        assert ok.error is None and await offsets(m) == {("t", 0): 3}
        # PreparingRebalance still accepts commits of the current generation.
        b = await member_id(m)
        tb = start(m.join_group(request(member_id=b)))
        await asyncio.sleep(0)
        [ok] = await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 4)))
        assert ok.error is None
        await m.leave_group("g", [LeaveMember(a.member_id)])
        await tb

    run(scenario)


def test_replay_rebuilds_groups_and_offsets() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        a = await join(m, session_ms=100)
        await m.sync_group("g", 1, a.member_id, assignments={a.member_id: b"A"})
        await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 10), ("t", 1, 20)))
        await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 11)))
        await m.commit_offsets("simple", -1, "", commit(("u", 0, 1)))
        await m.commit_offsets("gone", -1, "", commit(("u", 0, 1)))
        assert [r.error for r in await m.delete_groups(["gone"])] == [None]

        fresh = replayed(log)
        assert await offsets(fresh) == {("t", 0): 11, ("t", 1): 20}
        assert await offsets(fresh, "simple") == {("u", 0): 1}
        assert await offsets(fresh, "gone") == {}
        [d, gone] = await fresh.describe_groups(["g", "gone"])
        assert (d.state, d.generation_id, d.protocol_name) == ("Stable", 1, "range")
        assert [(x.member_id, x.assignment) for x in d.members] == [(a.member_id, b"A")]
        assert gone.state == "Dead"
        # The restored member can carry on within its session...
        await fresh.heartbeat("g", 1, a.member_id)
        # ...and is expired like any other when it does not.
        await asyncio.sleep(0.3)
        [d] = await fresh.describe_groups(["g"])
        assert d.state == "Empty" and d.members == []

    run(scenario)


def test_offset_tombstones_replay_as_deletions() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        await m.commit_offsets("g", -1, "", commit(("t", 0, 5), ("t", 1, 6)))
        results = await m.delete_offsets("g", [("t", 0), ("nope", 3)])
        assert [r.error for r in results] == [None, None]
        assert await offsets(m) == {("t", 1): 6}
        assert log.records()[-1] == (records.offset_key("g", "t", 0), None)
        assert await offsets(replayed(log)) == {("t", 1): 6}
        with pytest.raises(GroupIdNotFoundError):
            await m.delete_offsets("unknown", [("t", 0)])

    run(scenario)


def test_offset_delete_refuses_topics_the_group_consumes() -> None:
    async def scenario() -> None:
        m = serving_manager()
        sub = encode_subscription(Subscription(topics=["t"]))
        a = await join(m, protocols=(("range", sub),))
        await m.sync_group("g", 1, a.member_id, assignments={})
        await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 1), ("u", 0, 2)))
        t, u = await m.delete_offsets("g", [("t", 0), ("u", 0)])
        assert isinstance(t.error, GroupSubscribedToTopicError) and u.error is None
        assert await offsets(m) == {("t", 0): 1}

    run(scenario)


def test_delete_groups() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        a = await join(m, "active")
        await m.commit_offsets("idle", -1, "", commit(("t", 0, 5)))
        results = await m.delete_groups(["active", "idle", "unknown", "idle"])
        errors = {r.group_id: type(r.error) if r.error else None for r in results}
        assert errors == {
            "active": NonEmptyGroupError,
            "idle": None,
            "unknown": GroupIdNotFoundError,
        }
        assert await offsets(m, "idle") == {}
        assert set(log.records()[-2:]) == {
            (records.offset_key("idle", "t", 0), None),
            (records.group_key("idle"), None),
        }
        [again] = await m.delete_groups(["idle"])
        assert isinstance(again.error, GroupIdNotFoundError)
        del a

    run(scenario)


def test_failed_delete_keeps_the_group() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        await m.commit_offsets("idle", -1, "", commit(("t", 0, 5)))
        log.fail_with = NotEnoughReplicasError("isr")
        [r] = await m.delete_groups(["idle"])
        assert isinstance(r.error, CoordinatorNotAvailableError)
        assert await offsets(m, "idle") == {("t", 0): 5}
        [d] = await m.describe_groups(["idle"])
        assert d.state == "Empty"

    run(scenario)


def test_expiry_of_simple_group_offsets_and_the_group() -> None:
    async def scenario() -> None:
        clock = [10 * MINUTE]
        log = MemoryLog()
        cfg = GroupConfig(offsets_retention_minutes=60)
        m = serving_manager(log, cfg, clock=clock)
        await m.commit_offsets("g", -1, "", commit(("t", 0, 5)))
        clock[0] += 30 * MINUTE
        await m.commit_offsets("g", -1, "", commit(("t", 1, 6)))
        await m.expire(10 * MINUTE + 60 * MINUTE - 1)
        assert await offsets(m) == {("t", 0): 5, ("t", 1): 6}
        await m.expire(10 * MINUTE + 60 * MINUTE)
        assert await offsets(m) == {("t", 1): 6}
        await m.expire(40 * MINUTE + 60 * MINUTE)
        assert await offsets(m) == {}
        assert "g" not in {g.group_id for g in await m.list_groups()}
        assert log.records()[-1] == (records.group_key("g"), None)
        fresh = replayed(log)
        assert await fresh.list_groups() == []

    run(scenario)


def test_expiry_of_an_empty_consumer_group_counts_from_when_it_became_empty() -> None:
    async def scenario() -> None:
        clock = [0]
        cfg = GroupConfig(
            offsets_retention_minutes=60,
            group_min_session_timeout_ms=10,
            group_initial_rebalance_delay_ms=0,
        )
        m = serving_manager(MemoryLog(), cfg, clock=clock)
        a = await join(m)
        await m.sync_group("g", 1, a.member_id, assignments={})
        await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 5)))
        await m.expire(10 * 60 * MINUTE)  # active group subscribed to... unknown topics: kept
        assert await offsets(m) == {("t", 0): 5}
        clock[0] = 100 * MINUTE
        await m.leave_group("g", [LeaveMember(a.member_id)])
        await asyncio.sleep(0.01)
        await m.expire(100 * MINUTE + 60 * MINUTE - 1)
        assert await offsets(m) == {("t", 0): 5}
        await m.expire(100 * MINUTE + 60 * MINUTE)
        assert await offsets(m) == {}
        assert await m.list_groups() == []

    run(scenario)


def test_active_consumer_group_expires_offsets_of_unsubscribed_topics() -> None:
    async def scenario() -> None:
        clock = [0]
        cfg = GroupConfig(
            offsets_retention_minutes=1,
            group_min_session_timeout_ms=10,
            group_initial_rebalance_delay_ms=0,
        )
        m = serving_manager(MemoryLog(), cfg, clock=clock)
        sub = encode_subscription(Subscription(topics=["t"]))
        a = await join(m, protocols=(("range", sub),), session_ms=60_000)
        await m.sync_group("g", 1, a.member_id, assignments={})
        await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 1), ("old", 0, 2)))
        await m.expire(5 * MINUTE)
        assert await offsets(m) == {("t", 0): 1}

    run(scenario)


@pytest.mark.parametrize("attempt", ["expire", "delete"])
def test_failed_removal_keeps_when_the_group_became_empty(attempt: str) -> None:
    """A tombstone write that fails leaves the Empty group as it was: its offsets still expire
    counting from when it became empty, not from the failed attempt."""

    async def scenario() -> None:
        clock = [0]
        log = MemoryLog()
        cfg = GroupConfig(
            offsets_retention_minutes=60,
            group_min_session_timeout_ms=10,
            group_initial_rebalance_delay_ms=0,
        )
        m = serving_manager(log, cfg, clock=clock)
        a = await join(m)
        await m.sync_group("g", 1, a.member_id, assignments={})
        await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 5)))
        await m.leave_group("g", [LeaveMember(a.member_id)])
        await asyncio.sleep(0.01)  # Empty since 0
        clock[0] = 30 * MINUTE
        log.fail_with = NotEnoughReplicasError("isr")
        if attempt == "expire":
            await m.expire(60 * MINUTE)
        else:
            [r] = await m.delete_groups(["g"])
            assert isinstance(r.error, CoordinatorNotAvailableError)
        [d] = await m.describe_groups(["g"])
        assert d.state == "Empty"
        log.fail_with = None
        await m.expire(60 * MINUTE + 1)
        assert await offsets(m) == {}
        assert await m.list_groups() == []

    run(scenario)


def test_delete_groups_racing_a_commit_deletes_the_commit_too() -> None:
    """A commit in flight when DeleteGroups arrives is written before the group's tombstones and
    deleted with it: the live coordinator and one that replays the log agree."""

    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        await m.commit_offsets("g", -1, "", commit(("t", 0, 5)))
        release = log.hold_next()
        committing = start(m.commit_offsets("g", -1, "", commit(("t", 1, 9))))
        await asyncio.sleep(0.01)
        deleting = start(m.delete_groups(["g"]))
        await asyncio.sleep(0.01)
        assert not deleting.done()  # waits for the commit admitted before it
        with pytest.raises(CoordinatorNotAvailableError):
            await m.commit_offsets("g", -1, "", commit(("t", 2, 1)))
        release.set()
        [committed] = await committing
        assert committed.error is None
        [deleted] = await deleting
        assert deleted.error is None
        assert await offsets(m) == {}
        assert await m.list_groups() == []
        fresh = replayed(log)
        assert await offsets(fresh) == {}
        assert await fresh.list_groups() == []

    run(scenario)


def test_a_failed_expiry_leaves_a_group_being_deleted_dead() -> None:
    """Expiry's failed tombstone write does not turn a group DeleteGroups made Dead meanwhile
    back to Empty (it would admit commits that vanish with the deletion)."""

    async def scenario() -> None:
        clock = [0]
        log = MemoryLog()
        m = serving_manager(log, GroupConfig(offsets_retention_minutes=60), clock=clock)
        await m.commit_offsets("g", -1, "", commit(("t", 0, 5)))
        clock[0] = 30 * MINUTE
        await m.commit_offsets("g", -1, "", commit(("t", 1, 6)))
        fail_expiry = log.hold_next(NotEnoughReplicasError("isr"))
        release_delete = log.hold_next()
        expiring = start(m.expire(60 * MINUTE))  # expires t-0 only: the group stays
        await asyncio.sleep(0.01)
        deleting = start(m.delete_groups(["g"]))
        await asyncio.sleep(0.01)
        fail_expiry.set()
        await expiring
        [d] = await m.describe_groups(["g"])
        assert d.state == "Dead"
        with pytest.raises(CoordinatorNotAvailableError):
            await m.commit_offsets("g", -1, "", commit(("t", 2, 1)))
        release_delete.set()
        [deleted] = await deleting
        assert deleted.error is None
        assert await m.list_groups() == []
        assert await replayed(log).list_groups() == []

    run(scenario)


def test_delete_groups_waits_for_the_record_of_a_group_that_became_empty() -> None:
    """The record written when the last member left lands before the deletion's tombstones,
    not after them (where a coordinator replaying the log would bring the group back)."""

    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        a = await join(m)
        await m.sync_group("g", 1, a.member_id, assignments={})
        await m.commit_offsets("g", 1, a.member_id, commit(("t", 0, 5)))
        release = log.hold_next()  # the Empty group's record
        await m.leave_group("g", [LeaveMember(a.member_id)])
        await asyncio.sleep(0.01)
        [d] = await m.describe_groups(["g"])
        assert d.state == "Empty"
        deleting = start(m.delete_groups(["g"]))
        await asyncio.sleep(0.01)
        assert not deleting.done()
        release.set()
        [deleted] = await deleting
        assert deleted.error is None
        assert await m.list_groups() == []
        assert log.records()[-1] == (records.group_key("g"), None)
        fresh = replayed(log)
        assert await fresh.list_groups() == []
        assert await offsets(fresh) == {}

    run(scenario)
