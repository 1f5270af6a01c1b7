"""The rebalance half of the classic group protocol's state machine: the join phase (its
rebalance timeout, the initial rebalance delay of an Empty group), the start of a generation,
the leader's assignment (persisted, then handed to every waiting SyncGroup), member sessions
(``sessions.SessionTimers``) and removal, and storing a group's generation in the
``PartitionLog``. ``membership.Membership`` answers the RPCs (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) and moves groups through these steps; its module docstring has the states.

Safety: one event loop, not thread-safe; timers and methods that do not await are atomic with
respect to other coroutines.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog

from strom.errors import BrokerResponseError, RebalanceInProgressError, UnknownMemberIdError
from strom_coordinator.group import persist
from strom_coordinator.group.api import JoinedMember, JoinResult, SyncResult
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.errors import log_failure
from strom_coordinator.group.model import Group, GroupState, Member
from strom_coordinator.group.sessions import SessionTimers
from strom_coordinator.group.stats import GroupStatsListener, NullStats
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["Rebalancer", "join_result", "new_future", "resolve"]

log = structlog.get_logger(__name__)


def new_future() -> asyncio.Future[Any]:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    # A client that went away never reads its answer; do not warn about it.
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())
    return fut


def resolve(fut: asyncio.Future[Any] | None, value: Any) -> None:
    if fut is None or fut.done():
        return
    if isinstance(value, BaseException):
        fut.set_exception(value)
    else:
        fut.set_result(value)


def join_result(
    group: Group,
    member: Member,
    *,
    with_members: bool = True,
    skip_assignment: bool = False,
) -> JoinResult:
    """The JoinGroup answer of ``member`` for the group's current generation (the member list
    for the leader only)."""
    leader = group.is_leader(member.member_id)
    members = [
        JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
        for m in group.members.values()
    ]
    return JoinResult(
        member_id=member.member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id or "",
        skip_assignment=skip_assignment,
        members=members if leader and with_members else (),
    )


class Rebalancer:
    """Join phases, generations, sessions and the stored generation of the groups in
    ``groups`` (see the module docstring)."""

    def __init__(
        self,
        groups: dict[str, Group],
        log: PartitionLog,
        config: GroupConfig,
        *,
        stats: GroupStatsListener | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._groups = groups
        self._log = log
        self._config = config
        self._stats: GroupStatsListener = stats or NullStats()
        self._now_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        self.sessions = SessionTimers(self._session_expired)
        self._background: set[asyncio.Task[None]] = set()

    # -- rebalancing -------------------------------------------------------------------------

    def maybe_prepare(self, group: Group, reason: str) -> None:
        if group.state in (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare(group, reason)

    def prepare(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._fail_syncs(group, RebalanceInProgressError(f"group rebalancing: {reason}"))
        was_empty = group.state is GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, self._now_ms())
        loop = asyncio.get_running_loop()
        group.rebalance_started = loop.time()
        if group.join_timer is not None:
            group.join_timer.cancel()
        log.info("group_rebalance", group_id=group.group_id, reason=reason)
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        if was_empty:
            delay = self._config.group_initial_rebalance_delay_ms
            group.initial_delay_remaining_ms = max(timeout - delay, 0)
            group.new_member_added = False
            group.join_timer = loop.call_later(delay / 1000, self._on_initial_delay, group)
        else:
            group.join_timer = loop.call_later(timeout / 1000, self._complete_join, group)

    def _on_initial_delay(self, group: Group) -> None:
        group.join_timer = None
        remaining = group.initial_delay_remaining_ms or 0
        if group.new_member_added and remaining > 0:
            delay = min(self._config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = max(remaining - delay, 0)
            group.new_member_added = False
            loop = asyncio.get_running_loop()
            group.join_timer = loop.call_later(delay / 1000, self._on_initial_delay, group)
            return
        self._complete_join(group)

    def maybe_complete_join(self, group: Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.initial_delay_remaining_ms is None
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: drop members that did not rejoin, start the next generation."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay_remaining_ms = None
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            log.info(
                "group_member_removed",
                group_id=group.group_id,
                member_id=member.member_id,
                reason="did not rejoin in time",
            )
            self._remove(group, member)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, self._now_ms())
            self._rebalanced(group)
            self._store_in_background(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, self._now_ms())
        for member in group.members.values():
            resolve(member.join_future, join_result(group, member))
            member.join_future = None
            self.sessions.restart(group, member)

    async def complete_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        """Persist the leader's assignment, then answer every waiting SyncGroup."""
        generation = group.generation_id
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        error: BrokerResponseError | None = None
        try:
            await self.store_group(group)
        except Exception as e:
            error = log_failure(e, commit=False)
        if (
            self._groups.get(group.group_id) is not group
            or group.state is not GroupState.COMPLETING_REBALANCE
            or group.generation_id != generation
        ):
            return
        if error is not None:
            self._fail_syncs(group, error)
            self.prepare(group, f"storing the assignment failed: {error}")
            return
        group.transition(GroupState.STABLE, self._now_ms())
        for member in group.members.values():
            result = SyncResult(group.protocol_type, group.protocol_name, member.assignment)
            resolve(member.sync_future, result)
            member.sync_future = None
        self._rebalanced(group)

    def _rebalanced(self, group: Group) -> None:
        duration = asyncio.get_running_loop().time() - group.rebalance_started
        self._stats.on_rebalance(group.group_id, duration)

    def _fail_syncs(self, group: Group, error: BrokerResponseError) -> None:
        for member in group.members.values():
            member.assignment = b""
            resolve(member.sync_future, error)
            member.sync_future = None

    # -- sessions and removal ----------------------------------------------------------------

    def _session_expired(self, group: Group, member: Member) -> None:
        log.info(
            "group_member_removed",
            group_id=group.group_id,
            member_id=member.member_id,
            reason="session timeout",
        )
        self.remove_and_rebalance(group, member, f"member {member.member_id} session expired")

    def _remove(self, group: Group, member: Member) -> None:
        group.remove(member.member_id)
        gone = UnknownMemberIdError(f"member {member.member_id} was removed from the group")
        resolve(member.join_future, gone)
        resolve(member.sync_future, gone)

    def remove_and_rebalance(self, group: Group, member: Member, reason: str) -> None:
        self._remove(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare(group, reason)
        else:
            self.maybe_complete_join(group)

    def drop_pending(self, group: Group, member_id: str) -> None:
        handle = group.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()
        self.maybe_complete_join(group)

    # -- storing -----------------------------------------------------------------------------

    async def store_group(self, group: Group) -> None:
        await self._log.append(group.partition, [persist.group_record(group)])

    def _store_in_background(self, group: Group) -> None:
        """Record that a group became Empty (nobody waits for it; a failure is only logged).
        Counted as a write of the group from now on, so that a DeleteGroups arriving before
        the append was called waits for it instead of being overwritten by it."""

        async def store() -> None:
            try:
                await self.store_group(group)
            except Exception as e:
                log.warning("group_store_failed", group_id=group.group_id, error=str(e))

        def stored(task: asyncio.Task[None]) -> None:
            self._background.discard(task)
            group.pending_commits -= 1

        group.pending_commits += 1
        task = asyncio.get_running_loop().create_task(store())
        self._background.add(task)
        task.add_done_callback(stored)
