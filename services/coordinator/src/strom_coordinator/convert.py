"""Protobuf <-> domain conversions for the GroupCoordinator service (the only protobuf-aware
module besides the servicer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from strom.errors import BrokerResponseError
from strom.protocol.v1 import common_pb2, transaction_pb2
from strom.protocol.v1 import coordinator_pb2 as pb
from strom_coordinator.group.api import (
    CommitPartition,
    DeleteGroupResult,
    FetchedOffset,
    GroupDescription,
    JoinRequest,
    JoinResult,
    LeaveMember,
    LeaveResult,
    ListedGroup,
    MarkerGroupResult,
    PartitionResult,
    SyncResult,
    TxnCommitRequest,
)
from strom_server.rpc.errors import error_fields

__all__ = [
    "commit_partitions",
    "commit_response",
    "delete_groups_response",
    "describe_groups_response",
    "error_fields",
    "fetch_response",
    "join_request",
    "join_response",
    "leave_members",
    "leave_response",
    "list_groups_response",
    "offset_delete_response",
    "peer_host",
    "sync_response",
    "txn_commit_error",
    "txn_commit_request",
    "txn_commit_response",
    "txn_marker_result",
]


def _code(error: BrokerResponseError | None) -> common_pb2.ErrorCode:
    # An error's ``code`` is an ErrorCode number, which the protobuf stubs type as the enum class.
    return common_pb2.NONE if error is None else cast(common_pb2.ErrorCode, error.code)


def _optional(value: str) -> str | None:
    return value or None


def peer_host(peer: str) -> str:
    """Kafka's client_host (``/1.2.3.4``) from a gRPC peer (``ipv4:1.2.3.4:5``)."""
    scheme, _, address = peer.partition(":")
    if scheme in ("ipv4", "ipv6") and ":" in address:
        return "/" + address.rsplit(":", 1)[0].strip("[]")
    return address or peer


def join_request(request: pb.JoinGroupRequest, client_host: str) -> JoinRequest:
    return JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        group_instance_id=_optional(request.group_instance_id),
        client_id=request.client_id,
        client_host=client_host,
        reason=request.reason,
    )


def join_response(result: JoinResult) -> pb.JoinGroupResponse:
    code, message = error_fields(result.error)
    return pb.JoinGroupResponse(
        error_code=code,
        error_message=message,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type or "",
        protocol_name=result.protocol_name or "",
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            pb.JoinGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id or "",
                metadata=m.metadata,
            )
            for m in result.members
        ],
    )


def sync_response(result: SyncResult) -> pb.SyncGroupResponse:
    return pb.SyncGroupResponse(
        protocol_type=result.protocol_type or "",
        protocol_name=result.protocol_name or "",
        assignment=result.assignment,
    )


def leave_members(request: pb.LeaveGroupRequest) -> list[LeaveMember]:
    return [
        LeaveMember(m.member_id, _optional(m.group_instance_id), m.reason) for m in request.members
    ]


def leave_response(results: Sequence[LeaveResult]) -> pb.LeaveGroupResponse:
    return pb.LeaveGroupResponse(
        members=[
            pb.LeaveGroupMemberResult(
                member_id=r.member_id,
                group_instance_id=r.group_instance_id or "",
                error_code=_code(r.error),
            )
            for r in results
        ]
    )


def commit_partitions(
    request: pb.OffsetCommitRequest | pb.TxnOffsetCommitRequest,
) -> list[CommitPartition]:
    return [
        CommitPartition(
            p.topic, p.partition, p.committed_offset, p.committed_leader_epoch, p.metadata
        )
        for p in request.partitions
    ]


def _partition_results(results: Sequence[PartitionResult]) -> list[pb.OffsetCommitPartitionResult]:
    out = []
    for r in results:
        code, message = error_fields(r.error)
        out.append(
            pb.OffsetCommitPartitionResult(
                topic=r.topic, partition=r.partition, error_code=code, error_message=message
            )
        )
    return out


def commit_response(results: Sequence[PartitionResult]) -> pb.OffsetCommitResponse:
    return pb.OffsetCommitResponse(partitions=_partition_results(results))


def _on_every_partition(
    request: pb.OffsetCommitRequest | pb.TxnOffsetCommitRequest, error: BrokerResponseError
) -> list[PartitionResult]:
    return [PartitionResult(p.topic, p.partition, error) for p in request.partitions]


def commit_error(
    request: pb.OffsetCommitRequest, error: BrokerResponseError
) -> pb.OffsetCommitResponse:
    """A whole-request error, reported on every partition (the response has no top-level one)."""
    return commit_response(_on_every_partition(request, error))


def txn_commit_request(request: pb.TxnOffsetCommitRequest) -> TxnCommitRequest:
    return TxnCommitRequest(
        transactional_id=request.transactional_id,
        group_id=request.group_id,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        partitions=commit_partitions(request),
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=_optional(request.group_instance_id),
    )


def txn_commit_response(results: Sequence[PartitionResult]) -> pb.TxnOffsetCommitResponse:
    return pb.TxnOffsetCommitResponse(partitions=_partition_results(results))


def txn_commit_error(
    request: pb.TxnOffsetCommitRequest, error: BrokerResponseError
) -> pb.TxnOffsetCommitResponse:
    """A whole-request error, reported on every partition (the response has no top-level one)."""
    return txn_commit_response(_on_every_partition(request, error))


def txn_marker_result(
    marker: transaction_pb2.WriteTxnMarker, groups: Sequence[MarkerGroupResult]
) -> transaction_pb2.WriteTxnMarkerResult:
    """One marker's answer: per group, and per partition named in the marker the first group
    error (NONE when every group ended the transaction)."""
    first = next((g.error for g in groups if g.error is not None), None)
    code, message = error_fields(first)
    out = transaction_pb2.WriteTxnMarkerResult(producer_id=marker.producer_id)
    for g in groups:
        g_code, g_message = error_fields(g.error)
        out.groups.add(group_id=g.group_id, error_code=g_code, error_message=g_message)
    for p in marker.partitions:
        out.partitions.add(
            topic=p.topic, partition=p.partition, error_code=code, error_message=message
        )
    return out


def topic_partitions(parts: Sequence[common_pb2.TopicPartition]) -> list[tuple[str, int]]:
    return [(p.topic, p.partition) for p in parts]


def fetch_response(offsets: Sequence[FetchedOffset]) -> pb.OffsetFetchResponse:
    return pb.OffsetFetchResponse(
        partitions=[
            pb.OffsetFetchPartition(
                topic=o.topic,
                partition=o.partition,
                committed_offset=o.offset,
                committed_leader_epoch=o.leader_epoch,
                metadata=o.metadata,
                error_code=_code(o.error),
            )
            for o in offsets
        ]
    )


def offset_delete_response(results: Sequence[PartitionResult]) -> pb.OffsetDeleteResponse:
    return pb.OffsetDeleteResponse(partitions=_partition_results(results))


def list_groups_response(groups: Sequence[ListedGroup]) -> pb.ListGroupsResponse:
    return pb.ListGroupsResponse(
        groups=[
            pb.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state)
            for g in groups
        ]
    )


def describe_groups_response(groups: Sequence[GroupDescription]) -> pb.DescribeGroupsResponse:
    out = []
    for g in groups:
        code, message = error_fields(g.error)
        out.append(
            pb.DescribedGroup(
                error_code=code,
                error_message=message,
                group_id=g.group_id,
                group_state=g.state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_name,
                generation_id=g.generation_id,
                members=[
                    pb.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id or "",
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in g.members
                ],
            )
        )
    return pb.DescribeGroupsResponse(groups=out)


def delete_groups_response(results: Sequence[DeleteGroupResult]) -> pb.DeleteGroupsResponse:
    out = []
    for r in results:
        code, message = error_fields(r.error)
        out.append(
            pb.DeleteGroupResult(group_id=r.group_id, error_code=code, error_message=message)
        )
    return pb.DeleteGroupsResponse(results=out)
