"""The classic group protocol state machine: join, sync, heartbeat, leave, static members."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from group_unitkit import (
    FAST,
    MemoryLog,
    RecordingStats,
    join,
    member_id,
    request,
    serving_manager,
    settle,
    start,
)

from strom.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from strom_coordinator.group import records
from strom_coordinator.group.api import LeaveMember
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.manager import GroupManager
from strom_coordinator.partitions.hosting import java_string_hash


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


async def stable_pair(m: GroupManager, **kw: Any) -> tuple[str, str]:
    """Two members a (leader) and b in a Stable generation 2."""
    a = await join(m, **kw)
    await m.sync_group("g", a.generation_id, a.member_id, assignments={a.member_id: b"A"})
    b_id = await member_id(m)
    tb = start(m.join_group(request(member_id=b_id, **kw)))
    ra = await m.join_group(request(member_id=a.member_id, **kw))
    await tb
    tsb = start(m.sync_group("g", ra.generation_id, b_id))
    await m.sync_group(
        "g", ra.generation_id, a.member_id, assignments={a.member_id: b"A2", b_id: b"B2"}
    )
    await tsb
    return a.member_id, b_id


def state(m: GroupManager, group: str = "g") -> str:
    return m._groups[group].state.value


def test_java_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("polygenelubricants") == -(2**31)  # Java's famous MIN_VALUE string
    m = GroupManager(MemoryLog(), FAST)
    m.partition_count = 50
    assert all(0 <= m.partition_for(f"group-{i}") < 50 for i in range(200))


def test_single_member_join_sync_stable() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        stats = RecordingStats()
        m = serving_manager(log, stats=stats)
        first = await m.join_group(request())
        assert first.error is not None and first.error.code_name == "MEMBER_ID_REQUIRED"
        assert first.member_id.startswith("c-")
        r = await m.join_group(request(member_id=first.member_id))
        assert r.error is None
        assert (r.generation_id, r.leader_id, r.protocol_name) == (1, r.member_id, "range")
        assert [(j.member_id, j.metadata) for j in r.members] == [(r.member_id, b"meta-range")]
        assert state(m) == "CompletingRebalance"
        s = await m.sync_group("g", 1, r.member_id, assignments={r.member_id: b"A"})
        assert s.assignment == b"A" and s.protocol_name == "range"
        assert state(m) == "Stable"
        await m.heartbeat("g", 1, r.member_id)
        # The assignment was persisted before anyone got it.
        key, value = log.records()[-1]
        assert records.decode_key(key) == records.GroupKey("g")
        assert value is not None
        stored = records.decode_group_value(value)
        assert stored.generation_id == 1 and stored.members[0].assignment == b"A"
        assert [g for g, _ in stats.rebalances] == ["g"]
        [d] = await m.describe_groups(["g"])
        assert d.state == "Stable" and d.members[0].assignment == b"A"

    run(scenario)


def test_second_member_triggers_rebalance_and_followers_wait_for_leader() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a = await join(m)
        await m.sync_group("g", 1, a.member_id, assignments={a.member_id: b"A"})
        b_id = await member_id(m)
        tb = start(m.join_group(request(member_id=b_id)))
        await settle()
        assert not tb.done() and state(m) == "PreparingRebalance"
        with pytest.raises(RebalanceInProgressError):
            await m.heartbeat("g", 1, a.member_id)
        with pytest.raises(RebalanceInProgressError):
            await m.sync_group("g", 1, a.member_id)
        ra = await m.join_group(request(member_id=a.member_id))
        rb = await tb
        assert ra.generation_id == rb.generation_id == 2
        assert ra.leader_id == rb.leader_id == a.member_id
        assert {j.member_id for j in ra.members} == {a.member_id, b_id}
        assert rb.members == ()
        sb = start(m.sync_group("g", 2, b_id))
        await settle()
        assert not sb.done()
        await m.sync_group("g", 2, a.member_id, assignments={a.member_id: b"x", b_id: b"y"})
        assert (await sb).assignment == b"y"
        assert state(m) == "Stable"

    run(scenario)


def test_protocol_chosen_by_votes_among_common_protocols() -> None:
    async def scenario() -> None:
        cfg = GroupConfig(group_min_session_timeout_ms=10, group_initial_rebalance_delay_ms=50)
        m = serving_manager(config=cfg)
        votes = [
            (("range", b"1"), ("roundrobin", b"1"), ("sticky", b"1")),
            (("roundrobin", b"2"), ("range", b"2")),
            (("roundrobin", b"3"), ("range", b"3"), ("sticky", b"3")),
        ]
        ids = [await member_id(m, protocols=p) for p in votes]
        tasks = [
            start(m.join_group(request(member_id=i, protocols=p)))
            for i, p in zip(ids, votes, strict=True)
        ]
        results = await asyncio.gather(*tasks)
        assert {r.protocol_name for r in results} == {"roundrobin"}
        assert {r.generation_id for r in results} == {1}
        leader = next(r for r in results if r.members)
        assert {j.metadata for j in leader.members} == {b"1", b"2", b"3"}

    run(scenario)


def test_inconsistent_protocols_and_type_are_refused() -> None:
    async def scenario() -> None:
        m = serving_manager()
        await join(m)
        with pytest.raises(InconsistentGroupProtocolError):
            await m.join_group(request(protocols=(("sticky", b""),)))
        with pytest.raises(InconsistentGroupProtocolError):
            await m.join_group(request(protocol_type="connect"))
        with pytest.raises(InconsistentGroupProtocolError):
            await m.join_group(request("other", protocols=()))

    run(scenario)


def test_invalid_session_timeouts_and_group_ids() -> None:
    async def scenario() -> None:
        m = serving_manager()
        for bad in (5, -1, 0, 2**31 - 1):
            with pytest.raises(InvalidSessionTimeoutError):
                await m.join_group(request(session_ms=bad))
        for group in ("", "x" * 5000):
            with pytest.raises(InvalidGroupIdError):
                await m.join_group(request(group))
            with pytest.raises(InvalidGroupIdError):
                await m.heartbeat(group, 1, "m")

    run(scenario)


def test_unknown_member_and_illegal_generation() -> None:
    async def scenario() -> None:
        m = serving_manager()
        with pytest.raises(UnknownMemberIdError):
            await m.join_group(request(member_id="ghost"))
        with pytest.raises(UnknownMemberIdError):
            await m.heartbeat("g", 1, "ghost")
        with pytest.raises(UnknownMemberIdError):
            await m.sync_group("nope", 1, "ghost")
        a = await join(m)
        with pytest.raises(UnknownMemberIdError):
            await m.heartbeat("g", 1, "ghost")
        for generation in (0, 2, -1, 2**31 - 1, -(2**31)):
            with pytest.raises(IllegalGenerationError):
                await m.heartbeat("g", generation, a.member_id)
            with pytest.raises(IllegalGenerationError):
                await m.sync_group("g", generation, a.member_id)
        with pytest.raises(InconsistentGroupProtocolError):
            await m.sync_group("g", 1, a.member_id, protocol_name="sticky")

    run(scenario)


def test_routing_errors() -> None:
    async def scenario() -> None:
        m = GroupManager(MemoryLog(), FAST)
        with pytest.raises(CoordinatorNotAvailableError):
            await m.join_group(request())
        m.partition_count = 2
        mine = next(g for g in (f"g{i}" for i in range(100)) if m.partition_for(g) == 0)
        other = next(g for g in (f"g{i}" for i in range(100)) if m.partition_for(g) == 1)
        m.begin_loading(0)
        with pytest.raises(CoordinatorLoadInProgressError):
            await m.join_group(request(mine))
        with pytest.raises(CoordinatorLoadInProgressError):
            await m.fetch_offsets(mine)
        m.finish_loading(0)
        assert m.owned_partitions() == {0}
        with pytest.raises(NotCoordinatorError):
            await m.join_group(request(other))
        with pytest.raises(NotCoordinatorError):
            await m.heartbeat(other, 1, "m")
        [d] = await m.describe_groups([other])
        assert isinstance(d.error, NotCoordinatorError)
        [r] = await m.delete_groups([other])
        assert isinstance(r.error, NotCoordinatorError)

    run(scenario)


def test_group_max_size() -> None:
    async def scenario() -> None:
        m = serving_manager(
            config=GroupConfig(
                group_min_session_timeout_ms=10,
                group_initial_rebalance_delay_ms=0,
                group_max_size=1,
            )
        )
        await join(m)
        with pytest.raises(GroupMaxSizeReachedError):
            await m.join_group(request())
        with pytest.raises(GroupMaxSizeReachedError):
            await m.join_group(request(instance="i9"))

    run(scenario)


def test_session_expiry_removes_member_and_rebalances() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a_id, b_id = await stable_pair(m, session_ms=200, rebalance_ms=2000)
        # a keeps heartbeating; b goes silent.
        deadline = time.monotonic() + 2
        while b_id in m._groups["g"].members:
            assert time.monotonic() < deadline
            try:
                await m.heartbeat("g", 2, a_id)
            except RebalanceInProgressError:
                break
            await asyncio.sleep(0.05)
        r = await m.join_group(request(member_id=a_id, session_ms=200, rebalance_ms=2000))
        assert r.generation_id == 3 and [j.member_id for j in r.members] == [a_id]
        with pytest.raises(UnknownMemberIdError):
            await m.heartbeat("g", 3, b_id)

    run(scenario)


def test_last_member_expiry_leaves_group_empty() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        a = await join(m, session_ms=50)
        await m.sync_group("g", 1, a.member_id, assignments={a.member_id: b"A"})
        await asyncio.sleep(0.2)
        await settle()
        assert state(m) == "Empty" and not m._groups["g"].members
        last = records.decode_group_value(log.records()[-1][1] or b"")
        assert last.members == [] and last.generation_id == 2

    run(scenario)


def test_rebalance_timeout_removes_members_that_did_not_rejoin() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a_id, b_id = await stable_pair(m, session_ms=10_000, rebalance_ms=100)
        c_id = await member_id(m, rebalance_ms=100)
        tc = start(m.join_group(request(member_id=c_id, rebalance_ms=100)))
        ta = start(m.join_group(request(member_id=a_id, session_ms=10_000, rebalance_ms=100)))
        started = time.monotonic()
        ra, rc = await ta, await tc
        assert time.monotonic() - started >= 0.05
        assert ra.generation_id == rc.generation_id == 3
        assert {j.member_id for j in ra.members} == {a_id, c_id}
        with pytest.raises(UnknownMemberIdError):
            await m.heartbeat("g", 3, b_id)

    run(scenario)


def test_initial_rebalance_delay_gathers_members() -> None:
    async def scenario() -> None:
        cfg = GroupConfig(group_min_session_timeout_ms=10, group_initial_rebalance_delay_ms=100)
        m = serving_manager(config=cfg)
        a_id = await member_id(m)
        started = time.monotonic()
        ta = start(m.join_group(request(member_id=a_id, rebalance_ms=5000)))
        await asyncio.sleep(0.05)
        assert state(m) == "PreparingRebalance" and not ta.done()
        b_id = await member_id(m)
        tb = start(m.join_group(request(member_id=b_id, rebalance_ms=5000)))
        ra, rb = await ta, await tb
        # b joined during the delay, so it was extended once more: two delays at least.
        assert time.monotonic() - started >= 0.19
        assert ra.generation_id == rb.generation_id == 1
        assert len(ra.members or rb.members) == 2

    run(scenario)


def test_initial_delay_is_capped_by_the_rebalance_timeout() -> None:
    async def scenario() -> None:
        cfg = GroupConfig(group_min_session_timeout_ms=10, group_initial_rebalance_delay_ms=100)
        m = serving_manager(config=cfg)
        a_id = await member_id(m)
        started = time.monotonic()
        ta = start(m.join_group(request(member_id=a_id, rebalance_ms=100)))
        await asyncio.sleep(0.05)
        b_id = await member_id(m)
        tb = start(m.join_group(request(member_id=b_id, rebalance_ms=100)))
        await asyncio.gather(ta, tb)
        # remaining budget was 0: no extension despite b joining.
        assert 0.09 <= time.monotonic() - started < 0.19

    run(scenario)


def test_leave_group_removes_at_once_with_per_member_results() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a_id, b_id = await stable_pair(m)
        results = await m.leave_group("g", [LeaveMember(b_id), LeaveMember("ghost")])
        assert results[0].error is None
        assert isinstance(results[1].error, UnknownMemberIdError)
        with pytest.raises(RebalanceInProgressError):
            await m.heartbeat("g", 2, a_id)
        r = await m.join_group(request(member_id=a_id))
        assert r.generation_id == 3 and len(r.members) == 1
        [missing] = await m.leave_group("nope", [LeaveMember("x")])
        assert isinstance(missing.error, UnknownMemberIdError)

    run(scenario)


def test_leaving_member_fails_its_pending_join() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a_id, b_id = await stable_pair(m)
        tb = start(m.join_group(request(member_id=b_id, protocols=(("range", b"new"),))))
        await settle()
        assert state(m) == "PreparingRebalance"
        await m.leave_group("g", [LeaveMember(b_id)])
        ra = await m.join_group(request(member_id=a_id))
        assert ra.generation_id == 3
        with pytest.raises(UnknownMemberIdError):
            await tb

    run(scenario)


def test_static_member_rejoin_gets_assignment_back_without_rebalance() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        a_id, b_id = await stable_pair(m, instance=None)
        ts = start(join(m, instance="i1"))  # a static member joins: gen 3
        await settle()
        ta = start(m.join_group(request(member_id=a_id)))
        tb = start(m.join_group(request(member_id=b_id)))
        old, _, _ = await asyncio.gather(ts, ta, tb)
        assert old.generation_id == 3
        syncs = [start(m.sync_group("g", 3, x)) for x in (old.member_id, b_id)]
        await m.sync_group(
            "g", 3, a_id, assignments={a_id: b"a", b_id: b"b", old.member_id: b"static"}
        )
        await asyncio.gather(*syncs)
        batches = len(log.batches)
        again = await m.join_group(request(instance="i1"))
        assert again.error is None and again.member_id != old.member_id
        assert again.generation_id == 3 and not again.skip_assignment
        assert state(m) == "Stable"
        assert len(log.batches) == batches + 1  # the new member id was persisted
        s2 = await m.sync_group("g", 3, again.member_id, group_instance_id="i1")
        assert s2.assignment == b"static"
        with pytest.raises(FencedInstanceIdError):
            await m.heartbeat("g", 3, old.member_id, "i1")
        with pytest.raises(FencedInstanceIdError):
            await m.join_group(request(member_id=old.member_id, instance="i1"))
        await m.heartbeat("g", 3, a_id)  # nobody else had to rebalance

    run(scenario)


def test_static_leader_rejoin_is_told_to_skip_assignment() -> None:
    async def scenario() -> None:
        m = serving_manager()
        s = await join(m, instance="i1")
        await m.sync_group("g", 1, s.member_id, assignments={s.member_id: b"mine"})
        again = await m.join_group(request(instance="i1"))
        assert again.skip_assignment and again.leader_id == again.member_id
        assert [j.member_id for j in again.members] == [again.member_id]
        assert state(m) == "Stable"

    run(scenario)


def test_static_rejoin_with_new_protocols_rebalances() -> None:
    async def scenario() -> None:
        m = serving_manager()
        s = await join(m, instance="i1")
        await m.sync_group("g", 1, s.member_id, assignments={s.member_id: b"mine"})
        new = (("range", b"other-subscription"),)
        again = await m.join_group(request(instance="i1", protocols=new))
        assert again.generation_id == 2 and again.members[0].metadata == b"other-subscription"
        with pytest.raises(FencedInstanceIdError):
            await m.sync_group("g", 2, s.member_id, group_instance_id="i1")

    run(scenario)


def test_static_member_replace_fails_cleanly_when_the_log_fails() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        s = await join(m, instance="i1")
        await m.sync_group("g", 1, s.member_id, assignments={s.member_id: b"mine"})
        log.fail_with = NotCoordinatorError("fenced")
        with pytest.raises(NotCoordinatorError):
            await m.join_group(request(instance="i1"))
        log.fail_with = None
        await m.heartbeat("g", 1, s.member_id, "i1")  # the old id is still the member

    run(scenario)


def test_static_member_session_expiry_removes_it() -> None:
    async def scenario() -> None:
        m = serving_manager()
        s = await join(m, instance="i1", session_ms=50)
        await m.sync_group("g", 1, s.member_id, assignments={})
        await asyncio.sleep(0.2)
        assert state(m) == "Empty" and not m._groups["g"].static_members

    run(scenario)


def test_failed_assignment_store_makes_everyone_rejoin() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = serving_manager(log)
        a = await join(m)
        log.fail_with = NotEnoughReplicasError("2 of 3 replicas")
        with pytest.raises(CoordinatorNotAvailableError):
            await m.sync_group("g", 1, a.member_id, assignments={a.member_id: b"A"})
        assert state(m) == "PreparingRebalance"
        log.fail_with = None
        r = await m.join_group(request(member_id=a.member_id))
        assert r.generation_id == 2

    run(scenario)


def test_unload_answers_pending_joins_not_coordinator() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a_id, b_id = await stable_pair(m)
        tb = start(m.join_group(request(member_id=b_id, protocols=(("range", b"new"),))))
        await settle()
        m.unload(0)
        with pytest.raises(NotCoordinatorError):
            await tb
        with pytest.raises(NotCoordinatorError):
            await m.heartbeat("g", 2, a_id)
        assert m.owned_partitions() == set()
        assert m.group_counts_by_state()["Stable"] == 0

    run(scenario)


def test_list_and_describe_groups() -> None:
    async def scenario() -> None:
        m = serving_manager()
        await stable_pair(m)
        await join(m, "h")
        listed = {(g.group_id, g.state) for g in await m.list_groups()}
        assert listed == {("g", "Stable"), ("h", "CompletingRebalance")}
        assert [g.group_id for g in await m.list_groups(["stable"])] == ["g"]
        d_unknown, d_h = await m.describe_groups(["unknown", "h"])
        assert d_unknown.state == "Dead" and d_unknown.error is None
        assert d_h.state == "CompletingRebalance" and d_h.protocol_name == ""
        assert d_h.members[0].metadata == b""
        assert m.group_counts_by_state() == {
            "Empty": 0,
            "PreparingRebalance": 0,
            "CompletingRebalance": 1,
            "Stable": 1,
            "Dead": 0,
        }

    run(scenario)


def test_heartbeat_between_join_and_sync_is_fine() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a = await join(m)
        assert state(m) == "CompletingRebalance"
        await m.heartbeat("g", 1, a.member_id)

    run(scenario)


def test_leader_leaving_before_sync_sends_followers_back_to_join() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a_id, b_id = await stable_pair(m)
        ta = start(m.join_group(request(member_id=a_id)))
        tb = start(m.join_group(request(member_id=b_id)))
        await asyncio.gather(ta, tb)
        sb = start(m.sync_group("g", 3, b_id))
        await settle()
        await m.leave_group("g", [LeaveMember(a_id)])
        with pytest.raises(RebalanceInProgressError):
            await sb
        r = await m.join_group(request(member_id=b_id))
        assert r.leader_id == b_id and r.generation_id == 4

    run(scenario)


def test_reserved_member_id_expires_when_never_used() -> None:
    async def scenario() -> None:
        m = serving_manager()
        a = await join(m)
        await m.sync_group("g", 1, a.member_id, assignments={})
        await member_id(m, session_ms=50)  # reserved, never used
        assert m._groups["g"].pending_members
        await asyncio.sleep(0.15)
        assert not m._groups["g"].pending_members
        with pytest.raises(UnknownMemberIdError):
            await m.join_group(request(member_id="c-never-issued"))

    run(scenario)
