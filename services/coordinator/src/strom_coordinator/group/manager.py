"""The group coordinator's state machine: Kafka's classic consumer-group protocol.

One ``GroupManager`` holds every group of the __consumer_offsets partitions this instance owns.
Membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance state machine) is
``membership.Membership``; whatever must survive a coordinator failover (the assignment of each
generation, committed offsets, deletions) goes through the ``PartitionLog`` first and reaches the
in-memory state only once the log acknowledged it. Routing a group to its partition and the
load life cycle of the hosted partitions are ``partitions.hosting.HostedPartitions``; loading a
partition rebuilds its groups from the log (``loading.GroupLoader``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence

import structlog

from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidRequestError,
    InvalidTopicError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
)
from strom_coordinator.group import persist, records
from strom_coordinator.group.api import (
    CommitPartition,
    DeleteGroupResult,
    FetchedOffset,
    GroupDescription,
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
from strom_coordinator.group.errors import check_group_id, log_failure
from strom_coordinator.group.loading import GroupLoader
from strom_coordinator.group.membership import Membership
from strom_coordinator.group.model import CommittedOffset, Group, GroupState
from strom_coordinator.group.records import OFFSETS_TOPIC
from strom_coordinator.group.stats import GroupStatsListener, NullStats
from strom_coordinator.partitions.hosting import HostedPartitions
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["GroupManager"]

log = structlog.get_logger(__name__)

_MAX_TOPIC_CHARS = 249


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
        self._groups: dict[str, Group] = {}
        self._commit_seq = itertools.count(1)
        self._membership = Membership(
            self._groups, log, config, stats=self._stats, wall_clock_ms=self._now_ms
        )
        self._partitions = HostedPartitions(
            GroupLoader(self._groups, self._membership), topic=OFFSETS_TOPIC, key_kind="group"
        )

    # -- hosted partitions (called by the process: ownership.PartitionHost) -------------------

    @property
    def partition_count(self) -> int | None:
        """Partitions of __consumer_offsets; None until the process knows."""
        return self._partitions.partition_count

    @partition_count.setter
    def partition_count(self, count: int | None) -> None:
        self._partitions.partition_count = count

    def partition_for(self, group_id: str) -> int:
        """The __consumer_offsets partition of a group (Kafka's formula)."""
        return self._partitions.partition_for(group_id)

    def begin_loading(self, partition: int) -> None:
        """Start reading ``partition``; its groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        self._partitions.begin_loading(partition)

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> None:
        """Apply one record of ``partition`` read during loading (malformed ones are skipped)."""
        self._partitions.replay(partition, key, value, timestamp_ms)

    def finish_loading(self, partition: int) -> None:
        """Serve ``partition``: restored members get a session to heartbeat within."""
        self._partitions.finish_loading(partition)

    def unload(self, partition: int) -> None:
        """Stop serving ``partition`` (pending joins and syncs answer NOT_COORDINATOR)."""
        self._partitions.unload(partition)

    def owned_partitions(self) -> set[int]:
        """Partitions being loaded or served."""
        return self._partitions.owned_partitions()

    def group_counts_by_state(self) -> dict[str, int]:
        counts = {s.value: 0 for s in GroupState}
        for group in self._groups.values():
            counts[group.state.value] += 1
        return counts

    # -- membership --------------------------------------------------------------------------

    async def join_group(self, req: JoinRequest) -> JoinResult:
        """JoinGroup: add or refresh a member; answers once the join phase completes."""
        partition = self._route(req.group_id)
        return await self._membership.join_group(partition, req)

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
        return await self._membership.sync_group(
            group_id,
            generation_id,
            member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
        )

    async def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> None:
        """Heartbeat: keep the member's session; raises REBALANCE_IN_PROGRESS to make it rejoin."""
        self._route(group_id)
        await self._membership.heartbeat(group_id, generation_id, member_id, group_instance_id)

    async def leave_group(self, group_id: str, members: Sequence[LeaveMember]) -> list[LeaveResult]:
        """LeaveGroup: remove each member at once (one result per member) and rebalance."""
        self._route(group_id)
        return await self._membership.leave_group(group_id, members)

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
            self._membership.check_commit(group, generation_id, member_id, group_instance_id)
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
            if self._partitions.is_served(g.partition)
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
            if not self._partitions.is_served(group.partition) or group.pending_commits:
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
        return self._partitions.route(group_id)
