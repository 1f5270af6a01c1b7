"""Group administration: ListGroups, DescribeGroups, DeleteGroups, and the count of groups by
state for the metrics.

Views of the groups of the served partitions; DeleteGroups removes an Empty group with
tombstones for its offsets and its group record, and forgets it once the log acknowledged them
(an unknown group is GROUP_ID_NOT_FOUND, one with members or with transactional offsets still
pending NON_EMPTY_GROUP: a pending offset is never dropped silently).

Safety: one event loop, not thread-safe. A group being deleted is Dead (other requests for it
answer COORDINATOR_NOT_AVAILABLE or see it as Dead) while the commits admitted before wait to be
written (``Group.commits_written``: their offsets are tombstoned with the rest, so a deleted
group stays deleted after a failover) and while its tombstones are written; it goes back to
Empty, empty since when it was, if the deletion fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
)
from strom_coordinator.group import records
from strom_coordinator.group.api import (
    DeleteGroupResult,
    GroupDescription,
    ListedGroup,
    MemberDescription,
)
from strom_coordinator.group.errors import check_group_id, log_failure
from strom_coordinator.group.model import Group, GroupState
from strom_coordinator.partitions.hosting import HostedPartitions
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["GroupAdmin"]


class GroupAdmin:
    """ListGroups, DescribeGroups and DeleteGroups over ``groups`` (see the module docstring)."""

    def __init__(
        self,
        groups: dict[str, Group],
        partitions: HostedPartitions,
        log: PartitionLog,
        *,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._groups = groups
        self._partitions = partitions
        self._log = log
        self._now_ms = wall_clock_ms or (lambda: int(time.time() * 1000))

    def counts_by_state(self) -> dict[str, int]:
        """How many groups are in each state (every state named, zeros included)."""
        counts = {s.value: 0 for s in GroupState}
        for group in self._groups.values():
            counts[group.state.value] += 1
        return counts

    async def list_groups(self, states: Sequence[str] = ()) -> list[ListedGroup]:
        """ListGroups over the served partitions; ``states`` filters (case-insensitively)."""
        wanted = {s.lower() for s in states}
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if self._partitions.is_served(g.partition)
            and g.state is not GroupState.DEAD
            and (not wanted or g.state.value.lower() in wanted)
        ]

    async def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """DescribeGroups; an unknown group is reported Dead without an error, as Kafka does."""
        out = []
        for group_id in group_ids:
            try:
                self._route(group_id)
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
        partition = self._route(group_id)
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        _check_deletable(group)
        empty_since = group.state_timestamp_ms
        group.transition(GroupState.DEAD, self._now_ms())
        try:
            # Commits admitted before it became Dead land first and are deleted with it.
            await group.commits_written()
            if self._groups.get(group_id) is not group:
                raise CoordinatorNotAvailableError(f"group {group_id} moved; try again")
            _check_deletable(group)
            recs: list[tuple[bytes, bytes | None]] = [
                (records.offset_key(group_id, t, p), None) for t, p in group.offsets
            ]
            recs.append((records.group_key(group_id), None))
            try:
                await self._log.append(partition, recs)
            except Exception as e:
                raise log_failure(e, commit=False) from None
        except BaseException:
            group.state, group.state_timestamp_ms = GroupState.EMPTY, empty_since
            raise
        if self._groups.get(group_id) is group:
            group.cancel_timers()
            del self._groups[group_id]

    def _route(self, group_id: str) -> int:
        check_group_id(group_id, allow_empty=True)
        return self._partitions.route(group_id)


def _check_deletable(group: Group) -> None:
    """Raise NON_EMPTY_GROUP unless ``group`` (Empty or being deleted) may be deleted."""
    if group.state not in (GroupState.EMPTY, GroupState.DEAD) or group.members:
        raise NonEmptyGroupError(f"group {group.group_id} has members ({group.state.value})")
    if group.pending_txn:
        producers = ", ".join(str(pid) for pid in sorted(group.pending_txn))
        raise NonEmptyGroupError(
            f"group {group.group_id} has transactional offsets pending (producer ids "
            f"{producers}); delete it once those transactions have ended"
        )
