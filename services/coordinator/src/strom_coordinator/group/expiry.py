"""Offset retention and the removal of Empty groups, and the schedule that runs them.

Every ``offsets.retention.check.interval.ms`` (``expire_periodically``), ``GroupExpiry.expire``
writes tombstones for the committed offsets past retention (``offsets.expired_offsets``) of the
served groups, and for an Empty group left without offsets its group record too, then forgets
them. Groups with a commit in flight are skipped until the next round. Transactional offsets
still pending are never expired: neither the committed offset of their partition nor a group
holding any is removed until the transaction's marker ended them (Kafka's rule). (Member
sessions expire on their own timers: ``sessions``.)

Safety: one event loop, not thread-safe. The tombstones are written group by group; across
each append the group may have been unloaded or deleted, so it is forgotten only if
``groups.get(id) is group`` still holds, and offsets recommitted meanwhile are kept. A group
removed here is Dead while its tombstones are written and goes back to Empty if that fails; a
group only losing offsets may meanwhile be made Dead by DeleteGroups, and a failed write then
leaves it Dead (the deletion owns that state).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import structlog

from strom_coordinator.group import records
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.model import Group, GroupState
from strom_coordinator.group.offsets import expired_offsets, forget_offsets
from strom_coordinator.partitions.hosting import HostedPartitions
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["GroupExpiry", "expire_periodically"]

log = structlog.get_logger(__name__)


class GroupExpiry:
    """Removes expired offsets and Empty groups of the served partitions (see the module
    docstring)."""

    def __init__(
        self,
        groups: dict[str, Group],
        partitions: HostedPartitions,
        log: PartitionLog,
        config: GroupConfig,
    ) -> None:
        self._groups = groups
        self._partitions = partitions
        self._log = log
        self._config = config

    async def expire(self, now_ms: int) -> None:
        """Delete offsets past retention and Empty groups left without offsets (tombstones)."""
        retention = self._config.offsets_retention_ms
        for group in list(self._groups.values()):
            if not self._partitions.is_served(group.partition) or group.pending_commits:
                continue
            if group.state is GroupState.DEAD:
                continue
            expired = expired_offsets(group, now_ms, retention)
            remove_group = (
                group.state is GroupState.EMPTY
                and not group.members
                and not group.pending_members
                and not group.pending_txn
                and len(expired) == len(group.offsets)
            )
            if not expired and not remove_group:
                continue
            seqs = {tp: group.offset_seq.get(tp, 0) for tp in expired}
            recs: list[tuple[bytes, bytes | None]] = [
                (records.offset_key(group.group_id, t, p), None) for t, p in expired
            ]
            empty_since = group.state_timestamp_ms
            if remove_group:
                recs.append((records.group_key(group.group_id), None))
                group.transition(GroupState.DEAD, now_ms)
            try:
                await self._log.append(group.partition, recs)
            except Exception as e:
                if remove_group:  # only a Dead state it set itself: DeleteGroups may own it
                    group.state, group.state_timestamp_ms = GroupState.EMPTY, empty_since
                log.warning("group_expiry_failed", group_id=group.group_id, error=str(e))
                continue
            if self._groups.get(group.group_id) is not group:
                continue
            forget_offsets(group, seqs)
            if remove_group:
                group.cancel_timers()
                del self._groups[group.group_id]
            log.info(
                "group_offsets_expired",
                group_id=group.group_id,
                partitions=len(expired),
                group_deleted=remove_group,
            )


async def expire_periodically(
    expire: Callable[[int], Awaitable[None]],
    interval_s: float,
    *,
    wall_clock_ms: Callable[[], int] | None = None,
) -> None:
    """Call ``expire(now_ms)`` every ``interval_s`` until cancelled; a failed round is logged
    and the next one tries again."""
    now_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
    while True:
        await asyncio.sleep(interval_s)
        try:
            await expire(now_ms())
        except Exception:  # the next round tries again
            log.exception("expiring offsets and groups failed")
