"""Plain value types of the client API (frozen dataclasses)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "ClusterDescription",
    "ConfigValue",
    "ConsumerRecord",
    "NewTopic",
    "NodeInfo",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionDescription",
    "TopicDescription",
    "TopicPartition",
]


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class NewTopic:
    """A topic to create. -1 means the cluster default (num.partitions,
    default.replication.factor); ``replica_assignment`` maps partition -> broker ids (preferred
    leader first) and excludes both counts."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    topic_configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    host: str
    port: int
    rack: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]
    error: str = ""


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller: NodeInfo | None
    brokers: tuple[NodeInfo, ...]


@dataclass(frozen=True)
class ConfigValue:
    """One config entry; ``source`` is DEFAULT, BROKER_DEFAULT or TOPIC."""

    name: str
    value: str
    source: str
    read_only: bool = False


class ConsumerRecord(NamedTuple):
    """One record delivered by a ``Consumer`` (a tuple: cheap to build by the million).

    ``timestamp_type`` is 0 (CreateTime) or 1 (LogAppendTime); ``key`` and ``value`` are what
    the deserializers returned (bytes without one); the serialized sizes are -1 for null.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]
    serialized_key_size: int
    serialized_value_size: int
    leader_epoch: int


class OffsetAndMetadata(NamedTuple):
    """A committed position: the next offset to read, with optional metadata."""

    offset: int
    metadata: str = ""


class OffsetAndTimestamp(NamedTuple):
    """The answer of ``Consumer.offsets_for_times`` for one partition."""

    offset: int
    timestamp: int
