"""Consumer groups end to end: ``strom.Consumer`` members against real coordinators.

Every wait polls (``poll_until`` / ``wait_until``), never sleeps. Sessions are short (the
coordinators accept 500 ms) so that failures are detected in seconds.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, defaultdict

import pytest
from cluster_testkit import LocalCluster
from membership_testkit import (
    Listener,
    MemberProcess,
    consumer,
    create_topic,
    membership,
    poll_until,
    produce,
)
from strom_testkit import wait_until

from strom import Consumer, OffsetAndMetadata, TopicPartition
from strom.aio import Consumer as AioConsumer
from strom.types import ConsumerRecord

pytestmark = pytest.mark.integration


def partitions(topic: str, count: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(count)}


def close_all(*consumers: Consumer) -> None:
    for c in consumers:
        c.close()


def test_three_consumers_on_six_partitions_get_two_each_and_read_nothing_twice(
    groups_cluster: LocalCluster,
) -> None:
    topic, group = "share", "g-share"
    create_topic(groups_cluster, topic, 6)
    listeners = [Listener() for _ in range(3)]
    members = [consumer(groups_cluster, group) for _ in range(3)]
    try:
        for c, listener in zip(members, listeners, strict=True):
            c.subscribe([topic], listener=listener)

        def balanced() -> bool:
            owned = [c.assignment() for c in members]
            return [len(o) for o in owned] == [2, 2, 2] and set().union(*owned) == partitions(
                topic, 6
            )

        poll_until(members, balanced, 60, "2 partitions per member")
        produce(groups_cluster, topic, 6, 100)
        read: dict[int, list[ConsumerRecord]] = defaultdict(list)

        def step() -> bool:
            for i, c in enumerate(members):
                for records in c.poll(timeout_ms=50).values():
                    read[i].extend(records)
            return sum(len(rs) for rs in read.values()) >= 600

        wait_until(step, 60, "600 records", interval_s=0.0)
        keys = [(r.partition, r.offset) for rs in read.values() for r in rs]
        assert len(keys) == len(set(keys)) == 600
        for i, c in enumerate(members):
            assert {TopicPartition(topic, r.partition) for r in read[i]} <= c.assignment()
        # The listener runs in the thread that polls, never in the heartbeat task.
        assert all(listener.threads == {threading.current_thread()} for listener in listeners)
    finally:
        close_all(*members)


def test_a_killed_member_s_partitions_move_within_the_session_timeout(
    groups_cluster: LocalCluster,
) -> None:
    topic, group, session_ms = "kill", "g-kill", 3000
    create_topic(groups_cluster, topic, 6)
    member = MemberProcess(groups_cluster, group, topic, "--session-timeout-ms", str(session_ms))
    a = consumer(groups_cluster, group, session_timeout_ms=session_ms)
    b = consumer(groups_cluster, group, session_timeout_ms=session_ms)
    try:
        a.subscribe([topic])
        b.subscribe([topic])

        def three_way() -> bool:
            other = member.assignment() or set()
            return (len(a.assignment()), len(b.assignment()), len(other)) == (2, 2, 2)

        poll_until([a, b], three_way, 60, "three members with 2 partitions each")
        member.kill()  # SIGKILL: it cannot leave; only its session timing out frees its share
        killed_at = time.monotonic()
        poll_until(
            [a, b],
            lambda: a.assignment() | b.assignment() == partitions(topic, 6),
            session_ms / 1000 + 20,
            "the survivors own every partition",
        )
        assert len(a.assignment()) == len(b.assignment()) == 3
        assert time.monotonic() - killed_at >= session_ms / 1000 * 0.5  # it was the session
    finally:
        member.stop()
        close_all(a, b)


def test_at_least_once_across_a_crash_with_commits_after_processing(
    groups_cluster: LocalCluster,
) -> None:
    topic, group = "alo", "g-alo"
    create_topic(groups_cluster, topic, 3)
    produce(groups_cluster, topic, 3, 300)
    member = MemberProcess(
        groups_cluster,
        group,
        topic,
        "--commit-after-processing",
        "--max-records",
        "20",
        "--session-timeout-ms",
        "2000",
    )
    try:
        wait_until(
            lambda: sum(len(e.get("processed", ())) for e in member.snapshot()) >= 300,
            60,
            "the first member processed 300 records",
        )
        member.kill()  # between processing and committing, or anywhere else
    finally:
        member.stop()
    events = member.snapshot()
    first = [(p, o) for e in events for p, o in e.get("processed", ())]
    committed: dict[int, int] = {}
    for event in events:
        for p, offset in event.get("committed", {}).items():
            committed[int(p)] = offset
    assert committed, "the first member committed nothing"

    second = consumer(groups_cluster, group, enable_auto_commit=False)
    read: list[ConsumerRecord] = []
    try:
        # The dead member may have committed once more after its last "committed" line.
        stored = second.committed(partitions(topic, 3))
        for p in range(3):
            found = stored[TopicPartition(topic, p)]
            at = -1 if found is None else found.offset
            processed = [o for q, o in first if q == p]
            assert committed.get(p, -1) <= at <= max(processed, default=-1) + 1
            if found is not None:
                committed[p] = at
        second.subscribe([topic])
        poll_until(
            [second],
            lambda: (
                {(r.partition, r.offset) for r in read} | set(first)
                >= {(p, o) for p in range(3) for o in range(300)}
            ),
            60,
            "every record read by one member or the other",
            into=read,
        )
        second.commit()
    finally:
        second.close()
    again = [(r.partition, r.offset) for r in read]
    assert len(again) == len(set(again))  # one session never reads a record twice
    # The second member starts exactly at the committed offsets...
    starts = {p: min(o for q, o in again if q == p) for p in {q for q, _ in again}}
    for p, start in starts.items():
        assert start == committed.get(p, 0), (p, start, committed)
    # ...so a record read by both is one the first member processed but had not committed.
    for p, offset in set(first) & set(again):
        assert offset >= committed.get(p, 0)


def test_cooperative_sticky_moves_only_the_partitions_a_new_member_needs(
    groups_cluster: LocalCluster,
) -> None:
    topic, group = "coop", "g-coop"
    create_topic(groups_cluster, topic, 6)
    options = {"partition_assignment_strategy": ["cooperative-sticky"]}
    la, lb, lc = Listener(), Listener(), Listener()
    a = consumer(groups_cluster, group, **options)
    b = consumer(groups_cluster, group, **options)
    c = consumer(groups_cluster, group, **options)
    try:
        a.subscribe([topic], listener=la)
        b.subscribe([topic], listener=lb)
        poll_until(
            [a, b], lambda: len(a.assignment()) == len(b.assignment()) == 3, 60, "3 partitions each"
        )
        before_a, before_b = a.assignment(), b.assignment()
        la.calls.clear()
        lb.calls.clear()
        produce(groups_cluster, topic, 6, 50)
        read: list[ConsumerRecord] = []
        c.subscribe([topic], listener=lc)
        poll_until(
            [a, b, c],
            lambda: [len(x.assignment()) for x in (a, b, c)] == [2, 2, 2],
            60,
            "2 partitions each after the third member joined",
            into=read,
        )
        moved = (before_a - a.assignment()) | (before_b - b.assignment())
        assert moved == c.assignment() and len(moved) == 2
        for listener, before, after in (
            (la, before_a, a.assignment()),
            (lb, before_b, b.assignment()),
        ):
            revoked = listener.of("revoked")
            # Only what moved was revoked, never the partitions the member kept...
            assert set().union(*revoked) == before - after and len(before - after) == 1
            assert not listener.of("lost")
            # ...and nothing was assigned to it anew (cooperative: only added partitions).
            assert set().union(*listener.of("assigned")) == set()
        assert set().union(*lc.of("assigned")) == c.assignment()
        # The kept partitions were read on, from where they were: no record twice.
        produce(groups_cluster, topic, 6, 50)
        poll_until(
            [a, b, c], lambda: len(read) >= 600, 60, "every record of both rounds", into=read
        )
        kept = (before_a & a.assignment()) | (before_b & b.assignment())
        counts = Counter((r.partition, r.offset) for r in read)
        assert all(counts[(tp.partition, o)] == 1 for tp in kept for o in range(100))
        assert {(r.partition, r.offset) for r in read} == {
            (p, o) for p in range(6) for o in range(100)
        }
    finally:
        close_all(a, b, c)


def test_a_static_member_restarting_within_its_session_gets_its_partitions_back(
    groups_cluster: LocalCluster,
) -> None:
    topic, group, session_ms = "static", "g-static", 20000
    create_topic(groups_cluster, topic, 4)
    options = {"session_timeout_ms": session_ms, "heartbeat_interval_ms": 500}
    members = {
        name: consumer(groups_cluster, group, group_instance_id=name, **options)
        for name in ("s1", "s2")
    }
    listeners = {name: Listener() for name in members}
    for name, c in members.items():
        c.subscribe([topic], listener=listeners[name])
    restarted: Consumer | None = None
    try:
        poll_until(
            members.values(),
            lambda: [len(c.assignment()) for c in members.values()] == [2, 2],
            60,
            "2 partitions each",
        )
        # Restart the follower (a restarted leader may have to compute the assignment again).
        leaving = next(n for n, c in members.items() if not membership(c).leader)
        staying = next(n for n in members if n != leaving)
        generation = membership(members[staying]).generation
        owned = members[leaving].assignment()
        listeners[staying].calls.clear()
        started = time.monotonic()
        members[leaving].close()  # a static member does not send LeaveGroup
        restarted = consumer(groups_cluster, group, group_instance_id=leaving, **options)
        restarted.subscribe([topic])
        poll_until(
            [restarted, members[staying]],
            lambda: restarted.assignment() == owned,
            session_ms / 1000,
            "the restarted static member owns its partitions again",
        )
        assert time.monotonic() - started < session_ms / 1000
        assert membership(restarted).generation == generation
        assert membership(members[staying]).generation == generation
        assert listeners[staying].calls == []  # the other member saw no rebalance
    finally:
        close_all(*members.values(), *([restarted] if restarted else []))


def test_close_leaves_the_group_at_once(groups_cluster: LocalCluster) -> None:
    topic, group, session_ms = "leave", "g-leave", 60000
    create_topic(groups_cluster, topic, 6)
    a = consumer(groups_cluster, group, session_timeout_ms=session_ms)
    b = consumer(groups_cluster, group, session_timeout_ms=session_ms)
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 3, 60, "3 each")
        a.close()  # LeaveGroup: b need not wait for a's 60 s session to expire
        poll_until(
            [b], lambda: b.assignment() == partitions(topic, 6), 20, "b owns every partition"
        )
    finally:
        close_all(a, b)


def test_new_partitions_and_pattern_matches_trigger_a_rebalance(
    groups_cluster: LocalCluster,
) -> None:
    group = "g-pattern"
    create_topic(groups_cluster, "pat-a", 2)
    options = {"metadata_max_age_ms": 300}
    a = consumer(groups_cluster, group, **options)
    b = consumer(groups_cluster, group, **options)
    try:
        a.subscribe(pattern=r"pat-.*")
        b.subscribe(pattern=r"pat-.*")
        poll_until([a, b], lambda: a.assignment() | b.assignment() == partitions("pat-a", 2), 60)
        create_topic(groups_cluster, "pat-b", 2)  # a new match: each member sees it and rejoins
        wanted = partitions("pat-a", 2) | partitions("pat-b", 2)
        poll_until([a, b], lambda: a.assignment() | b.assignment() == wanted, 30, "pat-b")
        with groups_cluster.admin() as admin:
            admin.create_partitions({"pat-a": 4})  # the leader sees the new count and rejoins
        wanted |= partitions("pat-a", 4)
        poll_until(
            [a, b],
            lambda: (
                a.assignment() | b.assignment() == wanted and not a.assignment() & b.assignment()
            ),
            30,
            "pat-a's new partitions",
        )
    finally:
        close_all(a, b)


def test_a_member_that_stops_polling_leaves_and_rejoins_at_its_next_poll(
    groups_cluster: LocalCluster,
) -> None:
    topic, group = "slowpoll", "g-slowpoll"
    create_topic(groups_cluster, topic, 4)
    la = Listener()
    a = consumer(groups_cluster, group, max_poll_interval_ms=1500)
    b = consumer(groups_cluster, group)
    try:
        a.subscribe([topic], listener=la)
        b.subscribe([topic])
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2, 60, "2 each")
        owned = a.assignment()
        # Only b polls: past max_poll_interval_ms a's heartbeat task leaves the group.
        poll_until([b], lambda: b.assignment() == partitions(topic, 4), 30, "b owns everything")
        assert la.of("lost") == []  # told at the next poll, in the polling thread
        poll_until([a, b], lambda: la.of("lost") == [owned], 30, "a's partitions were lost")
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2, 30, "again")
    finally:
        close_all(a, b)


def test_auto_commit_before_revocation_and_commit_async(groups_cluster: LocalCluster) -> None:
    topic, group = "auto", "g-auto"
    create_topic(groups_cluster, topic, 2)
    produce(groups_cluster, topic, 2, 50)
    tps = partitions(topic, 2)
    # No periodic commit in this test: only the rebalance's and close's.
    a = consumer(groups_cluster, group, auto_commit_interval_ms=600000)
    b = consumer(groups_cluster, group, auto_commit_interval_ms=600000)
    read: list[ConsumerRecord] = []
    try:
        a.subscribe([topic])
        poll_until([a], lambda: len(read) >= 100, 60, "a read everything", into=read)
        assert b.committed(tps) == dict.fromkeys(tps)  # nothing committed yet
        b.subscribe([topic])
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 1, 60, "1 each")
        # a committed its positions before revoking: b starts where a stopped.
        assert b.committed(tps) == dict.fromkeys(tps, OffsetAndMetadata(50))
        (mine,) = b.assignment()
        assert b.position(mine) == 50
        done: list[tuple[object, Exception | None]] = []
        (theirs,) = a.assignment()
        future = a.commit_async({theirs: 40}, lambda offsets, exc: done.append((offsets, exc)))
        future.result(15)
        wait_until(lambda: done, 10, "the commit callback")
        assert done == [({theirs: OffsetAndMetadata(40)}, None)]
        assert a.committed(theirs) == OffsetAndMetadata(40)
        a.close()  # auto-commit on close: the position again
        assert b.committed(theirs) == OffsetAndMetadata(50)
    finally:
        close_all(a, b)


def test_unsubscribe_leaves_and_subscribe_rejoins(groups_cluster: LocalCluster) -> None:
    topic, group = "unsub", "g-unsub"
    create_topic(groups_cluster, topic, 4)
    a = consumer(groups_cluster, group, session_timeout_ms=60000)
    b = consumer(groups_cluster, group, session_timeout_ms=60000)
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2, 60, "2 each")
        a.unsubscribe()
        assert a.assignment() == set()
        poll_until([b], lambda: len(b.assignment()) == 4, 20, "b owns everything")
        a.subscribe([topic])
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2, 30, "again")
    finally:
        close_all(a, b)


def test_asyncio_members_with_an_async_listener(groups_cluster: LocalCluster) -> None:
    topic, group = "aio", "g-aio"
    create_topic(groups_cluster, topic, 4)
    produce(groups_cluster, topic, 4, 25)

    class AsyncListener:
        def __init__(self) -> None:
            self.assigned: set[TopicPartition] = set()

        async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            self.assigned |= partitions

        async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            self.assigned -= partitions

    async def main() -> tuple[list[set[TopicPartition]], list[ConsumerRecord]]:
        listeners = [AsyncListener(), AsyncListener()]
        options = {"auto_offset_reset": "earliest", "session_timeout_ms": 6000}
        members = [
            AioConsumer(bootstrap_servers=groups_cluster.gateway, group_id=group, **options)  # type: ignore[arg-type]
            for _ in listeners
        ]
        read: list[ConsumerRecord] = []
        try:
            for c, listener in zip(members, listeners, strict=True):
                c.subscribe([topic], listener=listener)
            deadline = time.monotonic() + 60
            while len(read) < 100 or any(len(c.assignment()) != 2 for c in members):
                assert time.monotonic() < deadline, "members did not settle"
                for c in members:
                    for records in (await c.getmany(timeout_ms=50)).values():
                        read.extend(records)
            await members[0].commit()
            return [set(listener.assigned) for listener in listeners], read  # (close revokes)
        finally:
            for c in members:
                await c.close()

    owned, read = asyncio.run(main())
    assert [len(o) for o in owned] == [2, 2] and owned[0] | owned[1] == partitions(topic, 4)
    assert {(r.partition, r.offset) for r in read} == {(p, o) for p in range(4) for o in range(25)}
