"""The membership and rebalance state machine of Kafka's classic consumer-group protocol.

JoinGroup, SyncGroup, Heartbeat and LeaveGroup; generations, the leader and its assignment;
static members (``group.instance.id``: a rejoining instance takes its old member over and
fences the old id); members waiting for a member id; the join phase's rebalance timeout and the
initial rebalance delay of an Empty group. Member sessions are ``sessions.SessionTimers``.

States (Kafka's): Empty -> PreparingRebalance (join phase: every known member must rejoin within
the rebalance timeout) -> CompletingRebalance (new generation; the leader computes the
assignment and sends it with SyncGroup) -> Stable. A join, leave, session expiry or protocol
change sends the group back to PreparingRebalance; Dead is a group being deleted.

``rebalance.Rebalancer`` runs the join phase, the generations, the sessions and the stored
generation; this module answers the RPCs. Membership lives in memory; what must survive a
failover (each generation with its assignment, a group becoming Empty) is written to the
``PartitionLog`` first and only then answered. The caller (``manager.GroupManager``) has
routed every request to a served partition.

Safety: one event loop, not thread-safe. Methods that do not await are atomic with respect to
other coroutines; after every await (a log append) the group may have been unloaded, deleted or
moved to a new generation, so the code checks ``groups.get(id) is group`` and the generation
before it changes anything.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence

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
from strom_coordinator.group.api import (
    JoinRequest,
    JoinResult,
    LeaveMember,
    LeaveResult,
    SyncResult,
)
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.errors import check_id, log_failure
from strom_coordinator.group.model import Group, GroupState, Member
from strom_coordinator.group.rebalance import Rebalancer, join_result, new_future, resolve
from strom_coordinator.group.stats import GroupStatsListener
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["Membership"]

log = structlog.get_logger(__name__)

_JoinOutcome = JoinResult | asyncio.Future[JoinResult]


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
        self._config = config
        self._rebalance = Rebalancer(groups, log, config, stats=stats, wall_clock_ms=wall_clock_ms)

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
            self._rebalance.sessions.restart(group, member)
            return SyncResult(group.protocol_type, group.protocol_name, member.assignment)
        retry = member.awaiting_sync
        fut = member.sync_future if retry else new_future()
        member.sync_future = fut
        self._rebalance.sessions.restart(group, member)
        if group.is_leader(member_id) and not retry:
            await self._rebalance.complete_sync(group, dict(assignments or {}))
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
        self._rebalance.sessions.restart(group, group.members[member_id])
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
                    member = group.members[known]
                    self._rebalance.remove_and_rebalance(group, member, "left the group")
            elif leaving.member_id in group.pending_members:
                self._rebalance.drop_pending(group, leaving.member_id)
            elif leaving.member_id in group.members:
                member = group.members[leaving.member_id]
                self._rebalance.remove_and_rebalance(group, member, "left the group")
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
        self._rebalance.sessions.restart(group, group.members[member_id])

    def resume(self, group: Group) -> None:
        """A group restored by loading its partition: every member gets a session to
        heartbeat within."""
        for member in group.members.values():
            self._rebalance.sessions.restart(group, member)

    def abandon(self, group: Group, error: BrokerResponseError) -> None:
        """Stop ``group``'s timers and answer its waiting JoinGroups and SyncGroups with
        ``error`` (its partition is unloaded)."""
        group.cancel_timers()
        for member in group.members.values():
            resolve(member.join_future, error)
            resolve(member.sync_future, error)

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
            req.session_timeout_ms / 1000, self._rebalance.drop_pending, group, member_id
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
            return join_result(group, member)
        stable = state is GroupState.STABLE
        if stable and not group.is_leader(member_id) and member.matches(req.protocols):
            return join_result(group, member, with_members=False)
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
        fut = member.join_future = new_future()
        if group.initial_delay_remaining_ms is not None:
            group.new_member_added = True
        group.add(member)
        self._rebalance.maybe_prepare(group, f"member {member_id} joined")
        self._rebalance.maybe_complete_join(group)
        return fut

    def _update_member(self, group: Group, member: Member, req: JoinRequest) -> _JoinOutcome:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = (
            req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
        )
        fut = member.join_future if member.awaiting_join else new_future()
        member.join_future = fut
        member.cancel_timer()
        self._rebalance.maybe_prepare(group, f"member {member.member_id} rejoined")
        self._rebalance.maybe_complete_join(group)
        assert fut is not None
        return fut

    async def _replace_static(self, group: Group, req: JoinRequest, new_id: str) -> _JoinOutcome:
        """A known group_instance_id joined with no member id: it takes over the old member,
        whose id is fenced from now on."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        member = group.members[old_id]
        fenced = FencedInstanceIdError(f"{req.group_instance_id} rejoined as {new_id}")
        resolve(member.join_future, fenced)
        resolve(member.sync_future, fenced)
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
            member.join_future = new_future()
            if group.state is GroupState.COMPLETING_REBALANCE:
                self._rebalance.prepare(group, f"static member {new_id} replaced {old_id}")
            self._rebalance.maybe_complete_join(group)
            return member.join_future
        if not unchanged or group.select_protocol() != group.protocol_name:
            member.join_future = new_future()
            self._rebalance.prepare(group, f"static member {new_id} changed its protocols")
            return member.join_future
        # Stable and nothing changed: persist the new member id and hand back the current
        # generation without a rebalance (the leader is told to skip the assignment).
        generation = group.generation_id
        try:
            await self._rebalance.store_group(group)
        except Exception as e:  # the append failed: undo the replacement
            error = log_failure(e, commit=False)
            current = group.members.get(new_id) is member and group.generation_id == generation
            if self._groups.get(group.group_id) is group and current:
                self._rename(group, member, old_id)
                member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = saved
                self._rebalance.sessions.restart(group, member)
            raise error from None
        if self._groups.get(group.group_id) is not group or group.members.get(new_id) is not member:
            raise UnknownMemberIdError(f"member {new_id} was removed while joining")
        self._rebalance.sessions.restart(group, member)
        return join_result(group, member, skip_assignment=group.is_leader(new_id))

    def _rename(self, group: Group, member: Member, new_id: str) -> None:
        old_id = member.member_id
        del group.members[old_id]
        member.member_id = new_id
        group.members[new_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id

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
