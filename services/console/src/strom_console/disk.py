"""Disk use from the storage nodes' log directories (``Admin.describe_log_dirs``): per node
(replica bytes, filesystem size and usable space) and per partition (the size of each replica,
and the partition's size: its leader's replica)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strom.admin.log_dirs import BrokerLogDirs
from strom.types import TopicDescription, TopicPartition

__all__ = ["NodeDisk", "node_disks", "partition_sizes", "replica_sizes"]


@dataclass(frozen=True, slots=True)
class NodeDisk:
    """One storage node's directories: bytes its replicas take, and the filesystems' total
    size and usable space (summed over its directories; None when none could be read)."""

    used_bytes: int
    total_bytes: int | None
    usable_bytes: int | None
    dirs: int
    error: str = ""  # the node's or a directory's problem, "" when none

    @property
    def used_fraction(self) -> float | None:
        """How full the filesystems are (1 - usable / total), None when unknown."""
        if not self.total_bytes or self.usable_bytes is None:
            return None
        return 1 - self.usable_bytes / self.total_bytes


def node_disks(found: Sequence[BrokerLogDirs]) -> dict[int, NodeDisk]:
    disks = {}
    for node in found:
        readable = [d for d in node.log_dirs if not d.error and d.total_bytes >= 0]
        problems = [f"{node.error}: {node.error_message}"] if node.error else []
        problems += [f"{d.path}: {d.error}" for d in node.log_dirs if d.error]
        disks[node.node_id] = NodeDisk(
            used_bytes=sum(d.size_bytes for d in node.log_dirs),
            total_bytes=sum(d.total_bytes for d in readable) if readable else None,
            usable_bytes=sum(d.usable_bytes for d in readable) if readable else None,
            dirs=len(node.log_dirs),
            error="; ".join(problems),
        )
    return disks


def replica_sizes(found: Sequence[BrokerLogDirs]) -> dict[TopicPartition, dict[int, int]]:
    """partition -> node id -> the size of that node's replica."""
    sizes: dict[TopicPartition, dict[int, int]] = {}
    for node in found:
        for tp, _, replica in node.replicas():
            sizes.setdefault(tp, {})[node.node_id] = replica.size_bytes
    return sizes


def partition_sizes(
    replicas: dict[TopicPartition, dict[int, int]], topics: Sequence[TopicDescription]
) -> dict[TopicPartition, int]:
    """Each partition's size: its leader's replica, else (no leader, or the leader did not
    answer) its largest replica; partitions no node reported are left out."""
    sizes = {}
    for topic in topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition)
            held = replicas.get(tp)
            if held:
                sizes[tp] = held.get(p.leader, max(held.values()))
    return sizes
