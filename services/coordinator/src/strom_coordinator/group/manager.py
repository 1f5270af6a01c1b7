"""The group coordinator's state machine: Kafka's classic consumer-group protocol.

One ``GroupManager`` holds every group of the __consumer_offsets partitions this instance owns.
Membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) lives in memory with asyncio timers for
sessions and rebalance deadlines; whatever must survive a coordinator failover (the assignment of
each generation, committed offsets, deletions) goes through the ``PartitionLog`` first and
reaches the in-memory state only once the log acknowledged it. ``replay`` rebuilds the state
from the log when the process takes a partition over.

States (Kafka's): Empty -> PreparingRebalance (join phase: every known member must rejoin within
the rebalance timeout) -> CompletingRebalance (new generation; the leader computes the assignment
and sends it with SyncGroup) -> Stable. A join, leave, session expiry or protocol change sends
the group back to PreparingRebalance; Dead is a group being deleted.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from strom.errors import (
    BrokerResponseError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidSessionTimeoutError,
    InvalidTopicError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from strom_coordinator.group import persist, records
from strom_coordinator.group.api import (
    CommitPartition,
    DeleteGroupResult,
    FetchedOffset,
    GroupDescription,
    JoinedMember,
    JoinRequest,
    JoinResult,
    LeaveMember,
    LeaveResult,
    ListedGroup,
    MemberDescription,
    PartitionResult,
    SyncResult,
)
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.errors import check_group_id, check_id, log_failure
from strom_coordinator.group.model import CommittedOffset, Group, GroupState, Member
from strom_coordinator.group.stats import GroupStatsListener, NullStats
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["GroupManager", "java_string_hash"]

log = structlog.get_logger(__name__)

_MAX_TOPIC_CHARS = 249
_JoinOutcome = JoinResult | asyncio.Future[JoinResult]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit wrap-around)."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


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


class GroupManager:
    """Groups and committed offsets of the owned __consumer_offsets partitions."""

    def __init__(
        self,
        log: PartitionLog,
        config: GroupConfig,
        *,
        stats: GroupStatsListener | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._log = log
        self._config = config
        self._stats: GroupStatsListener = stats or NullStats()
        self._now_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        #: None until the process knows how many partitions __consumer_offsets has.
        self.partition_count: int | None = None
        self._groups: dict[str, Group] = {}
        self._loading: set[int] = set()
        self._owned: set[int] = set()
        self._commit_seq = itertools.count(1)
        self._background: set[asyncio.Task[None]] = set()

    # -- ownership life cycle (called by the process) ---------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The __consumer_offsets partition of a group (Kafka's formula)."""
        if not self.partition_count:
            raise CoordinatorNotAvailableError("the __consumer_offsets partition count is unknown")
        h = java_string_hash(group_id)
        return (0 if h == -(2**31) else abs(h)) % self.partition_count

    def begin_loading(self, partition: int) -> None:
        """Start reading ``partition``; its groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        self._drop_partition(partition)
        self._owned.discard(partition)
        self._loading.add(partition)

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> None:
        """Apply one record of ``partition`` read during loading (malformed ones are skipped)."""
        if not key:
            log.warning("group_record_skipped", partition=partition, reason="record has no key")
            return
        try:
            persist.replay_record(self._groups, partition, key, value)
        except InvalidRecordError as e:
            log.warning("group_record_skipped", partition=partition, reason=str(e))

    def finish_loading(self, partition: int) -> None:
        """Serve ``partition``: restored members get a session to heartbeat within."""
        self._loading.discard(partition)
        self._owned.add(partition)
        for group in self._partition_groups(partition):
            if not group.members and not group.offsets and group.protocol_type is None:
                del self._groups[group.group_id]
                continue
            for member in group.members.values():
                self._schedule_session(group, member)

    def unload(self, partition: int) -> None:
        """Stop serving ``partition`` (pending joins and syncs answer NOT_COORDINATOR)."""
        self._loading.discard(partition)
        self._owned.discard(partition)
        self._drop_partition(partition)

    def owned_partitions(self) -> set[int]:
        """Partitions being loaded or served."""
        return self._owned | self._loading

    def group_counts_by_state(self) -> dict[str, int]:
        counts = {s.value: 0 for s in GroupState}
        for group in self._groups.values():
            counts[group.state.value] += 1
        return counts

    # -- membership --------------------------------------------------------------------------

    async def join_group(self, req: JoinRequest) -> JoinResult:
        """JoinGroup: add or refresh a member; answers once the join phase completes."""
        partition = self._route(req.group_id)
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
        self._route(group_id)
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
            self._schedule_session(group, member)
            return SyncResult(group.protocol_type, group.protocol_name, member.assignment)
        retry = member.awaiting_sync
        fut = member.sync_future if retry else _new_future()
        member.sync_future = fut
        self._schedule_session(group, member)
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
        self._route(group_id)
        group = self._member_group(group_id, member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {group_id}'s ({group.generation_id})"
            )
        if group.state is GroupState.EMPTY:
            raise UnknownMemberIdError(f"group {group_id} is empty")
        self._schedule_session(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            raise RebalanceInProgressError(f"group {group_id} is rebalancing: rejoin")

    async def leave_group(self, group_id: str, members: Sequence[LeaveMember]) -> list[LeaveResult]:
        """LeaveGroup: remove each member at once (one result per member) and rebalance."""
        self._route(group_id)
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
                self._schedule_session(group, member)
            raise error from None
        if self._groups.get(group.group_id) is not group or group.members.get(new_id) is not member:
            raise UnknownMemberIdError(f"member {new_id} was removed while joining")
        self._schedule_session(group, member)
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
            self._schedule_session(group, member)

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

    def _schedule_session(self, group: Group, member: Member) -> None:
        member.cancel_timer()
        member.session_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._on_session_expired, group, member
        )

    def _on_session_expired(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:  # kept alive by the rebalance
            self._schedule_session(group, member)
            return
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

    # -- offsets -----------------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        partitions: Sequence[CommitPartition],
        *,
        group_instance_id: str | None = None,
    ) -> list[PartitionResult]:
        """OffsetCommit; applied to the cache once the log acknowledged it. Whole-request errors
        (unknown member, illegal generation, ...) are raised."""
        partition = self._route(group_id, allow_empty=True)
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise IllegalGenerationError(f"group {group_id} has no generation {generation_id}")
            group = self._groups[group_id] = Group(group_id, partition)
        elif group.state is GroupState.DEAD:
            raise CoordinatorNotAvailableError(f"group {group_id} is being deleted")
        elif not (generation_id < 0 and group.state is GroupState.EMPTY):
            self._validate_member(group, member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} is not group {group_id}'s ({group.generation_id})"
                )
            if group.state is GroupState.COMPLETING_REBALANCE:
                raise RebalanceInProgressError(
                    f"group {group_id} is completing a rebalance: commit after SyncGroup"
                )
            self._schedule_session(group, group.members[member_id])
        now = self._now_ms()
        results: list[PartitionResult] = []
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for p in partitions:
            error = self._commit_error(p)
            results.append(PartitionResult(p.topic, p.partition, error))
            if error is None:
                accepted[(p.topic, p.partition)] = CommittedOffset(
                    p.offset, p.leader_epoch, p.metadata, now
                )
        if not accepted:
            return results
        recs = [
            (
                records.offset_key(group_id, topic, part),
                records.offset_value(
                    records.OffsetValue(o.offset, o.leader_epoch, o.metadata, now)
                ),
            )
            for (topic, part), o in accepted.items()
        ]
        seq = next(self._commit_seq)
        group.pending_commits += 1
        try:
            await self._log.append(partition, recs)
        except Exception as e:
            failure = log_failure(e, commit=True)
            return [
                r if r.error else PartitionResult(r.topic, r.partition, failure) for r in results
            ]
        finally:
            group.pending_commits -= 1
        if self._groups.get(group_id) is group:
            for tp, offset in accepted.items():
                if group.offset_seq.get(tp, 0) < seq:
                    group.offsets[tp] = offset
                    group.offset_seq[tp] = seq
        self._stats.on_commit(group_id, len(accepted))
        return results

    def _commit_error(self, p: CommitPartition) -> BrokerResponseError | None:
        if not p.topic or len(p.topic) > _MAX_TOPIC_CHARS:
            return InvalidTopicError(f"invalid topic name {p.topic[:_MAX_TOPIC_CHARS]!r}")
        if p.partition < 0:
            return UnknownTopicOrPartitionError(f"partition {p.partition} of {p.topic}")
        if p.offset < 0:
            return InvalidRequestError(f"committed offset {p.offset} is negative")
        limit = self._config.offset_metadata_max_bytes
        if len(p.metadata.encode()) > limit:
            return OffsetMetadataTooLargeError(f"offset metadata is longer than {limit} bytes")
        return None

    async def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None = None
    ) -> list[FetchedOffset]:
        """OffsetFetch: the committed offsets (-1 where none); no partitions = all of them."""
        self._route(group_id, allow_empty=True)
        group = self._groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        wanted = list(partitions) if partitions else sorted(offsets)
        found = []
        for topic, part in wanted:
            o = offsets.get((topic, part))
            if o is None:
                found.append(FetchedOffset(topic, part))
            else:
                found.append(FetchedOffset(topic, part, o.offset, o.leader_epoch, o.metadata))
        return found

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> list[PartitionResult]:
        """OffsetDelete: refused for topics an active consumer group subscribes to."""
        partition = self._route(group_id, allow_empty=True)
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        results: list[PartitionResult] = []
        deletable: list[tuple[str, int]] = []
        if group.state is GroupState.EMPTY:
            deletable = list(partitions)
            results = [PartitionResult(t, p) for t, p in partitions]
        elif group.protocol_type == "consumer":
            subscribed = group.subscribed_topics() or set()
            for topic, part in partitions:
                if topic in subscribed:
                    error = GroupSubscribedToTopicError(f"group {group_id} consumes {topic}")
                    results.append(PartitionResult(topic, part, error))
                else:
                    deletable.append((topic, part))
                    results.append(PartitionResult(topic, part))
        else:
            raise NonEmptyGroupError(f"group {group_id} has members")
        present = [tp for tp in dict.fromkeys(deletable) if tp in group.offsets]
        if not present:
            return results
        seqs = {tp: group.offset_seq.get(tp, 0) for tp in present}
        try:
            await self._log.append(
                partition, [(records.offset_key(group_id, t, p), None) for t, p in present]
            )
        except Exception as e:
            raise log_failure(e, commit=True) from None
        self._forget_offsets(group, seqs)
        return results

    def _forget_offsets(self, group: Group, seqs: Mapping[tuple[str, int], int]) -> None:
        """Drop offsets deleted in the log unless a newer commit landed meanwhile."""
        for tp, seq in seqs.items():
            if group.offset_seq.get(tp, 0) == seq:
                group.offsets.pop(tp, None)
                group.offset_seq.pop(tp, None)

    # -- administration ----------------------------------------------------------------------

    async def list_groups(self, states: Sequence[str] = ()) -> list[ListedGroup]:
        """ListGroups over the served partitions; ``states`` filters (case-insensitively)."""
        wanted = {s.lower() for s in states}
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if g.partition in self._owned
            and g.state is not GroupState.DEAD
            and (not wanted or g.state.value.lower() in wanted)
        ]

    async def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """DescribeGroups; an unknown group is reported Dead without an error, as Kafka does."""
        out = []
        for group_id in group_ids:
            try:
                self._route(group_id, allow_empty=True)
            except BrokerResponseError as e:
                out.append(GroupDescription(group_id, GroupState.DEAD.value, error=e))
                continue
            group = self._groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                out.append(GroupDescription(group_id, GroupState.DEAD.value))
                continue
            stable = group.state is GroupState.STABLE
            members = [
                MemberDescription(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata_for(group.protocol_name) if stable else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            ]
            out.append(
                GroupDescription(
                    group_id,
                    group.state.value,
                    group.protocol_type or "",
                    (group.protocol_name or "") if stable else "",
                    group.generation_id,
                    members,
                )
            )
        return out

    async def delete_groups(self, group_ids: Sequence[str]) -> list[DeleteGroupResult]:
        """DeleteGroups: only Empty groups; their offsets and metadata get tombstones."""
        results = []
        for group_id in dict.fromkeys(group_ids):
            try:
                await self._delete_group(group_id)
                results.append(DeleteGroupResult(group_id))
            except BrokerResponseError as e:
                results.append(DeleteGroupResult(group_id, e))
        return results

    async def _delete_group(self, group_id: str) -> None:
        partition = self._route(group_id, allow_empty=True)
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        if group.state is not GroupState.EMPTY or group.members:
            raise NonEmptyGroupError(f"group {group_id} has members ({group.state.value})")
        recs: list[tuple[bytes, bytes | None]] = [
            (records.offset_key(group_id, t, p), None) for t, p in group.offsets
        ]
        recs.append((records.group_key(group_id), None))
        group.transition(GroupState.DEAD, self._now_ms())
        try:
            await self._log.append(partition, recs)
        except Exception as e:
            if group.state is GroupState.DEAD:
                group.state = GroupState.EMPTY
            raise log_failure(e, commit=False) from None
        if self._groups.get(group_id) is group:
            group.cancel_timers()
            del self._groups[group_id]

    async def expire(self, now_ms: int) -> None:
        """Delete offsets past retention and Empty groups left without offsets (tombstones)."""
        retention = self._config.offsets_retention_ms
        for group in list(self._groups.values()):
            if group.partition not in self._owned or group.pending_commits:
                continue
            if group.state is GroupState.DEAD:
                continue
            expired = persist.expired_offsets(group, now_ms, retention)
            remove_group = (
                group.state is GroupState.EMPTY
                and not group.members
                and not group.pending_members
                and len(expired) == len(group.offsets)
            )
            if not expired and not remove_group:
                continue
            seqs = {tp: group.offset_seq.get(tp, 0) for tp in expired}
            recs: list[tuple[bytes, bytes | None]] = [
                (records.offset_key(group.group_id, t, p), None) for t, p in expired
            ]
            if remove_group:
                recs.append((records.group_key(group.group_id), None))
                group.transition(GroupState.DEAD, now_ms)
            try:
                await self._log.append(group.partition, recs)
            except Exception as e:
                if group.state is GroupState.DEAD:
                    group.state = GroupState.EMPTY
                log.warning("group_expiry_failed", group_id=group.group_id, error=str(e))
                continue
            if self._groups.get(group.group_id) is not group:
                continue
            self._forget_offsets(group, seqs)
            if remove_group:
                group.cancel_timers()
                del self._groups[group.group_id]
            log.info(
                "group_offsets_expired",
                group_id=group.group_id,
                partitions=len(expired),
                group_deleted=remove_group,
            )

    # -- plumbing ----------------------------------------------------------------------------

    def _route(self, group_id: str, *, allow_empty: bool = False) -> int:
        check_group_id(group_id, allow_empty=allow_empty)
        partition = self.partition_for(group_id)
        if partition in self._loading:
            raise CoordinatorLoadInProgressError(f"loading __consumer_offsets-{partition}")
        if partition not in self._owned:
            raise NotCoordinatorError(f"this coordinator does not own group {group_id}")
        return partition

    def _partition_groups(self, partition: int) -> list[Group]:
        return [g for g in self._groups.values() if g.partition == partition]

    def _drop_partition(self, partition: int) -> None:
        for group in self._partition_groups(partition):
            group.cancel_timers()
            moved = NotCoordinatorError(f"group {group.group_id} moved to another coordinator")
            for member in group.members.values():
                _resolve(member.join_future, moved)
                _resolve(member.sync_future, moved)
            del self._groups[group.group_id]

    async def _store_group(self, group: Group) -> None:
        await self._log.append(group.partition, [persist.group_record(group)])

    def _store_in_background(self, group: Group) -> None:
        """Record that a group became Empty (nobody waits for it; a failure is only logged)."""

        async def store() -> None:
            try:
                await self._store_group(group)
            except Exception as e:
                log.warning("group_store_failed", group_id=group.group_id, error=str(e))

        task = asyncio.get_running_loop().create_task(store())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
