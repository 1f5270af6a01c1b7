"""InitProducerId and the transaction requests, forwarded like the gRPC servicer forwards them:
InitProducerId without a transactional id to the controller, everything else to the
transactional id's (or, for TxnOffsetCommit, the group's) coordinator."""

from __future__ import annotations

from typing import Any, cast

import grpc

from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2, controller_pb2, coordinator_pb2, transaction_pb2
from strom_gateway.kafka.backend import ROUTER_ERRORS, Backend, CallFailed, failure, kafka_code
from strom_gateway.kafka.data_handlers import all_failed, by_topic
from strom_gateway.kafka.listener import Connection
from strom_gateway.kafka.protocol.frames import Request
from strom_gateway.routing.coordinators import is_controller_producer_id
from strom_gateway.routing.data_path import describe_producers_error

__all__ = [
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "describe_producers",
    "describe_transactions",
    "end_txn",
    "init_producer_id",
    "list_transactions",
    "txn_offset_commit",
]


async def _txn(backend: Backend, method: str, request: Any) -> Any:
    """``method`` on the transactional id's coordinator; a failure raises ``CallFailed``, which the
    dispatcher answers as the response's top-level error code (handlers whose response needs
    more than that catch it)."""
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
    answer = await _txn(backend, "AddOffsetsToTxn", forwarded)
    return {"throttle_time_ms": 0, "error_code": kafka_code(answer.error_code)}


async def end_txn(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    body = request.body
    forwarded = transaction_pb2.EndTxnRequest(
        transactional_id=body["transactional_id"],
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        committed=body["committed"],
        # EndTxn < v5 clients keep their epoch across transactions (KIP-890 part 2 is v5+).
        keep_epoch=request.version < 5,
    )
    answer = await _txn(backend, "EndTxn", forwarded)
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


async def list_transactions(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    forwarded = transaction_pb2.ListTransactionsRequest(
        state_filters=body["state_filters"],
        producer_id_filters=body["producer_id_filters"],
        duration_filter_ms=max(body["duration_filter"], 0),
    )
    try:
        answer = await backend.coordinators.list_transactions(forwarded, backend.timeout_s)
    except grpc.aio.AioRpcError as exc:
        return {"error_code": failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE).code}
    return {
        "throttle_time_ms": 0,
        "error_code": kafka_code(answer.error_code),
        "unknown_state_filters": [],
        "transaction_states": [
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id,
             "transaction_state": t.state}
            for t in answer.transactions
        ],
    }  # fmt: skip


async def describe_transactions(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    ids = request.body["transactional_ids"]
    try:
        answer = await backend.coordinators.describe_transactions(
            transaction_pb2.DescribeTransactionsRequest(transactional_ids=ids), backend.timeout_s
        )
        described = list(answer.transactions)
    except grpc.aio.AioRpcError as exc:
        code = failure(exc, ErrorCode.COORDINATOR_NOT_AVAILABLE).code
        described = [
            transaction_pb2.DescribedTransaction(transactional_id=t, error_code=code)  # type: ignore[arg-type]
            for t in ids
        ]
    return {
        "throttle_time_ms": 0,
        "transaction_states": [
            {
                "error_code": kafka_code(t.error_code),
                "transactional_id": t.transactional_id,
                "transaction_state": t.state,
                "transaction_timeout_ms": t.transaction_timeout_ms,
                "transaction_start_time_ms": t.transaction_start_time_ms,
                "producer_id": t.producer_id,
                "producer_epoch": t.producer_epoch,
                "topics": by_topic(
                    t.partitions, lambda p: p.topic, lambda p: p.partition, name_key="topic"
                ),
            }
            for t in described
        ],
    }


async def describe_producers(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    partitions = [
        common_pb2.TopicPartition(topic=t["name"], partition=p)
        for t in request.body["topics"]
        for p in t["partition_indexes"]
    ]
    forwarded = transaction_pb2.DescribeProducersRequest(partitions=partitions)
    try:
        answer = await backend.data.describe_producers(forwarded, backend.deadline())
        results = list(answer.partitions)
    except ROUTER_ERRORS as exc:
        results = all_failed(exc, partitions, describe_producers_error)

    def entry(r: transaction_pb2.DescribeProducersResult) -> dict[str, Any]:
        return {
            "partition_index": r.partition,
            "error_code": kafka_code(r.error_code),
            "error_message": r.error_message or None,
            "active_producers": [
                {"producer_id": a.producer_id, "producer_epoch": a.producer_epoch,
                 "last_sequence": a.last_sequence, "last_timestamp": a.last_timestamp_ms,
                 "coordinator_epoch": a.coordinator_epoch,
                 "current_txn_start_offset": a.current_txn_start_offset}
                for a in r.active_producers
            ],
        }  # fmt: skip

    return {"throttle_time_ms": 0, "topics": by_topic(results, lambda r: r.topic, entry)}
