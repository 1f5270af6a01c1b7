"""The membership and rebalance state machine of Kafka's classic consumer-group protocol.

JoinGroup, SyncGroup, Heartbeat and LeaveGroup; generations, the leader and its assignment;
static members (``group.instance.id``: a rejoining instance takes its old member over and
fences the old id); members waiting for a member id; the join phase's rebalance timeout and the
initial rebalance delay of an Empty group. Member sessions are ``sessions.SessionTimers``.

States (Kafka's): Empty -> PreparingRebalance (join phase: every known member must rejoin within
the rebalance timeout) -> CompletingRebalance (new generation; the leader computes the
assignment and sends it with SyncGroup) -> Stable. A join, leave, session expiry or protocol
change sends the group back to PreparingRebalance; Dead is a group being deleted.

Membership lives in memory; what must survive a failover (each generation with its assignment,
a group becoming Empty) is written to the ``PartitionLog`` first and only then answered. The
caller (``manager.GroupManager``) has routed every request to a served partition.

Safety: one event loop, not thread-safe. Methods that do not await are atomic with respect to
other coroutines; after every await (a log append) the group may have been unloaded, deleted or
moved to a new generation, so the code checks ``groups.get(id) is group`` and the generation
before it changes anything.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from strom_coordinator.group import persist
from strom_coordinator.group.api import (
    JoinedMember,
    JoinRequest,
    JoinResult,
    LeaveMember,
    LeaveResult,
    SyncResult,
)
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.errors import check_id, log_failure
from strom_coordinator.group.model import Group, GroupState, Member
from strom_coordinator.group.sessions import SessionTimers
from strom_coordinator.group.stats import GroupStatsListener, NullStats
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["Membership"]

log = structlog.get_logger(__name__)

_JoinOutcome = JoinResult | asyncio.Future[JoinResult]


def _new_future() -> asyncio.Future[Any]:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    # A client that went away never reads its answer; do not warn about it.
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())
    return fut


def _resolve(fut: asyncio.Future[Any] | None, value: Any) -> None:
    if fut is None or fut.done():
        return
    if isinstance(value, BaseException):
        fut.set_exception(value)
    else:
        fut.set_result(value)


class Membership:
    """Members, generations and rebalances of the groups in ``groups`` (shared with the other
    concerns of the group coordinator; see the module docstring)."""

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
        self._sessions = SessionTimers(self._session_expired)
        self._background: set[asyncio.Task[None]] = set()

    # -- the RPCs ----------------------------------------------------------------------------

    async def join_group(self, partition: int, req: JoinRequest) -> JoinResult:
        """JoinGroup for a group of ``partition`` (routed by the caller): add or refresh a
        member; answers once the join phase completes."""
        for what, value in (
            ("member_id", req.member_id),
            ("group_instance_id", req.group_instance_id),
            ("client_id", req.client_id),
        ):
            check_id(what, value)
        cfg = self._config
        if not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            raise InvalidSessionTimeoutError(
                f"session timeout {req.session_timeout_ms} ms is outside "
                f"[{cfg.group_min_session_timeout_ms}, {cfg.group_max_session_timeout_ms}]"
            )
        group = self._groups.get(req.group_id)
        if group is None:
            if req.member_id:
                raise UnknownMemberIdError(f"group {req.group_id} has no member {req.member_id}")
            group = self._groups[req.group_id] = Group(req.group_id, partition)
        if group.state is GroupState.DEAD:
            raise CoordinatorNotAvailableError(f"group {req.group_id} is being deleted")
        if not group.supports(req.protocol_type, req.protocols, req.member_id or None):
            raise InconsistentGroupProtocolError(
                f"protocol type {req.protocol_type!r} with protocols "
                f"{[name for name, _ in req.protocols]} does not match group {req.group_id} "
                f"(type {group.protocol_type!r}, common protocols {group.candidate_protocols()})"
            )
        if req.member_id:
            outcome = self._join_known(group, req)
        else:
            outcome = await self._join_unknown(group, req)
        if isinstance(outcome, JoinResult):
            return outcome
        return await asyncio.shield(outcome)

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: Mapping[str, bytes] | None = None,
    ) -> SyncResult:
        """SyncGroup: the leader hands in the assignment; everybody gets their part of it."""
        group = self._member_group(group_id, member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {group_id}'s ({group.generation_id})"
            )
        if (protocol_type and protocol_type != group.protocol_type) or (
            protocol_name and protocol_name != group.protocol_name
        ):
            raise InconsistentGroupProtocolError(
                f"group {group_id} uses {group.protocol_type}/{group.protocol_name}"
            )
        member = group.members[member_id]
        if group.state is GroupState.EMPTY:
            raise UnknownMemberIdError(f"group {group_id} is empty")
        if group.state is GroupState.PREPARING_REBALANCE:
            raise RebalanceInProgressError(f"group {group_id} is rebalancing: rejoin")
        if group.state is GroupState.STABLE:
            self._sessions.restart(group, member)
            return SyncResult(group.protocol_type, group.protocol_name, member.assignment)
        retry = member.awaiting_sync
        fut = member.sync_future if retry else _new_future()
        member.sync_future = fut
        self._sessions.restart(group, member)
        if group.is_leader(member_id) and not retry:
            await self._complete_sync(group, dict(assignments or {}))
        assert fut is not None
        result: SyncResult = await asyncio.shield(fut)
        return result

    async def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> None:
        """Heartbeat: keep the member's session; raises REBALANCE_IN_PROGRESS to make it rejoin."""
        group = self._member_group(group_id, member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {group_id}'s ({group.generation_id})"
            )
        if group.state is GroupState.EMPTY:
            raise UnknownMemberIdError(f"group {group_id} is empty")
        self._sessions.restart(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            raise RebalanceInProgressError(f"group {group_id} is rebalancing: rejoin")

    async def leave_group(self, group_id: str, members: Sequence[LeaveMember]) -> list[LeaveResult]:
        """LeaveGroup: remove each member at once (one result per member) and rebalance."""
        group = self._groups.get(group_id)
        if group is not None and group.state is GroupState.DEAD:
            raise CoordinatorNotAvailableError(f"group {group_id} is being deleted")
        results = []
        for leaving in members:
            error: BrokerResponseError | None = None
            instance = leaving.group_instance_id
            if group is None:
                error = UnknownMemberIdError(f"group {group_id} does not exist")
            elif instance is not None:
                known = group.static_members.get(instance)
                if known is None:
                    error = UnknownMemberIdError(f"no static member {instance}")
                elif leaving.member_id and leaving.member_id != known:
                    error = FencedInstanceIdError(f"{leaving.member_id} was replaced by {known}")
                else:
                    self._remove_and_rebalance(group, group.members[known], "left the group")
            elif leaving.member_id in group.pending_members:
                self._drop_pending(group, leaving.member_id)
            elif leaving.member_id in group.members:
                member = group.members[leaving.member_id]
                self._remove_and_rebalance(group, member, "left the group")
            else:
                error = UnknownMemberIdError(f"group {group_id} has no member {leaving.member_id}")
            results.append(LeaveResult(leaving.member_id, instance, error))
        return results

    # -- what the other concerns ask of membership -------------------------------------------

    def check_commit(
        self, group: Group, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> None:
        """Raise unless ``member_id`` may commit offsets for ``group`` in ``generation_id``
        (a known, unfenced member of that generation, outside CompletingRebalance); the commit
        counts as a heartbeat. Implements ``offsets.CommitGate``."""
        self._validate_member(group, member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {group.group_id}'s "
                f"({group.generation_id})"
            )
        if group.state is GroupState.COMPLETING_REBALANCE:
            raise RebalanceInProgressError(
                f"group {group.group_id} is completing a rebalance: commit after SyncGroup"
            )
        self._sessions.restart(group, group.members[member_id])

    def resume(self, group: Group) -> None:
        """A group restored by loading its partition: every member gets a session to
        heartbeat within."""
        for member in group.members.values():
            self._sessions.restart(group, member)

    def abandon(self, group: Group, error: BrokerResponseError) -> None:
        """Stop ``group``'s timers and answer its waiting JoinGroups and SyncGroups with
        ``error`` (its partition is unloaded)."""
        group.cancel_timers()
        for member in group.members.values():
            _resolve(member.join_future, error)
            _resolve(member.sync_future, error)

    # -- joining -----------------------------------------------------------------------------

    async def _join_unknown(self, group: Group, req: JoinRequest) -> _JoinOutcome:
        member_id = f"{req.client_id}-{uuid.uuid4()}"
        instance = req.group_instance_id
        if instance is not None and instance in group.static_members:
            return await self._replace_static(group, req, member_id)
        self._check_size(group)
        if instance is not None:  # static members skip the member-id round trip
            return self._add_member(group, req, member_id)
        loop = asyncio.get_running_loop()
        group.pending_members[member_id] = loop.call_later(
            req.session_timeout_ms / 1000, self._drop_pending, group, member_id
        )
        return JoinResult(
            member_id,
            error=MemberIdRequiredError("rejoin with the member id given in this answer"),
        )

    def _join_known(self, group: Group, req: JoinRequest) -> _JoinOutcome:
        member_id = req.member_id
        if member_id in group.pending_members:
            handle = group.pending_members.pop(member_id)
            if handle is not None:
                handle.cancel()
            self._check_size(group)
            return self._add_member(group, req, member_id)
        self._validate_member(group, member_id, req.group_instance_id)
        member = group.members[member_id]
        state = group.state
        if state is GroupState.EMPTY:
            raise UnknownMemberIdError(f"group {group.group_id} is empty")
        if state is GroupState.COMPLETING_REBALANCE and member.matches(req.protocols):
            # A retry after a lost answer: the current generation again.
            return self._join_result(group, member)
        stable = state is GroupState.STABLE
        if stable and not group.is_leader(member_id) and member.matches(req.protocols):
            return self._join_result(group, member, with_members=False)
        return self._update_member(group, member, req)

    def _check_size(self, group: Group) -> None:
        if len(group.members) + len(group.pending_members) >= self._config.group_max_size:
            raise GroupMaxSizeReachedError(
                f"group {group.group_id} has reached its maximum of "
                f"{self._config.group_max_size} members"
            )

    def _add_member(self, group: Group, req: JoinRequest, member_id: str) -> _JoinOutcome:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
            ),
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
        )
        fut = member.join_future = _new_future()
        if group.initial_delay_remaining_ms is not None:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")
        self._maybe_complete_join(group)
        return fut

    def _update_member(self, group: Group, member: Member, req: JoinRequest) -> _JoinOutcome:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = (
            req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
        )
        fut = member.join_future if member.awaiting_join else _new_future()
        member.join_future = fut
        member.cancel_timer()
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._maybe_complete_join(group)
        assert fut is not None
        return fut

    async def _replace_static(self, group: Group, req: JoinRequest, new_id: str) -> _JoinOutcome:
        """A known group_instance_id joined with no member id: it takes over the old member,
        whose id is fenced from now on."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        member = group.members[old_id]
        fenced = FencedInstanceIdError(f"{req.group_instance_id} rejoined as {new_id}")
        _resolve(member.join_future, fenced)
        _resolve(member.sync_future, fenced)
        member.cancel_timer()
        saved = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms)
        self._rename(group, member, new_id)
        unchanged = member.matches(req.protocols)
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = (
            req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
        )
        member.client_id, member.client_host = req.client_id, req.client_host
        if group.state is not GroupState.STABLE:
            member.join_future = _new_future()
            if group.state is GroupState.COMPLETING_REBALANCE:
                self._prepare_rebalance(group, f"static member {new_id} replaced {old_id}")
            self._maybe_complete_join(group)
            return member.join_future
        if not unchanged or group.select_protocol() != group.protocol_name:
            member.join_future = _new_future()
            self._prepare_rebalance(group, f"static member {new_id} changed its protocols")
            return member.join_future
        # Stable and nothing changed: persist the new member id and hand back the current
        # generation without a rebalance (the leader is told to skip the assignment).
        generation = group.generation_id
        try:
            await self._store_group(group)
        except Exception as e:  # the append failed: undo the replacement
            error = log_failure(e, commit=False)
            current = group.members.get(new_id) is member and group.generation_id == generation
            if self._groups.get(group.group_id) is group and current:
                self._rename(group, member, old_id)
                member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = saved
                self._sessions.restart(group, member)
            raise error from None
        if self._groups.get(group.group_id) is not group or group.members.get(new_id) is not member:
            raise UnknownMemberIdError(f"member {new_id} was removed while joining")
        self._sessions.restart(group, member)
        return self._join_result(group, member, skip_assignment=group.is_leader(new_id))

    def _rename(self, group: Group, member: Member, new_id: str) -> None:
        old_id = member.member_id
        del group.members[old_id]
        member.member_id = new_id
        group.members[new_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id

    def _join_result(
        self,
        group: Group,
        member: Member,
        *,
        with_members: bool = True,
        skip_assignment: bool = False,
    ) -> JoinResult:
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

    def _member_group(self, group_id: str, member_id: str, instance: str | None) -> Group:
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id} does not exist")
        if group.state is GroupState.DEAD:
            raise CoordinatorNotAvailableError(f"group {group_id} is being deleted")
        self._validate_member(group, member_id, instance)
        return group

    def _validate_member(self, group: Group, member_id: str, instance: str | None) -> None:
        if instance is not None:
            known = group.static_members.get(instance)
            if known is not None and known != member_id:
                raise FencedInstanceIdError(
                    f"member {member_id} of instance {instance} was replaced by {known}"
                )
        if member_id not in group.members:
            raise UnknownMemberIdError(f"group {group.group_id} has no member {member_id}")

    # -- rebalancing -------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
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

    def _maybe_complete_join(self, group: Group) -> None:
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
            _resolve(member.join_future, self._join_result(group, member))
            member.join_future = None
            self._sessions.restart(group, member)

    async def _complete_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        """Persist the leader's assignment, then answer every waiting SyncGroup."""
        generation = group.generation_id
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        error: BrokerResponseError | None = None
        try:
            await self._store_group(group)
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
            self._prepare_rebalance(group, f"storing the assignment failed: {error}")
            return
        group.transition(GroupState.STABLE, self._now_ms())
        for member in group.members.values():
            result = SyncResult(group.protocol_type, group.protocol_name, member.assignment)
            _resolve(member.sync_future, result)
            member.sync_future = None
        self._rebalanced(group)

    def _rebalanced(self, group: Group) -> None:
        duration = asyncio.get_running_loop().time() - group.rebalance_started
        self._stats.on_rebalance(group.group_id, duration)

    def _fail_syncs(self, group: Group, error: BrokerResponseError) -> None:
        for member in group.members.values():
            member.assignment = b""
            _resolve(member.sync_future, error)
            member.sync_future = None

    # -- sessions and removal ----------------------------------------------------------------

    def _session_expired(self, group: Group, member: Member) -> None:
        log.info(
            "group_member_removed",
            group_id=group.group_id,
            member_id=member.member_id,
            reason="session timeout",
        )
        self._remove_and_rebalance(group, member, f"member {member.member_id} session expired")

    def _remove(self, group: Group, member: Member) -> None:
        group.remove(member.member_id)
        gone = UnknownMemberIdError(f"member {member.member_id} was removed from the group")
        _resolve(member.join_future, gone)
        _resolve(member.sync_future, gone)

    def _remove_and_rebalance(self, group: Group, member: Member, reason: str) -> None:
        self._remove(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    def _drop_pending(self, group: Group, member_id: str) -> None:
        handle = group.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()
        self._maybe_complete_join(group)

    # -- storing -----------------------------------------------------------------------------

    async def _store_group(self, group: Group) -> None:
        await self._log.append(group.partition, [persist.group_record(group)])

    def _store_in_background(self, group: Group) -> None:
        """Record that a group became Empty (nobody waits for it; a failure is only logged).
        Counted as a write of the group from now on, so that a DeleteGroups arriving before
        the append was called waits for it instead of being overwritten by it."""

        async def store() -> None:
            try:
                await self._store_group(group)
            except Exception as e:
                log.warning("group_store_failed", group_id=group.group_id, error=str(e))

        def stored(task: asyncio.Task[None]) -> None:
            self._background.discard(task)
            group.pending_commits -= 1

        group.pending_commits += 1
        task = asyncio.get_running_loop().create_task(store())
        self._background.add(task)
        task.add_done_callback(stored)
