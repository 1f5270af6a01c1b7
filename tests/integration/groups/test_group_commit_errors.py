"""Commit errors of group members against a real coordinator: a commit during a rebalance,
after the group went on without the member, with a generation or member id the group does
not know; and the partitions lost afterwards."""

from __future__ import annotations

import pytest
from cluster_testkit import LocalCluster
from membership_testkit import Listener, consumer, create_topic, membership, poll_until
from strom_testkit import wait_until

from strom import TopicPartition
from strom.errors import IllegalGenerationError, RebalanceInProgressError, UnknownMemberIdError

pytestmark = pytest.mark.integration


def test_commit_during_a_rebalance_then_after_the_group_went_on(
    groups_cluster: LocalCluster,
) -> None:
    topic, group = "errs", "g-errs"
    create_topic(groups_cluster, topic, 4)
    # The group waits up to 6 s for every member to rejoin a rebalance.
    options = {"rebalance_timeout_ms": 6000, "enable_auto_commit": False}
    slow_listener = Listener()
    a = consumer(groups_cluster, group, **options)
    slow = consumer(groups_cluster, group, **options)
    b = consumer(groups_cluster, group, **options)
    try:
        a.subscribe([topic])
        slow.subscribe([topic], listener=slow_listener)
        poll_until(
            [a, slow], lambda: len(a.assignment()) == len(slow.assignment()) == 2, 60, "2 each"
        )
        owned_by_slow = slow.assignment()
        # b joins; a rejoins at its next poll, but the rebalance waits for `slow`, which does
        # not poll (its heartbeats go on in the background, so it stays a member meanwhile).
        b.subscribe([topic])
        poll_until([a, b], lambda: membership(a).rebalancing, 30, "a is rejoining")
        with pytest.raises(RebalanceInProgressError, match="rebalancing") as during:
            a.commit({TopicPartition(topic, 0): 0})
        assert during.value.retriable
        # Past the rebalance timeout the group goes on without `slow`...
        poll_until(
            [a, b],
            lambda: len(a.assignment()) == len(b.assignment()) == 2,
            30,
            "a and b share the partitions",
        )
        # ...which learns it from its next heartbeat: its commits fail, not retriable.
        wait_until(lambda: membership(slow).generation < 0, 20, "slow was removed")
        with pytest.raises(IllegalGenerationError, match="commit failed") as after:
            slow.commit({TopicPartition(topic, 0): 0})
        assert not after.value.retriable
        # Its next poll declares its partitions lost (nothing committed) and rejoins.
        poll_until([a, b, slow], lambda: slow_listener.of("lost"), 30, "slow lost its partitions")
        assert slow_listener.of("lost") == [owned_by_slow]
        poll_until(
            [a, b, slow],
            lambda: sorted(len(c.assignment()) for c in (a, b, slow)) == [1, 1, 2],
            60,
            "slow is a member again",
        )
    finally:
        for c in (a, slow, b):
            c.close()


def test_commits_with_a_generation_or_member_id_the_coordinator_does_not_know(
    groups_cluster: LocalCluster,
) -> None:
    topic, group = "errs2", "g-errs2"
    create_topic(groups_cluster, topic, 2)
    tp = TopicPartition(topic, 0)
    listener = Listener()
    # Rare heartbeats: the coordinator's answer to the commit is what resets the member.
    c = consumer(
        groups_cluster,
        group,
        enable_auto_commit=False,
        session_timeout_ms=20000,
        heartbeat_interval_ms=5000,
    )
    try:
        c.subscribe([topic], listener=listener)
        poll_until([c], lambda: len(c.assignment()) == 2, 60, "c owns both partitions")
        c.commit({tp: 1})
        state = membership(c)
        generation = state.generation
        c._call(setattr, state, "generation", generation + 10)
        with pytest.raises(IllegalGenerationError, match="commit failed"):
            c.commit({tp: 2})
        assert (state.generation, c.committed(tp).offset) == (-1, 1)  # type: ignore[union-attr]
        # The next poll: the partitions are lost, then the member rejoins with its member id.
        poll_until([c], lambda: listener.of("lost") and len(c.assignment()) == 2, 30, "rejoined")
        assert state.generation > generation
        c._call(setattr, state, "member_id", "no-such-member")
        with pytest.raises(UnknownMemberIdError, match="commit failed"):
            c.commit({tp: 3})
        assert (state.generation, state.member_id) == (-1, "")
        assert c.committed({tp}) == {tp: c.committed(tp)}
    finally:
        c.close()
