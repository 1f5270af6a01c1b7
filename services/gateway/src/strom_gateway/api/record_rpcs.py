"""ProduceRecords and FetchRecords: the thin-client path, individual records in and out.

The convenient, slower path for languages without a record-batch encoder: the gateway builds
one v2 batch from the request's records (``strom.records``) and produces it through the
normal data path, or fetches through it and decodes the batches into records. Everything
else (routing, retries, the byte budget) is the batch path's.

Partition choice for ``partition = -1``: keyed records go where the Python producer (and any
Kafka client) puts them, ``murmur2(key) % partitions`` (``strom.producer.partitioner``); since
one request is one batch on one partition, keys of a request that hash to different
partitions are refused (INVALID_REQUEST). Keyless requests take partitions in turn.
"""

from __future__ import annotations

import itertools
import time

from strom.errors import ErrorCode, StromError
from strom.producer.partitioner import murmur2_partition
from strom.protocol.v1 import gateway_pb2, storage_pb2
from strom.records import BatchBuilder, decode_batches
from strom_gateway.routing.data_path import DataPath

__all__ = ["RecordRpcs"]

#: FetchRecords' limit when ``max_bytes`` is 0.
DEFAULT_MAX_BYTES = 1024 * 1024


class RecordRpcs:
    """ProduceRecords/FetchRecords over a ``DataPath``."""

    def __init__(self, data: DataPath) -> None:
        self._data = data
        self._turns: dict[str, itertools.count[int]] = {}

    async def _partition(
        self, request: gateway_pb2.ProduceRecordsRequest, deadline: float
    ) -> tuple[int, str]:
        """The partition to write to, or -1 with the reason."""
        if request.partition >= 0:
            return request.partition, ""
        metadata = self._data.router.metadata
        await metadata.ensure([request.topic], max(deadline - time.monotonic(), 0.001))
        count = metadata.partition_count(request.topic)
        if not count:
            return -1, f"unknown topic '{request.topic}'"
        keys = {r.key for r in request.records if r.HasField("key")}
        if not keys:
            turn = self._turns.setdefault(request.topic, itertools.count())
            return next(turn) % count, ""
        chosen = {murmur2_partition(key, count) for key in keys}
        if len(chosen) > 1:
            return -1, (
                f"the keys of one request map to partitions {sorted(chosen)}: one request is "
                "one batch on one partition; send one request per partition"
            )
        return chosen.pop(), ""

    async def produce(
        self, request: gateway_pb2.ProduceRecordsRequest, deadline: float
    ) -> gateway_pb2.ProduceRecordsResponse:
        answer = gateway_pb2.ProduceRecordsResponse(topic=request.topic, base_offset=-1)
        answer.log_append_time_ms = -1
        partition, why = await self._partition(request, deadline)
        answer.partition = partition
        if partition < 0:
            unknown = why.startswith("unknown topic")
            answer.error_code = (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if unknown else ErrorCode.INVALID_REQUEST
            )
            answer.error_message = why
            return answer
        if not request.records:
            answer.error_code = ErrorCode.INVALID_REQUEST
            answer.error_message = "no records"
            return answer
        try:
            batch = encode(request)
        except (StromError, TypeError, ValueError) as exc:
            answer.error_code = getattr(exc, "code", ErrorCode.INVALID_REQUEST)
            answer.error_message = str(exc)
            return answer
        produce = storage_pb2.ProduceRequest(
            acks=request.acks,
            timeout_ms=request.timeout_ms,
            partitions=[
                storage_pb2.ProducePartitionData(
                    topic=request.topic, partition=partition, records=batch
                )
            ],
            client_id="gateway-records",
        )
        result = (await self._data.produce(produce, deadline)).partitions[0]
        answer.error_code = result.error_code
        answer.error_message = result.error_message
        answer.base_offset = result.base_offset
        answer.log_append_time_ms = result.log_append_time_ms
        return answer

    async def fetch(
        self, request: gateway_pb2.FetchRecordsRequest, deadline: float
    ) -> gateway_pb2.FetchRecordsResponse:
        max_bytes = request.max_bytes or DEFAULT_MAX_BYTES
        fetch = storage_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=request.max_wait_ms,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=request.isolation_level,
            partitions=[
                storage_pb2.FetchPartition(
                    topic=request.topic,
                    partition=request.partition,
                    fetch_offset=request.offset,
                    partition_max_bytes=max_bytes,
                )
            ],
            client_id="gateway-records",
        )
        (result,) = await self._data.fetch_results(fetch, deadline)
        answer = gateway_pb2.FetchRecordsResponse(
            error_code=result.error_code,
            error_message=result.error_message,
            high_watermark=result.high_watermark,
            log_start_offset=result.log_start_offset,
            next_offset=request.offset,
        )
        if result.error_code:
            return answer
        try:
            decode_into(answer, result.records, request.offset, request.max_records)
        except StromError as exc:
            answer.error_code = getattr(exc, "code", ErrorCode.CORRUPT_MESSAGE)
            answer.error_message = str(exc)
        return answer


def encode(request: gateway_pb2.ProduceRecordsRequest) -> bytes:
    """One v2 batch (no producer id: not idempotent) holding the request's records."""
    builder = BatchBuilder(compression=int(request.compression))
    now_ms = int(time.time() * 1000)
    for record in request.records:
        builder.append(
            record.timestamp_ms or now_ms,
            record.key if record.HasField("key") else None,
            record.value if record.HasField("value") else None,
            [(h.key, h.value if h.HasField("value") else None) for h in record.headers],
        )
    return builder.build()


def decode_into(
    answer: gateway_pb2.FetchRecordsResponse, data: bytes, offset: int, max_records: int
) -> None:
    """Records at or after ``offset`` from fetched batches (control batches skipped), at most
    ``max_records`` (0: all); sets ``next_offset`` past the last one looked at."""
    for batch in decode_batches(data, allow_truncated_tail=True):
        if batch.is_control:
            answer.next_offset = max(answer.next_offset, batch.next_offset)
            continue
        timestamp_type = int(batch.timestamp_type)
        for record in batch.records:
            if record.offset < offset:
                continue
            if max_records and len(answer.records) >= max_records:
                return
            out = answer.records.add(
                offset=record.offset,
                timestamp_ms=record.timestamp,
                timestamp_type=timestamp_type,
            )
            if record.key is not None:
                out.key = record.key
            if record.value is not None:
                out.value = record.value
            for name, value in record.headers:
                header = out.headers.add(key=name)
                if value is not None:
                    header.value = value
            answer.next_offset = record.offset + 1
        if not max_records or len(answer.records) < max_records:
            answer.next_offset = max(answer.next_offset, batch.next_offset)
