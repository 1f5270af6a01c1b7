"""The partitions a storage node hosts and the role of each: Kafka's leadership changes
(``becomeLeaderOrFollower``, ``stopReplicas``).

``apply_assignments`` makes the node host what the controller assigned to it, in the role it
gave, and stops hosting (deleting the log of) what it no longer assigns; a role change starts or
stops the partition's fetching from its leader (``Followers``) and wakes the fetches waiting on
it. The request paths (``replica_manager``) find partitions here (``get``) and wake each other's
waiters through ``notifier``.

Thread-safety: one event loop; the logs of new partitions are created in a worker thread.
"""

from __future__ import annotations

import asyncio
import errno
import resource
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

import structlog

from strom.errors import (
    ConfigurationError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from strom_storage.log import LogConfig
from strom_storage.log.log_manager import LogManager
from strom_storage.membership.assignment import PartitionAssignment
from strom_storage.node.loop_watch import APPLY_SLICE_S, LoopSlice
from strom_storage.node.notifier import AppendNotifier
from strom_storage.node.partition import Partition

log = structlog.get_logger(__name__)

__all__ = ["CREATE_CHUNK", "Followers", "HostedPartitions", "monotonic_ms", "open_files_hint"]

#: New partition logs apply_assignments creates per worker-thread call.
CREATE_CHUNK = 64


class Followers(Protocol):
    """Fetches the partitions this node follows from their leaders (``replica_fetcher``)."""

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its leader at its leader epoch (after truncating)."""

    def unfollow(self, key: tuple[str, int]) -> None: ...


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def open_files_hint(exc: BaseException) -> str:
    """What to do when ``exc`` (or its cause) is the process running out of file descriptors
    (EMFILE); empty otherwise."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.EMFILE:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            return (
                f"the node hit its open-files limit ({soft}): every hosted partition keeps 3 "
                "files open (log, offset index, time index), so raise the limit (ulimit -n, "
                "LimitNOFILE, docker --ulimit nofile) above 3 x partitions plus connections"
            )
        seen = seen.__cause__ or seen.__context__
    return ""


class HostedPartitions:
    """The partitions of one storage node, by (topic, index), and their roles."""

    def __init__(self, logs: LogManager, *, node_id: int) -> None:
        self.logs = logs
        self.node_id = node_id
        #: fetches the followed partitions (absent on a standalone node)
        self.followers: Followers | None = None
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._notifier: AppendNotifier | None = None
        # What apply_assignments last applied, to skip partitions that did not change.
        self._applied: dict[tuple[str, int], PartitionAssignment] = {}
        self._applied_base: LogConfig | None = None
        #: partitions the last apply_assignments could not host (retried by the next call)
        self.unapplied = 0

    # -- lookups ------------------------------------------------------------------------------

    def get(self, topic: str, index: int) -> Partition:
        partition = self._partitions.get((topic, index))
        if partition is None:
            raise UnknownTopicOrPartitionError(f"node {self.node_id} does not host {topic}-{index}")
        return partition

    def find(self, key: tuple[str, int]) -> Partition | None:
        return self._partitions.get(key)

    def __contains__(self, key: tuple[str, int]) -> bool:
        return key in self._partitions

    def keys(self) -> list[tuple[str, int]]:
        return list(self._partitions)

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    @property
    def notifier(self) -> AppendNotifier:
        """Wakes the fetches waiting on a partition (created on the running loop)."""
        if self._notifier is None:
            self._notifier = AppendNotifier(asyncio.get_running_loop())
        return self._notifier

    def wake(self, key: tuple[str, int]) -> None:
        if self._notifier is not None:
            self._notifier.notify(key)

    # -- hosting ------------------------------------------------------------------------------

    def open_existing(self) -> list[tuple[str, int]]:
        """Serve every partition found in the log directories."""
        found = self.logs.startup()
        for topic, index in found:
            log_ = self.logs.get_log(topic, index)
            assert log_ is not None
            self._partitions[(topic, index)] = Partition(topic, index, log_, node_id=self.node_id)
        return found

    def host(self, topic: str, index: int, config: LogConfig | None = None) -> Partition:
        """Create (or reconfigure) the partition's log and serve it."""
        partition = self._partitions.get((topic, index))
        log_ = self.logs.get_or_create_log(topic, index, config)
        if partition is None:
            partition = Partition(topic, index, log_, node_id=self.node_id)
            self._partitions[(topic, index)] = partition
        return partition

    def remove(self, topic: str, index: int) -> bool:
        """Stop serving the partition and delete its log."""
        self._applied.pop((topic, index), None)
        partition = self._partitions.pop((topic, index), None)
        if partition is None:
            return False
        if self.followers is not None:
            self.followers.unfollow((topic, index))
        partition.fail_waiters(
            NotLeaderOrFollowerError(f"node {self.node_id} no longer hosts {topic}-{index}")
        )
        self.logs.delete_log(topic, index)
        log.info("partition removed", topic=topic, partition=index)
        self.wake((topic, index))
        return True

    # -- assignments --------------------------------------------------------------------------

    async def apply_assignments(
        self,
        desired: Mapping[tuple[str, int], PartitionAssignment],
        base_config: LogConfig,
        *,
        remove_others: bool,
    ) -> int:
        """Host what the controller assigned here, in the role it gave; with
        ``remove_others``, delete the logs of partitions no longer assigned to this node.

        Incremental: a partition whose assignment (and the broker defaults) did not change since
        the last call is skipped, so a change to one partition costs one partition's work, not
        the node's. The logs of partitions new to this node are created in a worker thread,
        ``CREATE_CHUNK`` at a time (``_create_logs``): directories, empty segments and their
        fsyncs never block the event loop. The rest (roles, fetchers) runs on the loop, which it
        yields once it has held it for ``APPLY_SLICE_S``: a controller pushing thousands of
        partitions at once delays requests and the node's etcd keep-alive by a slice at a time,
        never by the whole burst. Returns how many partitions it touched.
        """
        if base_config != self._applied_base:
            self._applied.clear()
            self._applied_base = base_config
        changed = [
            (key, assignment)
            for key, assignment in desired.items()
            if self._applied.get(key) != assignment or key not in self._partitions
        ]
        loop_slice = LoopSlice(APPLY_SLICE_S)
        failed: list[tuple[tuple[str, int], Exception]] = []
        for start in range(0, len(changed), CREATE_CHUNK):
            chunk = changed[start : start + CREATE_CHUNK]
            configs = [self._config_of(assignment, base_config) for _, assignment in chunk]
            new = [
                (assignment, config)
                for (key, assignment), config in zip(chunk, configs, strict=True)
                if key not in self._partitions and self.logs.get_log(*key) is None
            ]
            if new:
                await asyncio.to_thread(self._create_logs, new)
            for (key, assignment), config in zip(chunk, configs, strict=True):
                try:
                    self._apply_one(key, assignment, config)
                except Exception as exc:  # this partition waits for the next pass; the others go on
                    failed.append((key, exc))
                else:
                    self._applied[key] = assignment
                await loop_slice.pause()
        self.unapplied = len(failed)
        if failed:
            (topic, index), first = failed[0]
            log.error("partitions could not be hosted; retrying", count=len(failed),
                      topic=topic, partition=index, error=str(first),
                      hint=open_files_hint(first))  # fmt: skip
        touched = len(changed) - len(failed)
        if remove_others:
            for key in [k for k in self._partitions if k not in desired]:
                self.remove(*key)
                touched += 1
                await loop_slice.pause()
        return touched

    def _create_logs(self, new: Sequence[tuple[PartitionAssignment, LogConfig]]) -> None:
        """Create the logs of partitions new to this node (in a worker thread: ``LogManager``
        and ``Log`` are thread-safe, and no request reaches these logs before ``_apply_one``
        serves them). A partition this node is to lead gets its leader epoch recorded here
        too (the epoch checkpoint's fsync), so ``make_leader`` finds it done. A failure is
        logged and left to ``_apply_one``, which tries again on the loop."""
        for assignment, config in new:
            try:
                log_ = self.logs.get_or_create_log(assignment.topic, assignment.partition, config)
                if assignment.leader == self.node_id:
                    log_.assign_leader_epoch(assignment.leader_epoch)
            except Exception as exc:
                log.warning("creating a partition log failed", topic=assignment.topic,
                            partition=assignment.partition, error=str(exc),
                            hint=open_files_hint(exc))  # fmt: skip

    def _config_of(self, assignment: PartitionAssignment, base_config: LogConfig) -> LogConfig:
        """The partition's log config: the broker defaults merged with its topic's configs."""
        try:
            return base_config.merged(assignment.configs)
        except ConfigurationError as exc:
            log.error(
                "invalid topic config; keeping the broker defaults",
                topic=assignment.topic,
                error=str(exc),
            )
            return base_config

    def _apply_one(
        self, key: tuple[str, int], assignment: PartitionAssignment, config: LogConfig
    ) -> None:
        partition = self.host(assignment.topic, assignment.partition, config)
        if assignment.leader == self.node_id:
            changed = partition.make_leader(
                assignment.leader_epoch,
                assignment.isr,
                replicas=assignment.replicas,
                partition_epoch=assignment.partition_epoch,
                now_ms=monotonic_ms(),
            )
            if changed and self.followers is not None:
                self.followers.unfollow(key)
            self.wake(key)  # a smaller ISR may have moved the high watermark
        else:
            changed = partition.make_follower(
                assignment.leader,
                assignment.leader_epoch,
                replicas=assignment.replicas,
                isr=assignment.isr,
                partition_epoch=assignment.partition_epoch,
            )
            if changed and self.followers is not None:
                if assignment.leader >= 0:
                    self.followers.follow(partition)
                else:
                    self.followers.unfollow(key)
        if changed:
            log.info(
                "partition role",
                topic=assignment.topic,
                partition=assignment.partition,
                leader=assignment.leader,
                leader_epoch=assignment.leader_epoch,
            )
            self.wake(key)
