"""Protobuf <-> domain values for the storage node's RPCs (no logic beyond translation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strom.errors import InvalidRequestError
from strom.protocol.v1 import common_pb2, storage_pb2, transaction_pb2
from strom_server.rpc.errors import error_fields
from strom_server.rpc.produce_request import (  # noqa: F401 (the servicer's names for them)
    ProduceCall,
    produce_call,
    produce_call_from_bytes,
)
from strom_server.rpc.protowire import len_field, len_prefix, varint_field
from strom_storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from strom_storage.log.log_dirs import LogDirReport
from strom_storage.node import (
    FetchPartitionRequest,
    FetchPartitionResult,
    ListOffsetsResult,
    ProducePartitionResult,
    ProducersResult,
    TxnMarker,
    TxnMarkerResult,
)

#: Kafka's fetch.max.bytes default, used when a request leaves max_bytes at 0.
DEFAULT_FETCH_MAX_BYTES = 52428800
#: Kafka's max.partition.fetch.bytes default, used when a partition leaves its limit at 0.
DEFAULT_PARTITION_MAX_BYTES = 1048576

#: WriteTxnMarkers limits: markers per request and partitions over all its markers.
MAX_TXN_MARKERS = 10000
MAX_TXN_MARKER_PARTITIONS = 100000
#: Producer epochs are Kafka's int16.
MAX_PRODUCER_EPOCH = 32767

_SPEC_TIMESTAMPS = {
    common_pb2.EARLIEST: EARLIEST_TIMESTAMP,
    common_pb2.LATEST: LATEST_TIMESTAMP,
    common_pb2.MAX_TIMESTAMP: MAX_TIMESTAMP,
}


def requested_epoch(partition: Any) -> int:
    """The leader epoch a request names, or -1 (skip the check) when it names none."""
    return partition.current_leader_epoch if partition.HasField("current_leader_epoch") else -1


def produce_response(
    correlation_id: int, results: Sequence[ProducePartitionResult]
) -> storage_pb2.ProduceResponse:
    response = storage_pb2.ProduceResponse(correlation_id=correlation_id)
    for r in results:
        code, message = error_fields(r.error)
        response.partitions.add(
            topic=r.topic,
            partition=r.partition,
            error_code=code,  # type: ignore[arg-type]
            error_message=message,
            base_offset=r.base_offset,
            log_append_time_ms=r.log_append_time_ms,
            log_start_offset=r.log_start_offset,
        )
    return response


def fetch_requests(request: storage_pb2.FetchRequest) -> list[FetchPartitionRequest]:
    return [
        FetchPartitionRequest(
            topic=p.topic,
            partition=p.partition,
            fetch_offset=p.fetch_offset,
            partition_max_bytes=p.partition_max_bytes or DEFAULT_PARTITION_MAX_BYTES,
            current_leader_epoch=requested_epoch(p),
            log_start_offset=p.log_start_offset if request.replica_id >= 0 else -1,
        )
        for p in request.partitions
    ]


def fetch_max_bytes(request: storage_pb2.FetchRequest) -> int:
    return request.max_bytes or DEFAULT_FETCH_MAX_BYTES


def fetch_response(
    correlation_id: int, results: Sequence[FetchPartitionResult]
) -> storage_pb2.FetchResponse:
    response = storage_pb2.FetchResponse(correlation_id=correlation_id)
    for r in results:
        code, message = error_fields(r.error)
        response.partitions.add(
            topic=r.topic,
            partition=r.partition,
            error_code=code,  # type: ignore[arg-type]
            error_message=message,
            high_watermark=r.high_watermark,
            last_stable_offset=r.last_stable_offset,
            log_start_offset=r.log_start_offset,
            records=bytes(r.records),
            preferred_read_replica=-1,
            aborted_transactions=[
                storage_pb2.AbortedTransaction(producer_id=pid, first_offset=first)
                for pid, first in r.aborted_transactions
            ],
        )
    return response


def encode_fetch_response(correlation_id: int, results: Sequence[FetchPartitionResult]) -> bytes:
    """The serialized FetchResponse, byte for byte what ``fetch_response(...)
    .SerializeToString()`` gives, built with one copy of the record bytes instead of three
    (into the message, out of it, into gRPC). Field numbers: storage.proto."""
    parts: list[bytes | memoryview] = [varint_field(0x08, correlation_id)]
    for r in results:
        code, message = error_fields(r.error)
        body = [
            *len_field(0x0A, r.topic.encode()),
            varint_field(0x10, r.partition),
            varint_field(0x18, code),
            *len_field(0x22, message.encode()),
            varint_field(0x28, r.high_watermark),
            varint_field(0x30, r.last_stable_offset),
            varint_field(0x38, r.log_start_offset),
            *len_field(0x42, r.records),
            varint_field(0x50, -1),  # preferred_read_replica: none
        ]
        for pid, first in r.aborted_transactions:
            body += len_field(0x5A, varint_field(0x08, pid) + varint_field(0x10, first)) or [
                b"\x5a\x00"  # an empty AbortedTransaction (producer 0 at offset 0)
            ]
        size = sum(map(len, body))
        parts += [len_prefix(0x12, size), *body]
    return b"".join(parts)


def list_offsets_timestamp(partition: storage_pb2.ListOffsetsPartition) -> int:
    """The domain's timestamp for an OffsetSpec (Kafka's -2/-1/-3 or a time in ms)."""
    if partition.spec == common_pb2.TIMESTAMP:
        if partition.timestamp_ms < 0:
            raise InvalidRequestError(
                f"{partition.topic}-{partition.partition}: timestamp_ms must be >= 0 with spec "
                f"TIMESTAMP, got {partition.timestamp_ms}"
            )
        return partition.timestamp_ms
    timestamp = _SPEC_TIMESTAMPS.get(partition.spec)
    if timestamp is None:
        raise InvalidRequestError(
            f"{partition.topic}-{partition.partition}: ListOffsets spec is missing or unknown"
        )
    return timestamp


def list_offsets_partition(result: ListOffsetsResult) -> storage_pb2.ListOffsetsPartitionResult:
    code, message = error_fields(result.error)
    return storage_pb2.ListOffsetsPartitionResult(
        topic=result.topic,
        partition=result.partition,
        error_code=code,  # type: ignore[arg-type]
        error_message=message,
        timestamp_ms=result.timestamp_ms,
        offset=result.offset,
        leader_epoch=result.leader_epoch,
    )


def txn_markers(request: transaction_pb2.WriteTxnMarkersRequest) -> list[TxnMarker]:
    """The markers of a WriteTxnMarkers request. Raises ``InvalidRequestError`` naming the
    first problem of a malformed one (too many markers or partitions, negative ids, an epoch
    outside int16, a negative timeout)."""
    if request.timeout_ms < 0:
        raise InvalidRequestError(
            f"WriteTxnMarkers timeout_ms must be >= 0, got {request.timeout_ms}"
        )
    if len(request.markers) > MAX_TXN_MARKERS:
        raise InvalidRequestError(
            f"WriteTxnMarkers carries {len(request.markers)} markers, at most "
            f"{MAX_TXN_MARKERS} are accepted"
        )
    total = sum(len(m.partitions) for m in request.markers)
    if total > MAX_TXN_MARKER_PARTITIONS:
        raise InvalidRequestError(
            f"WriteTxnMarkers names {total} partitions, at most {MAX_TXN_MARKER_PARTITIONS} "
            "are accepted"
        )
    markers = []
    for i, m in enumerate(request.markers):
        what = f"WriteTxnMarkers marker {i} (producer id {m.producer_id})"
        if m.producer_id < 0:
            raise InvalidRequestError(f"{what}: producer_id must be >= 0")
        if not 0 <= m.producer_epoch <= MAX_PRODUCER_EPOCH:
            raise InvalidRequestError(
                f"{what}: producer_epoch must be in [0, {MAX_PRODUCER_EPOCH}], got "
                f"{m.producer_epoch}"
            )
        if m.coordinator_epoch < 0:
            raise InvalidRequestError(
                f"{what}: coordinator_epoch must be >= 0, got {m.coordinator_epoch}"
            )
        if not m.partitions:
            raise InvalidRequestError(f"{what}: names no partition")
        for tp in m.partitions:
            if not tp.topic or tp.partition < 0:
                raise InvalidRequestError(
                    f"{what}: partition {tp.topic!r}-{tp.partition} is not a valid partition"
                )
        markers.append(
            TxnMarker(
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                committed=m.committed,
                coordinator_epoch=m.coordinator_epoch,
                partitions=tuple((tp.topic, tp.partition) for tp in m.partitions),
            )
        )
    return markers


def txn_markers_response(
    results: Sequence[TxnMarkerResult],
) -> transaction_pb2.WriteTxnMarkersResponse:
    response = transaction_pb2.WriteTxnMarkersResponse()
    for result in results:
        marker = response.markers.add(producer_id=result.producer_id)
        for topic, index, error in result.partitions:
            code, message = error_fields(error)
            marker.partitions.add(
                topic=topic,
                partition=index,
                error_code=code,  # type: ignore[arg-type]
                error_message=message,
            )
    return response


def describe_producers_result(result: ProducersResult) -> transaction_pb2.DescribeProducersResult:
    code, message = error_fields(result.error)
    return transaction_pb2.DescribeProducersResult(
        topic=result.topic,
        partition=result.partition,
        error_code=code,  # type: ignore[arg-type]
        error_message=message,
        active_producers=[
            transaction_pb2.ActiveProducer(
                producer_id=p.producer_id,
                producer_epoch=p.producer_epoch,
                last_sequence=p.last_sequence,
                last_timestamp_ms=p.last_timestamp,
                coordinator_epoch=p.coordinator_epoch,
                current_txn_start_offset=p.current_txn_start_offset,
            )
            for p in result.producers
        ],
    )


def log_dirs_response(
    node_id: int, reports: list[LogDirReport]
) -> storage_pb2.DescribeLogDirsResponse:
    """A node's DescribeLogDirs answer: one ``BrokerLogDirs``, its replicas by topic."""
    node = storage_pb2.BrokerLogDirs(node_id=node_id)
    for report in reports:
        entry = node.log_dirs.add(path=report.path, total_bytes=-1, usable_bytes=-1)
        if report.usage is None:
            entry.error_code = common_pb2.KAFKA_STORAGE_ERROR
            entry.error_message = report.error
        else:
            entry.total_bytes = report.usage.total_bytes
            entry.usable_bytes = report.usage.usable_bytes
        topic: storage_pb2.LogDirTopic | None = None
        for replica in report.replicas:
            if topic is None or topic.name != replica.topic:
                topic = entry.topics.add(name=replica.topic)
            topic.partitions.add(
                partition=replica.partition,
                size_bytes=replica.size_bytes,
                offset_lag=replica.offset_lag,
                is_future=replica.is_future,
            )
    return storage_pb2.DescribeLogDirsResponse(brokers=[node])
