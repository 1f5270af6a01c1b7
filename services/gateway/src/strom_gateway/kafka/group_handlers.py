"""FindCoordinator and the consumer-group requests, forwarded to the group's coordinator.

Every coordinator Kafka clients are told about is this listener (as one of the advertised
broker ids): the gateway routes each group request to the group's real coordinator itself.
"""

from __future__ import annotations

from typing import Any, cast

import grpc

from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import coordinator_pb2 as pb
from strom_gateway.kafka.backend import Backend, CallFailed, failure, kafka_code
from strom_gateway.kafka.data_handlers import by_topic
from strom_gateway.kafka.listener import Connection
from strom_gateway.kafka.protocol.frames import Request

__all__ = [
    "delete_groups",
    "describe_groups",
    "find_coordinator",
    "heartbeat",
    "join_group",
    "leave_group",
    "list_groups",
    "offset_commit",
    "offset_fetch",
    "sync_group",
]

#: JoinGroup before v4 cannot be told MEMBER_ID_REQUIRED: the gateway joins again for it.
_FIRST_MEMBER_ID_VERSION = 4


async def _group(backend: Backend, method: str, request: Any, floor_s: float = 0.0) -> Any:
    """``method`` on the group's coordinator; a failure raises ``CallFailed``, which the
    dispatcher answers as the response's top-level error code (handlers whose response needs
    more than that catch it)."""
    try:
        return await backend.coordinators.call(method, request, backend.timeout_s + floor_s)
    except grpc.aio.AioRpcError as exc:
        raise failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE) from exc


async def find_coordinator(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    keys = body["coordinator_keys"] if request.version >= 4 else [body["key"]]
    node_id = backend.broker_id
    found = []
    for key in keys:
        try:
            answer = await backend.coordinators.find_coordinator(
                pb.FindCoordinatorRequest(
                    group_id=key, key_type=cast(pb.CoordinatorKeyType, body["key_type"])
                ),
                min(backend.timeout_s, 5.0),
            )
        except grpc.aio.AioRpcError as exc:  # refused (an ACL on a secured listener)
            failed = failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            answer = pb.FindCoordinatorResponse(
                error_code=cast(common_pb2.ErrorCode, failed.code), error_message=failed.message
            )
        code = kafka_code(answer.error_code)
        found.append({
            "key": key,
            "node_id": node_id if not code else -1,
            "host": backend.host if not code else "",
            "port": backend.port if not code else -1,
            "error_code": code,
            "error_message": answer.error_message or None,
        })  # fmt: skip
    if request.version >= 4:
        return {"throttle_time_ms": 0, "coordinators": found}
    return {"throttle_time_ms": 0, **{k: v for k, v in found[0].items() if k != "key"}}


async def join_group(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    body = request.body
    forwarded = pb.JoinGroupRequest(
        group_id=body["group_id"],
        session_timeout_ms=body["session_timeout_ms"],
        rebalance_timeout_ms=body["rebalance_timeout_ms"]
        if body["rebalance_timeout_ms"] >= 0
        else body["session_timeout_ms"],
        member_id=body["member_id"],
        group_instance_id=body["group_instance_id"] or "",
        protocol_type=body["protocol_type"],
        protocols=[
            pb.GroupProtocol(name=p["name"], metadata=p["metadata"]) for p in body["protocols"]
        ],
        reason=body["reason"] or "",
        client_id=request.client_id or "",
    )
    floor_s = forwarded.rebalance_timeout_ms / 1000 + 5.0
    try:
        answer = await _group(backend, "JoinGroup", forwarded, floor_s)
        if (
            answer.error_code == ErrorCode.MEMBER_ID_REQUIRED
            and request.version < _FIRST_MEMBER_ID_VERSION
        ):
            forwarded.member_id = answer.member_id
            answer = await _group(backend, "JoinGroup", forwarded, floor_s)
    except CallFailed as exc:
        protocol_name = None if request.version >= 7 else ""
        return {
            "error_code": exc.code,
            "member_id": body["member_id"],
            "protocol_name": protocol_name,
        }
    return {
        "throttle_time_ms": 0,
        "error_code": kafka_code(answer.error_code),
        "generation_id": answer.generation_id,
        "protocol_type": answer.protocol_type or None,
        "protocol_name": answer.protocol_name or (None if request.version >= 7 else ""),
        "leader": answer.leader,
        "skip_assignment": answer.skip_assignment,
        "member_id": answer.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id or None,
             "metadata": m.metadata}
            for m in answer.members
        ],
    }  # fmt: skip


async def sync_group(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    body = request.body
    forwarded = pb.SyncGroupRequest(
        group_id=body["group_id"],
        generation_id=body["generation_id"],
        member_id=body["member_id"],
        group_instance_id=body["group_instance_id"] or "",
        protocol_type=body["protocol_type"] or "",
        protocol_name=body["protocol_name"] or "",
        assignments=[
            pb.SyncGroupAssignment(member_id=a["member_id"], assignment=a["assignment"])
            for a in body["assignments"]
        ],
    )
    answer = await _group(backend, "SyncGroup", forwarded)
    return {
        "throttle_time_ms": 0,
        "error_code": kafka_code(answer.error_code),
        "protocol_type": answer.protocol_type or None,
        "protocol_name": answer.protocol_name or None,
        "assignment": answer.assignment,
    }


async def heartbeat(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    body = request.body
    forwarded = pb.HeartbeatRequest(
        group_id=body["group_id"],
        generation_id=body["generation_id"],
        member_id=body["member_id"],
        group_instance_id=body["group_instance_id"] or "",
    )
    answer = await _group(backend, "Heartbeat", forwarded)
    return {"throttle_time_ms": 0, "error_code": kafka_code(answer.error_code)}


async def leave_group(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    body = request.body
    if request.version < 3:
        members = [pb.LeavingMember(member_id=body["member_id"])]
    else:
        members = [
            pb.LeavingMember(member_id=m["member_id"],
                             group_instance_id=m["group_instance_id"] or "",
                             reason=m["reason"] or "")
            for m in body["members"]
        ]  # fmt: skip
    forwarded = pb.LeaveGroupRequest(group_id=body["group_id"], members=members)
    answer = await _group(backend, "LeaveGroup", forwarded)
    return {
        "throttle_time_ms": 0,
        "error_code": kafka_code(answer.error_code),
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id or None,
             "error_code": kafka_code(m.error_code)}
            for m in answer.members
        ],
    }  # fmt: skip


async def offset_commit(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    partitions = [
        pb.OffsetCommitPartition(
            topic=t["name"],
            partition=p["partition_index"],
            committed_offset=p["committed_offset"],
            committed_leader_epoch=p["committed_leader_epoch"],
            metadata=p["committed_metadata"] or "",
        )
        for t in body["topics"]
        for p in t["partitions"]
    ]
    forwarded = pb.OffsetCommitRequest(
        group_id=body["group_id"],
        generation_id=body["generation_id"],
        member_id=body["member_id"],
        group_instance_id=body["group_instance_id"] or "",
        partitions=partitions,
    )
    try:
        answer = await _group(backend, "OffsetCommit", forwarded)
        results = [(r.topic, r.partition, kafka_code(r.error_code)) for r in answer.partitions]
    except CallFailed as exc:
        results = [(p.topic, p.partition, exc.code) for p in partitions]
    return {
        "throttle_time_ms": 0,
        "topics": by_topic(
            results, lambda r: r[0], lambda r: {"partition_index": r[1], "error_code": r[2]}
        ),
    }


def _offset_topics(answer: pb.OffsetFetchResponse) -> list[dict[str, Any]]:
    return by_topic(
        answer.partitions,
        lambda p: p.topic,
        lambda p: {
            "partition_index": p.partition,
            "committed_offset": p.committed_offset,
            "committed_leader_epoch": p.committed_leader_epoch if p.committed_offset >= 0 else -1,
            "metadata": p.metadata,
            "error_code": kafka_code(p.error_code),
        },
    )


async def _fetch_offsets(
    backend: Backend, group_id: str, topics: list[dict[str, Any]] | None, require_stable: bool
) -> pb.OffsetFetchResponse:
    partitions = [
        common_pb2.TopicPartition(topic=t["name"], partition=i)
        for t in topics or []
        for i in t["partition_indexes"]
    ]
    forwarded = pb.OffsetFetchRequest(
        group_id=group_id, partitions=partitions, require_stable=require_stable
    )
    try:
        answer: pb.OffsetFetchResponse = await _group(backend, "OffsetFetch", forwarded)
    except CallFailed as exc:
        return pb.OffsetFetchResponse(error_code=exc.code)  # type: ignore[arg-type]
    return answer


async def offset_fetch(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    if request.version >= 8:
        groups = []
        for group in body["groups"]:
            answer = await _fetch_offsets(
                backend, group["group_id"], group["topics"], body["require_stable"]
            )
            groups.append({
                "group_id": group["group_id"],
                "topics": _offset_topics(answer),
                "error_code": kafka_code(answer.error_code),
            })  # fmt: skip
        return {"throttle_time_ms": 0, "groups": groups}
    answer = await _fetch_offsets(backend, body["group_id"], body["topics"], body["require_stable"])
    return {
        "throttle_time_ms": 0,
        "topics": _offset_topics(answer),
        "error_code": kafka_code(answer.error_code),
    }


async def list_groups(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    forwarded = pb.ListGroupsRequest(states_filter=request.body["states_filter"])
    try:
        answer = await backend.coordinators.list_groups(forwarded, backend.timeout_s)
    except grpc.aio.AioRpcError as exc:
        return {"error_code": failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE).code}
    return {
        "throttle_time_ms": 0,
        "error_code": kafka_code(answer.error_code),
        "groups": [
            {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.group_state}
            for g in answer.groups
        ],
    }


async def describe_groups(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    ids = request.body["groups"]
    try:
        answer = await backend.coordinators.describe_groups(
            pb.DescribeGroupsRequest(group_ids=ids), backend.timeout_s
        )
        described = list(answer.groups)
    except grpc.aio.AioRpcError as exc:
        code = failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE).code
        described = [pb.DescribedGroup(group_id=g, error_code=code) for g in ids]  # type: ignore[arg-type]
    return {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": kafka_code(g.error_code),
                "group_id": g.group_id,
                "group_state": g.group_state,
                "protocol_type": g.protocol_type,
                "protocol_data": g.protocol_data,
                "members": [
                    {"member_id": m.member_id, "group_instance_id": m.group_instance_id or None,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "member_metadata": m.member_metadata,
                     "member_assignment": m.member_assignment}
                    for m in g.members
                ],
            }
            for g in described
        ],
    }  # fmt: skip


async def delete_groups(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    ids = request.body["groups_names"]
    try:
        answer = await backend.coordinators.delete_groups(
            pb.DeleteGroupsRequest(group_ids=ids), backend.timeout_s
        )
        results = [(r.group_id, kafka_code(r.error_code)) for r in answer.results]
    except grpc.aio.AioRpcError as exc:
        code = failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE).code
        results = [(g, code) for g in ids]
    return {
        "throttle_time_ms": 0,
        "results": [{"group_id": g, "error_code": c} for g, c in results],
    }
