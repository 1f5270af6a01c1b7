"""The group coordinator's API: Kafka's classic consumer-group protocol over the
``__consumer_offsets`` partitions this instance hosts.

``GroupManager`` is what the gRPC servicer and the process talk to. It routes each request to
the group's partition (``partitions.hosting.HostedPartitions``: COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR) and hands it to the concern that owns it; the concerns share one table of
groups (``model.Group``, by id) and one ``PartitionLog``:

* ``membership``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the rebalance state machine
  (member sessions in ``sessions``);
* ``offsets``: OffsetCommit, OffsetFetch, OffsetDelete and the retention rule;
* ``txn_offsets``: TxnOffsetCommit and the transaction markers that commit or abort its
  pending offsets (verified with the transaction coordinator through a ``TxnVerifier``);
* ``admin``: ListGroups, DescribeGroups, DeleteGroups;
* ``expiry``: removal of expired offsets and Empty groups (``expire``);
* ``loading``: the groups of a partition rebuilt from its records when this instance takes it
  over (``begin_loading``, ``replay``, ``finish_loading``) and dropped on ``unload``.

Whatever must survive a coordinator failover (each generation's assignment, committed offsets,
deletions) goes through the ``PartitionLog`` first and reaches the in-memory state only once the
log acknowledged it.

Safety: one event loop, not thread-safe (see each concern's module for what may change across
its awaits).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from strom.errors import BrokerResponseError, UnknownServerError
from strom.types import TopicPartition
from strom_coordinator.group.admin import GroupAdmin
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
    MarkerGroupResult,
    PartitionResult,
    SyncResult,
    TxnCommitRequest,
)
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.errors import check_group_id
from strom_coordinator.group.expiry import GroupExpiry
from strom_coordinator.group.loading import GroupLoader
from strom_coordinator.group.membership import Membership
from strom_coordinator.group.model import Group
from strom_coordinator.group.offsets import OffsetStore
from strom_coordinator.group.records import OFFSETS_TOPIC
from strom_coordinator.group.stats import GroupStatsListener, NullStats
from strom_coordinator.group.txn_offsets import TxnOffsetStore, TxnVerifier
from strom_coordinator.partitions.hosting import HostedPartitions, HostedShard
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["GroupManager"]


class GroupManager(HostedShard):
    """Groups and committed offsets of the hosted __consumer_offsets partitions. Its
    partitions' life cycle is ``HostedShard``'s: while one loads its groups answer
    COORDINATOR_LOAD_IN_PROGRESS; once served, restored members get a session to heartbeat
    within; unloaded, pending joins and syncs answer NOT_COORDINATOR."""

    def __init__(
        self,
        log: PartitionLog,
        config: GroupConfig,
        *,
        stats: GroupStatsListener | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
        verifier: TxnVerifier | None = None,
    ) -> None:
        """``verifier`` asks the transaction coordinators about TxnOffsetCommit's producers;
        without one every TxnOffsetCommit is refused."""
        now_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        listener: GroupStatsListener = stats or NullStats()
        #: Every group of the hosted partitions, shared by the concerns below.
        self._groups: dict[str, Group] = {}
        groups = self._groups
        self._membership = Membership(groups, log, config, stats=listener, wall_clock_ms=now_ms)
        self._offsets = OffsetStore(
            groups, log, config, self._membership, stats=listener, wall_clock_ms=now_ms
        )
        self._partitions = HostedPartitions(
            GroupLoader(groups, self._membership), topic=OFFSETS_TOPIC, key_kind="group"
        )
        self._admin = GroupAdmin(groups, self._partitions, log, wall_clock_ms=now_ms)
        self._expiry = GroupExpiry(groups, self._partitions, log, config)
        self._txn = TxnOffsetStore(
            groups,
            self._partitions,
            log,
            self._offsets,
            verifier or _NoVerifier(),
            stats=listener,
            wall_clock_ms=now_ms,
        )

    def group_counts_by_state(self) -> dict[str, int]:
        """How many groups are in each state (for the metrics)."""
        return self._admin.counts_by_state()

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
        return await self._offsets.commit_offsets(
            partition,
            group_id,
            generation_id,
            member_id,
            partitions,
            group_instance_id=group_instance_id,
        )

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]] | None = None,
        *,
        require_stable: bool = False,
    ) -> list[FetchedOffset]:
        """OffsetFetch: the committed offsets (-1 where none); no partitions = all of them.
        ``require_stable``: UNSTABLE_OFFSET_COMMIT where a transactional offset is pending."""
        self._route(group_id, allow_empty=True)
        return await self._offsets.fetch_offsets(
            group_id, partitions, require_stable=require_stable
        )

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> list[PartitionResult]:
        """OffsetDelete: refused for topics an active consumer group subscribes to."""
        partition = self._route(group_id, allow_empty=True)
        return await self._offsets.delete_offsets(partition, group_id, partitions)

    # -- transactional offsets ---------------------------------------------------------------

    async def txn_commit_offsets(self, req: TxnCommitRequest) -> list[PartitionResult]:
        """TxnOffsetCommit: stage offsets for the producer's transaction (visible once its
        commit marker arrives). Whole-request errors are raised."""
        partition = self._route(req.group_id)
        return await self._txn.commit(partition, req)

    async def end_txn(
        self, group_ids: Sequence[str], producer_id: int, producer_epoch: int, committed: bool
    ) -> list[MarkerGroupResult]:
        """A transaction marker for the groups: commit or drop their pending offsets."""
        return await self._txn.end(group_ids, producer_id, producer_epoch, committed)

    # -- administration and expiry -----------------------------------------------------------

    async def list_groups(self, states: Sequence[str] = ()) -> list[ListedGroup]:
        """ListGroups over the served partitions; ``states`` filters (case-insensitively)."""
        return await self._admin.list_groups(states)

    async def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """DescribeGroups; an unknown group is reported Dead without an error, as Kafka does."""
        return await self._admin.describe_groups(group_ids)

    async def delete_groups(self, group_ids: Sequence[str]) -> list[DeleteGroupResult]:
        """DeleteGroups: only Empty groups; their offsets and metadata get tombstones."""
        return await self._admin.delete_groups(group_ids)

    async def expire(self, now_ms: int) -> None:
        """Delete offsets past retention and Empty groups left without offsets (tombstones)."""
        await self._expiry.expire(now_ms)

    async def close(self) -> None:
        """Nothing to stop: timers and sessions go with each group (the process is stopping)."""

    # -- plumbing ----------------------------------------------------------------------------

    def _route(self, group_id: str, *, allow_empty: bool = False) -> int:
        check_group_id(group_id, allow_empty=allow_empty)
        return self._partitions.route(group_id)


class _NoVerifier:
    """Refuses every transactional commit (a manager built without a transaction verifier)."""

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        tp: TopicPartition,
    ) -> BrokerResponseError | None:
        return UnknownServerError("this group coordinator cannot verify transactions")
