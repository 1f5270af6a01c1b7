"""InitProducerId and the transaction requests, forwarded like the gRPC servicer forwards them:
InitProducerId without a transactional id to the controller, everything else to the
transactional id's (or, for TxnOffsetCommit, the group's) coordinator."""

from __future__ import annotations

from typing import Any, cast

import grpc

from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2, controller_pb2, coordinator_pb2, transaction_pb2
from strom_gateway.coordinator_router import is_controller_producer_id
from strom_gateway.kafka.backend import Backend, CallFailed, failure, kafka_code
from strom_gateway.kafka.data_handlers import by_topic
from strom_gateway.kafka.frames import Request
from strom_gateway.kafka.listener import Connection

__all__ = [
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "end_txn",
    "init_producer_id",
    "txn_offset_commit",
]


async def _txn(backend: Backend, method: str, request: Any) -> Any:
    try:
        return await backend.coordinators.call_txn(method, request, backend.timeout_s)
    except grpc.aio.AioRpcError as exc:
        raise failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE) from exc


async def init_producer_id(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    forwarded = controller_pb2.InitProducerIdRequest(
        transactional_id=body["transactional_id"] or "",
        transaction_timeout_ms=body["transaction_timeout_ms"],
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
    )
    try:
        if is_controller_producer_id(forwarded.transactional_id):
            answer = await backend.controller(
                "InitProducerId", forwarded, controller_pb2.InitProducerIdResponse
            )
        else:
            answer = await _txn(backend, "InitProducerId", forwarded)
    except CallFailed as exc:
        return {"error_code": exc.code, "producer_id": -1, "producer_epoch": -1}
    return {
        "throttle_time_ms": 0,
        "error_code": kafka_code(answer.error_code),
        "producer_id": answer.producer_id,
        "producer_epoch": answer.producer_epoch,
    }


async def add_partitions_to_txn(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    partitions = [
        common_pb2.TopicPartition(topic=t["name"], partition=p)
        for t in body["topics"]
        for p in t["partitions"]
    ]
    forwarded = transaction_pb2.AddPartitionsToTxnRequest(
        transactional_id=body["transactional_id"],
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        partitions=partitions,
    )
    try:
        answer = await _txn(backend, "AddPartitionsToTxn", forwarded)
        results = [(r.topic, r.partition, kafka_code(r.error_code)) for r in answer.results]
    except CallFailed as exc:
        results = [(p.topic, p.partition, exc.code) for p in partitions]
    return {
        "throttle_time_ms": 0,
        "results": by_topic(
            results,
            lambda r: r[0],
            lambda r: {"partition_index": r[1], "partition_error_code": r[2]},
            list_key="results",
        ),
    }


async def add_offsets_to_txn(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    forwarded = transaction_pb2.AddOffsetsToTxnRequest(
        transactional_id=body["transactional_id"],
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        group_id=body["group_id"],
    )
    try:
        answer = await _txn(backend, "AddOffsetsToTxn", forwarded)
    except CallFailed as exc:
        return {"error_code": exc.code}
    return {"throttle_time_ms": 0, "error_code": kafka_code(answer.error_code)}


async def end_txn(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    body = request.body
    forwarded = transaction_pb2.EndTxnRequest(
        transactional_id=body["transactional_id"],
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        committed=body["committed"],
    )
    try:
        answer = await _txn(backend, "EndTxn", forwarded)
    except CallFailed as exc:
        return {"error_code": exc.code}
    return {"throttle_time_ms": 0, "error_code": kafka_code(answer.error_code)}


async def txn_offset_commit(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    partitions = [
        coordinator_pb2.OffsetCommitPartition(
            topic=t["name"],
            partition=p["partition_index"],
            committed_offset=p["committed_offset"],
            committed_leader_epoch=p["committed_leader_epoch"],
            metadata=p["committed_metadata"] or "",
        )
        for t in body["topics"]
        for p in t["partitions"]
    ]
    forwarded = coordinator_pb2.TxnOffsetCommitRequest(
        transactional_id=body["transactional_id"],
        group_id=body["group_id"],
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        generation_id=body["generation_id"],
        member_id=body["member_id"],
        group_instance_id=body["group_instance_id"] or "",
        partitions=partitions,
    )
    try:
        answer = cast(
            coordinator_pb2.TxnOffsetCommitResponse,
            await backend.coordinators.call("TxnOffsetCommit", forwarded, backend.timeout_s),
        )
        results = [(r.topic, r.partition, kafka_code(r.error_code)) for r in answer.partitions]
    except grpc.aio.AioRpcError as exc:
        code = failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE).code
        results = [(p.topic, p.partition, code) for p in partitions]
    return {
        "throttle_time_ms": 0,
        "topics": by_topic(
            results, lambda r: r[0], lambda r: {"partition_index": r[1], "error_code": r[2]}
        ),
    }
