"""Plain value types of the client API (frozen dataclasses)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "ClusterDescription",
    "ConfigValue",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "MemberAssignment",
    "MemberDescription",
    "NewTopic",
    "NodeInfo",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionDescription",
    "StagedCommit",
    "StagedCommitResult",
    "StagedTransaction",
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
    """``controller``: the active one; ``controllers``: every running one, standbys too
    (empty from a gateway that does not report them)."""

    cluster_id: str
    controller: NodeInfo | None
    brokers: tuple[NodeInfo, ...]
    controllers: tuple[NodeInfo, ...] = ()


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


@dataclass(frozen=True)
class ConsumerGroupListing:
    """One group of ``Admin.list_consumer_groups``; ``state`` is Empty, PreparingRebalance,
    CompletingRebalance, Stable or Dead."""

    group_id: str
    protocol_type: str
    state: str

    @property
    def is_simple_consumer_group(self) -> bool:
        """A group used only to store offsets (no group management): no protocol type."""
        return self.protocol_type == ""


@dataclass(frozen=True)
class MemberAssignment:
    """The partitions assigned to a member."""

    topic_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class MemberDescription:
    """One member of a described group; ``group_instance_id`` is None for dynamic members."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: MemberAssignment


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A group as ``Admin.describe_consumer_groups`` reports it; ``partition_assignor`` is the
    chosen protocol (e.g. ``range``), empty when the group is not stable."""

    group_id: str
    is_simple_consumer_group: bool
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    state: str
    coordinator: NodeInfo | None
    protocol_type: str = ""
    generation_id: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A consumer's group membership as ``Consumer.group_metadata()`` returns it, for
    ``Producer.send_offsets_to_transaction`` (Kafka's class, KIP-447): the group coordinator
    refuses transactional offsets from a member the group has moved on without.
    ``generation_id=-1`` and an empty ``member_id`` skip that check, as in Kafka."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class StagedTransaction:
    """An open transaction handed over by ``Producer.prepare_transaction()``: whoever holds it
    can have it committed (``Admin.commit_staged_transactions``) or aborted
    (``Admin.abort_staged_transactions``) from any process."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class StagedCommit:
    """The last decision the transaction coordinator holds for a ``commit_id``."""

    commit_id: str
    #: The last decided sequence (-1: none yet).
    sequence: int
    #: ``"Committing"`` (decided, members still being committed) or ``"Committed"``.
    state: str
    members: tuple[StagedTransaction, ...]
    #: Opaque, given by the caller (e.g. JSON naming a query and a batch).
    metadata: bytes
    #: Members that could not be committed after the decision (they had expired).
    failed_members: tuple[StagedTransaction, ...] = ()


@dataclass(frozen=True)
class StagedCommitResult:
    """What ``Admin.commit_staged_transactions`` returns."""

    #: The sequence was at or below the last decided one: NOTHING of this call was committed
    #: (the caller aborts its members); ``commit`` is the earlier decision.
    already_committed: bool
    #: The record as stored after the call.
    commit: StagedCommit
