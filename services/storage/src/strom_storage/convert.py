"""Protobuf <-> domain values for the storage node's RPCs (no logic beyond translation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.message import DecodeError

from strom.errors import InvalidRequestError
from strom.protocol.v1 import common_pb2, storage_pb2
from strom_server.rpc.errors import error_fields
from strom_server.rpc.produce_request import ProduceCall, read_produce_request
from strom_storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from strom_storage.node import (
    FetchPartitionRequest,
    FetchPartitionResult,
    ListOffsetsResult,
    ProducePartitionResult,
)

#: Kafka's fetch.max.bytes default, used when a request leaves max_bytes at 0.
DEFAULT_FETCH_MAX_BYTES = 52428800
#: Kafka's max.partition.fetch.bytes default, used when a partition leaves its limit at 0.
DEFAULT_PARTITION_MAX_BYTES = 1048576

_SPEC_TIMESTAMPS = {
    common_pb2.EARLIEST: EARLIEST_TIMESTAMP,
    common_pb2.LATEST: LATEST_TIMESTAMP,
    common_pb2.MAX_TIMESTAMP: MAX_TIMESTAMP,
}


def requested_epoch(partition: Any) -> int:
    """The leader epoch a request names, or -1 (skip the check) when it names none."""
    return partition.current_leader_epoch if partition.HasField("current_leader_epoch") else -1


def produce_call(request: storage_pb2.ProduceRequest) -> ProduceCall:
    return ProduceCall(
        request.acks,
        request.timeout_ms,
        request.correlation_id,
        [(p.topic, p.partition, p.records) for p in request.partitions],
    )


def produce_call_from_bytes(raw: bytes) -> ProduceCall:
    """A serialized ProduceRequest's fields, its records left in place (parsing would copy
    them twice). Raises ``InvalidRequestError`` for bytes that are not a ProduceRequest."""
    try:
        return read_produce_request(raw)
    except ValueError:  # the parser names what is wrong, or reads what the scan could not
        try:
            return produce_call(storage_pb2.ProduceRequest.FromString(raw))
        except DecodeError as exc:
            raise InvalidRequestError(f"malformed ProduceRequest: {exc}") from exc


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
            last_stable_offset=r.high_watermark,
            log_start_offset=r.log_start_offset,
            records=bytes(r.records),
            preferred_read_replica=-1,
        )
    return response


def _varint(value: int) -> bytes:
    """Protobuf base-128 varint; negative numbers as their 64-bit two's complement."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int_field(tag: int, value: int) -> bytes:
    return bytes((tag,)) + _varint(value) if value else b""


def _len_field(tag: int, data: bytes | memoryview) -> list[bytes | memoryview]:
    return [bytes((tag,)), _varint(len(data)), data] if data else []


def encode_fetch_response(correlation_id: int, results: Sequence[FetchPartitionResult]) -> bytes:
    """The serialized FetchResponse, byte for byte what ``fetch_response(...)
    .SerializeToString()`` gives, built with one copy of the record bytes instead of three
    (into the message, out of it, into gRPC). Field numbers: storage.proto."""
    parts: list[bytes | memoryview] = [_int_field(0x08, correlation_id)]
    for r in results:
        code, message = error_fields(r.error)
        body = [
            *_len_field(0x0A, r.topic.encode()),
            _int_field(0x10, r.partition),
            _int_field(0x18, code),
            *_len_field(0x22, message.encode()),
            _int_field(0x28, r.high_watermark),
            _int_field(0x30, r.high_watermark),  # last_stable_offset: no transactions yet
            _int_field(0x38, r.log_start_offset),
            *_len_field(0x42, r.records),
            _int_field(0x50, -1),  # preferred_read_replica: none
        ]
        size = sum(map(len, body))
        parts += [b"\x12", _varint(size), *body]
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
