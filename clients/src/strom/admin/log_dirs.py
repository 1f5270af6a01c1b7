"""Log directories (Kafka's ``DescribeLogDirs`` and ``kafka-log-dirs.sh``): what each storage
node's directories hold and how full their filesystems are.

The value types are here; ``strom.aio.Admin.describe_log_dirs`` and ``strom.Admin``'s return
them, one ``BrokerLogDirs`` per storage node asked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from strom.errors import ErrorCode
from strom.protocol.v1 import storage_pb2
from strom.types import TopicPartition

__all__ = ["BrokerLogDirs", "LogDirDescription", "ReplicaInfo", "broker_log_dirs"]


@dataclass(frozen=True)
class ReplicaInfo:
    """One partition replica in a log directory."""

    size_bytes: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True)
class LogDirDescription:
    """One log directory: its filesystem's size and usable space (-1: unknown), its replicas,
    and ``error`` (an ``ErrorCode`` name, "" when none) with ``error_message``."""

    path: str
    total_bytes: int
    usable_bytes: int
    replicas: dict[TopicPartition, ReplicaInfo]
    error: str = ""
    error_message: str = ""

    @property
    def size_bytes(self) -> int:
        """Bytes of every replica in the directory."""
        return sum(r.size_bytes for r in self.replicas.values())


@dataclass(frozen=True)
class BrokerLogDirs:
    """One storage node's directories; ``error`` (an ``ErrorCode`` name) when it could not be
    asked (``BROKER_NOT_AVAILABLE``: down or not a live node), ``log_dirs`` then empty."""

    node_id: int
    address: str
    log_dirs: tuple[LogDirDescription, ...]
    error: str = ""
    error_message: str = ""

    def replicas(self) -> Iterator[tuple[TopicPartition, str, ReplicaInfo]]:
        """(partition, directory, replica) of every replica the node holds."""
        for log_dir in self.log_dirs:
            for tp, replica in log_dir.replicas.items():
                yield tp, log_dir.path, replica


def _code(code: int) -> str:
    return "" if code == 0 else ErrorCode.Name(code)


def broker_log_dirs(found: storage_pb2.BrokerLogDirs) -> BrokerLogDirs:
    """The value type of one node's answer."""
    dirs = tuple(
        LogDirDescription(
            path=d.path,
            total_bytes=d.total_bytes,
            usable_bytes=d.usable_bytes,
            replicas={
                TopicPartition(t.name, p.partition): ReplicaInfo(
                    p.size_bytes, p.offset_lag, p.is_future
                )
                for t in d.topics
                for p in t.partitions
            },
            error=_code(d.error_code),
            error_message=d.error_message,
        )
        for d in found.log_dirs
    )
    return BrokerLogDirs(
        found.node_id, found.address, dirs, _code(found.error_code), found.error_message
    )
