"""The group coordinator's pieces on their own: partition hosting, session timers, the expiry
schedule (no network, no GroupManager)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from strom.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from strom_coordinator.group.expiry import expire_periodically
from strom_coordinator.group.model import Group, Member
from strom_coordinator.group.sessions import SessionTimers
from strom_coordinator.partitions.hosting import HostedPartitions


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


class RecordingState:
    """A PartitionState that records the life cycle calls it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def drop_partition(self, partition: int) -> None:
        self.calls.append(("drop", partition))

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> None:
        self.calls.append(("replay", partition, key, value))

    def partition_loaded(self, partition: int) -> None:
        self.calls.append(("loaded", partition))


def test_hosted_partitions_route_and_drive_the_state() -> None:
    state = RecordingState()
    hosted = HostedPartitions(state, topic="__transaction_state", key_kind="transactional id")
    with pytest.raises(CoordinatorNotAvailableError, match="__transaction_state partition count"):
        hosted.route("tx")
    hosted.partition_count = 3
    p = hosted.partition_for("tx")
    with pytest.raises(NotCoordinatorError, match="does not own transactional id tx"):
        hosted.route("tx")
    hosted.begin_loading(p)
    with pytest.raises(CoordinatorLoadInProgressError, match=f"__transaction_state-{p}"):
        hosted.route("tx")
    hosted.replay(p, b"k", None, 0)
    hosted.finish_loading(p)
    assert hosted.route("tx") == p and hosted.is_served(p)
    assert hosted.owned_partitions() == {p}
    hosted.unload(p)
    assert not hosted.is_served(p) and hosted.owned_partitions() == set()
    assert state.calls == [("drop", p), ("replay", p, b"k", None), ("loaded", p), ("drop", p)]


def test_session_timers_expire_idle_members_only() -> None:
    async def scenario() -> None:
        expired: list[str] = []
        timers = SessionTimers(lambda group, member: expired.append(member.member_id))
        group = Group("g", 0)
        idle, waiting = (
            Member(name, None, "c", "h", 20, 20, "consumer", [("range", b"")])
            for name in ("idle", "waiting")
        )
        group.add(idle)
        group.add(waiting)
        waiting.join_future = asyncio.get_running_loop().create_future()
        timers.restart(group, idle)
        timers.restart(group, waiting)
        await asyncio.sleep(0.1)
        assert expired == ["idle"]  # a member waiting for its JoinGroup answer is kept alive
        assert waiting.session_timer is not None
        waiting.join_future.set_result(None)
        await asyncio.sleep(0.1)
        assert expired == ["idle", "waiting"]
        group.remove("idle")
        group.remove("waiting")

    run(scenario)


def test_expire_periodically_survives_a_failed_round() -> None:
    async def scenario() -> None:
        rounds: list[int] = []
        third = asyncio.Event()

        async def expire(now_ms: int) -> None:
            rounds.append(now_ms)
            if len(rounds) == 3:
                third.set()
            if len(rounds) == 1:
                raise RuntimeError("first round fails")

        task = asyncio.ensure_future(expire_periodically(expire, 0.01, wall_clock_ms=lambda: 7))
        await asyncio.wait_for(third.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert rounds[:3] == [7, 7, 7]

    run(scenario)
