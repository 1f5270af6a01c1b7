"""Domain types of the controller's API: requests and per-item outcomes, free of protobuf.

``convert.py`` maps them to and from ``strom.protocol.v1.controller_pb2``; the managers and
``Controller`` speak only these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from strom.errors import BrokerResponseError

__all__ = [
    "AlterConfigOp",
    "AlterPartitionItem",
    "ConfigResourceRef",
    "ConfigValue",
    "CreatedTopic",
    "MetadataView",
    "NewPartitions",
    "NewTopicSpec",
    "OngoingReassignment",
    "Outcome",
    "PartitionView",
    "TopicView",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """The result of one item of a request: a value, or the error it failed with."""

    value: T | None = None
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class NewTopicSpec:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, tuple[int, ...]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigValue:
    name: str
    value: str
    source: str  # "DEFAULT" | "BROKER_DEFAULT" | "TOPIC"
    read_only: bool = False


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int
    configs: tuple[ConfigValue, ...] = ()


@dataclass(frozen=True)
class NewPartitions:
    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class ConfigResourceRef:
    type: str  # "topic" | "broker" | "unknown"
    name: str
    config_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class AlterConfigOp:
    name: str
    value: str
    op: str  # "set" | "delete" | "append" | "subtract"


@dataclass(frozen=True)
class AlterPartitionItem:
    topic: str
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class PartitionView:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class TopicView:
    name: str
    topic_id: str = ""
    internal: bool = False
    partitions: tuple[PartitionView, ...] = ()
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class MetadataView:
    cluster_id: str
    brokers: tuple[tuple[int, str, int, str], ...]  # id, host, port, rack
    controller: tuple[int, str, int] | None  # id, host, port
    topics: tuple[TopicView, ...]
