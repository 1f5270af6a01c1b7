"""Requests and results of the group manager's RPC-level API (plain data, no protobuf)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from strom.errors import BrokerResponseError

__all__ = [
    "CommitPartition",
    "DeleteGroupResult",
    "FetchedOffset",
    "GroupDescription",
    "JoinRequest",
    "JoinResult",
    "JoinedMember",
    "LeaveMember",
    "LeaveResult",
    "ListedGroup",
    "MarkerGroupResult",
    "MemberDescription",
    "PartitionResult",
    "SyncResult",
    "TxnCommitRequest",
]


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int = 0  # <= 0: the session timeout, as JoinGroup v0
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    reason: str = ""


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    """The JoinGroup answer. ``error`` is set only for errors that still carry a member id
    (MEMBER_ID_REQUIRED); other errors are raised."""

    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: Sequence[JoinedMember] = ()
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class SyncResult:
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


@dataclass(frozen=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class LeaveResult:
    member_id: str
    group_instance_id: str | None
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True)
class TxnCommitRequest:
    """TxnOffsetCommit: offsets staged by the producer's transaction for the group; the
    member fields are checked like an OffsetCommit's (generation -1 / no member: unchecked)."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    partitions: Sequence[CommitPartition]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class PartitionResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str = ""
    protocol_name: str = ""
    generation_id: int = -1
    members: Sequence[MemberDescription] = field(default_factory=tuple)
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class DeleteGroupResult:
    group_id: str
    error: BrokerResponseError | None = None


@dataclass(frozen=True)
class MarkerGroupResult:
    """One group's answer to a transaction marker (GroupCoordinator.WriteTxnMarkers)."""

    group_id: str
    error: BrokerResponseError | None = None
