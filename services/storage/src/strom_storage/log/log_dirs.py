"""What a node's log directories hold: each directory's filesystem and its replicas' sizes.

Kafka's DescribeLogDirs, computed from the logs a ``LogManager`` hosts: a replica's size is
the bytes of its segment files (``Log.size_in_bytes``, kept in memory: nothing is read from
disk), its offset lag how far its log end is behind the high watermark it knows (Kafka's
definition: 0 on a leader), and the filesystem figures come from ``statvfs`` of the directory
(total size, and the space an unprivileged process may still use).

Thread-safety: reads snapshots only (``LogManager.logs``); safe from any thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from strom_storage.log.log import Log

#: (topic, partition), as ``LogManager`` keys its logs.
TopicPartition = tuple[str, int]

__all__ = [
    "FilesystemUsage",
    "LogDirReport",
    "ReplicaSize",
    "describe_log_dirs",
    "filesystem_usage",
]


@dataclass(frozen=True, slots=True)
class ReplicaSize:
    """One partition replica in a log directory."""

    topic: str
    partition: int
    size_bytes: int
    offset_lag: int
    is_future: bool = False  # Strom moves no replica between a node's directories


@dataclass(frozen=True, slots=True)
class FilesystemUsage:
    total_bytes: int
    usable_bytes: int


@dataclass(frozen=True, slots=True)
class LogDirReport:
    """One log directory: its filesystem (None with ``error`` when it cannot be read) and
    its replicas, by topic then partition."""

    path: str
    usage: FilesystemUsage | None
    replicas: list[ReplicaSize] = field(default_factory=list)
    error: str = ""


def filesystem_usage(path: Path) -> FilesystemUsage:
    """Size and usable space of the filesystem holding ``path`` (OSError when unreadable)."""
    stat = os.statvfs(path)
    return FilesystemUsage(stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize)


def replica_size(tp: TopicPartition, log: Log) -> ReplicaSize:
    lag = max(log.high_watermark - log.log_end_offset, 0)
    return ReplicaSize(tp[0], tp[1], log.size_in_bytes, lag)


def describe_log_dirs(
    log_dirs: Sequence[Path],
    logs: Mapping[TopicPartition, Log],
    topics: Collection[str] = (),
    *,
    usage: Callable[[Path], FilesystemUsage] = filesystem_usage,
) -> list[LogDirReport]:
    """A report per directory of ``log_dirs``, in order, with the replicas of ``logs`` it
    holds (only those of ``topics`` when given)."""
    wanted = set(topics)
    by_dir: dict[Path, list[ReplicaSize]] = {d: [] for d in log_dirs}
    for tp, log in logs.items():
        if wanted and tp[0] not in wanted:
            continue
        held = by_dir.get(log.directory.parent)
        if held is not None:
            held.append(replica_size(tp, log))
    reports = []
    for directory in log_dirs:
        replicas = sorted(by_dir[directory], key=lambda r: (r.topic, r.partition))
        try:
            found = usage(directory)
        except OSError as exc:
            reports.append(LogDirReport(str(directory), None, replicas, f"{directory}: {exc}"))
            continue
        reports.append(LogDirReport(str(directory), found, replicas))
    return reports
