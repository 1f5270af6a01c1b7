"""The groups of a hosted ``__consumer_offsets`` partition: rebuilt from its records when this
coordinator takes the partition over, dropped when it gives the partition up.

``GroupLoader`` is the ``PartitionState`` of ``strom_coordinator.partitions.hosting``: each
record read while loading is replayed into the groups (``persist.replay_record``; a malformed
one is logged and skipped), and once the partition is served its restored members get a
session to heartbeat within and groups left with nothing (no members, offsets or protocol) are
forgotten. Dropping a partition answers its waiting JoinGroups and SyncGroups NOT_COORDINATOR.

Safety: one event loop, not thread-safe; nothing here awaits.
"""

from __future__ import annotations

import structlog

from strom.errors import InvalidRecordError, NotCoordinatorError
from strom_coordinator.group import persist
from strom_coordinator.group.membership import Membership
from strom_coordinator.group.model import Group

__all__ = ["GroupLoader"]

log = structlog.get_logger(__name__)


class GroupLoader:
    """Loads and drops the groups of one partition at a time (see the module docstring)."""

    def __init__(self, groups: dict[str, Group], membership: Membership) -> None:
        self._groups = groups
        self._membership = membership

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

    def partition_loaded(self, partition: int) -> None:
        """Serve ``partition``: restored members get a session to heartbeat within."""
        for group in self._partition_groups(partition):
            if (
                not group.members
                and not group.offsets
                and not group.pending_txn
                and group.protocol_type is None
            ):
                del self._groups[group.group_id]
                continue
            self._membership.resume(group)

    def drop_partition(self, partition: int) -> None:
        """Forget the groups of ``partition`` (pending joins and syncs answer NOT_COORDINATOR)."""
        for group in self._partition_groups(partition):
            moved = NotCoordinatorError(f"group {group.group_id} moved to another coordinator")
            self._membership.abandon(group, moved)
            del self._groups[group.group_id]

    def _partition_groups(self, partition: int) -> list[Group]:
        return [g for g in self._groups.values() if g.partition == partition]
