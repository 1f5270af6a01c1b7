"""Produce, Fetch, ListOffsets and DeleteRecords: Kafka's data requests on the gateway's data
path. Record batches pass through as the bytes the client sent or the leader stored.

Produce requests of one connection go through one ``ProduceStreamRelay`` (``ProducePipe``), so
each leader sees them in the connection's order, as an idempotent producer's sequence numbers
need; their answers leave in that order too. The relay alone groups a request's partitions by
leader (and regroups those it retries after a leadership move).

Neither direction copies record batches into protobuf messages (``upstream_wire``): a
Produce's batches go upstream inside ProduceRequests written straight from the request frame's
views (each leader's share, and each retry's; never parsed back), and a Fetch's leaders'
answers are read field by field, their records spliced into Kafka's response as views of the
leaders' bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Protocol, TypeVar, cast

from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2, storage_pb2
from strom_gateway.kafka.backend import ROUTER_ERRORS, Backend, CallFailed, failure, kafka_code
from strom_gateway.kafka.listener import Connection
from strom_gateway.kafka.protocol.frames import Request
from strom_gateway.kafka.security import refused_among_unknown
from strom_gateway.kafka.upstream_wire import (
    FetchAnswer,
    ProduceRequestWriter,
    fetch_answer,
    fetch_answer_of,
)
from strom_gateway.routing.data_path import (
    DataPath,
    delete_records_error,
    fetch_error,
    list_offsets_error,
    offset_for_leader_epoch_error,
    produce_error,
)
from strom_gateway.routing.leaders import ErrorResult, PartitionItem
from strom_gateway.routing.produce_stream import ProduceStreamRelay, RawProduce
from strom_gateway.routing.wire import PartitionRef, resolve, serialized

__all__ = [
    "ProducePipe",
    "delete_records",
    "fetch",
    "list_offsets",
    "offset_for_leader_epoch",
    "produce",
]

T = TypeVar("T")
Item = TypeVar("Item", bound=PartitionItem)

#: Kafka's special ListOffsets timestamps.
_SPECS = {-1: common_pb2.LATEST, -2: common_pb2.EARLIEST, -3: common_pb2.MAX_TIMESTAMP}


def by_topic(
    results: Iterable[T],
    topic: Callable[[T], str],
    entry: Callable[[T], Any],
    name_key: str = "name",
    list_key: str = "partitions",
) -> list[dict[str, Any]]:
    """Per-partition results grouped by topic, in first-seen order (``entry`` makes each
    partition's item: a dict, or a bare partition number)."""
    topics: dict[str, list[Any]] = {}
    for result in results:
        topics.setdefault(topic(result), []).append(entry(result))
    return [{name_key: name, list_key: entries} for name, entries in topics.items()]


def all_failed(exc: BaseException, items: Iterable[Item], error: ErrorResult[Item, T]) -> list[T]:
    """``error``'s result for every item of a request that failed as a whole (``exc``, from
    the data path): no leader answered, so NOT_LEADER_OR_FOLLOWER unless ``exc`` says more."""
    failed = (
        CallFailed(ErrorCode.NETWORK_EXCEPTION, str(exc))
        if isinstance(exc, ConnectionError)
        else failure(exc, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    )
    code = cast(common_pb2.ErrorCode, failed.code)
    return [error(item, code, failed.message) for item in items]


class ProducePipe:
    """One connection's produce requests through one ProduceStreamRelay, answers in order."""

    def __init__(self, data: DataPath, timeout_s: float) -> None:
        self._requests: asyncio.Queue[RawProduce | None] = asyncio.Queue()
        self._waiting: deque[asyncio.Future[storage_pb2.ProduceResponse]] = deque()
        self._relay = ProduceStreamRelay(data, timeout_s=timeout_s)
        self.broken = False
        self._task = asyncio.ensure_future(self._run())

    async def _incoming(self) -> AsyncIterator[RawProduce]:
        while (request := await self._requests.get()) is not None:
            yield request

    async def _run(self) -> None:
        problem: BaseException = ConnectionError("the produce relay ended")
        try:
            async for response in self._relay.run(self._incoming()):
                if self._waiting:
                    self._waiting.popleft().set_result(response)
        except ROUTER_ERRORS as exc:
            problem = exc
        except asyncio.CancelledError:
            problem = ConnectionError("the connection closed")
        self.broken = True
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(problem)

    def submit(self, request: RawProduce) -> asyncio.Future[storage_pb2.ProduceResponse]:
        future: asyncio.Future[storage_pb2.ProduceResponse]
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        self._requests.put_nowait(request)
        return future

    async def close(self) -> None:
        self._requests.put_nowait(None)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), 1.0)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def _pipe(backend: Backend, connection: Connection) -> ProducePipe:
    pipe: ProducePipe | None = connection.state.get("produce")
    if pipe is None or pipe.broken:
        pipe = connection.state["produce"] = ProducePipe(backend.data, backend.timeout_s)
        connection.closers.append(pipe.close)
    return pipe


async def produce(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any] | None:
    """The request through the connection's relay, which groups its partitions by leader and
    writes each leader's storage ProduceRequest from the frame's record views."""
    body = request.body
    acks = body["acks"]
    entries = [
        (topic["name"], p["index"], p["records"])
        for topic in body["topic_data"]
        for p in topic["partition_data"]
    ]
    writer = ProduceRequestWriter(
        acks=acks,
        timeout_ms=body["timeout_ms"],
        client_id=request.client_id or "",
        transactional_id=body["transactional_id"] or "",
        entries=entries,
    )
    refs = [PartitionRef(topic, partition, n) for n, (topic, partition, _) in enumerate(entries)]
    future = _pipe(backend, connection).submit(RawProduce(refs, writer.write, writer.size))
    results: list[storage_pb2.ProducePartitionResult]
    try:
        results = list((await future).partitions)  # one per partition, in order
    except (*ROUTER_ERRORS, ConnectionError) as exc:
        results = all_failed(exc, refs, produce_error)
    await _explain_refusals(backend, connection, results)
    if acks == 0:
        return None

    def entry(r: storage_pb2.ProducePartitionResult) -> dict[str, Any]:
        return {
            "index": r.partition,
            "error_code": kafka_code(r.error_code),
            "base_offset": r.base_offset,
            "log_append_time_ms": r.log_append_time_ms,
            "log_start_offset": r.log_start_offset,
            "record_errors": [
                {"batch_index": e.batch_index, "batch_index_error_message": e.message}
                for e in r.record_errors
            ],
            "error_message": r.error_message or None,
        }

    return {
        "responses": by_topic(
            results,
            lambda r: r.topic,
            entry,
            list_key="partition_responses",
        ),
        "throttle_time_ms": 0,
    }


async def fetch(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    body = request.body
    read_committed = body["isolation_level"] == 1
    partitions = []
    for topic in body["topics"]:
        for p in topic["partitions"]:
            item = storage_pb2.FetchPartition(
                topic=topic["topic"],
                partition=p["partition"],
                fetch_offset=p["fetch_offset"],
                partition_max_bytes=p["partition_max_bytes"],
            )
            if p["current_leader_epoch"] >= 0:
                item.current_leader_epoch = p["current_leader_epoch"]
            partitions.append(item)
    forwarded = storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=max(body["max_wait_ms"], 0),
        min_bytes=max(body["min_bytes"], 0),
        max_bytes=max(body["max_bytes"], 0),
        isolation_level=common_pb2.READ_COMMITTED
        if read_committed
        else common_pb2.READ_UNCOMMITTED,
        partitions=partitions,
        rack_id=body["rack_id"],
        client_id=request.client_id or "",
    )
    top_error = 0
    wait_s = forwarded.max_wait_ms / 1000
    results = await _fetch_answers(backend, forwarded, wait_s)
    await _explain_refusals(backend, connection, results)

    def entry(r: FetchAnswer) -> dict[str, Any]:
        aborted = (
            [{"producer_id": pid, "first_offset": first} for pid, first in r.aborted]
            if read_committed else None
        )  # fmt: skip
        return {
            "partition_index": r.partition,
            "error_code": kafka_code(r.error_code),
            "high_watermark": r.high_watermark,
            "last_stable_offset": r.last_stable_offset,
            "log_start_offset": r.log_start_offset,
            "aborted_transactions": aborted,
            "preferred_read_replica": -1,
            "records": r.records,
        }

    return {
        "throttle_time_ms": 0,
        "error_code": top_error,
        "session_id": 0,
        "responses": by_topic(results, lambda r: r.topic, entry, name_key="topic"),
    }


class _Answered(Protocol):
    topic: str
    error_code: common_pb2.ErrorCode
    error_message: str


async def _explain_refusals(
    backend: Backend, connection: Connection, results: Iterable[_Answered | None]
) -> None:
    """Partitions answered UNKNOWN_TOPIC_OR_PARTITION on a secured listener whose topic the
    user may not describe become TOPIC_AUTHORIZATION_FAILED, as Kafka answers them (Produce,
    Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords)."""
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    found = [r for r in results if r is not None and r.error_code == unknown]
    if not found:
        return
    refused = await refused_among_unknown(backend, connection, (r.topic for r in found))
    for result in found:
        if result.topic in refused:
            result.error_code = common_pb2.TOPIC_AUTHORIZATION_FAILED
            result.error_message = f"not authorized to access topic '{result.topic}'"


async def _fetch_answers(
    backend: Backend, forwarded: storage_pb2.FetchRequest, wait_s: float
) -> list[FetchAnswer]:
    """Each partition's answer, read from the leaders' bytes (records: views of them)."""
    try:
        results = await backend.data.fetch_unresolved(forwarded, backend.deadline(wait_s))
    except ROUTER_ERRORS as exc:
        return [fetch_answer_of(r) for r in all_failed(exc, forwarded.partitions, fetch_error)]
    answers = []
    for result in results:
        entry = serialized(result)
        if entry is not None:
            with contextlib.suppress(ValueError):  # if not, the parser names the problem
                answers.append(fetch_answer(entry))
                continue
        answers.append(fetch_answer_of(resolve(result)))
    return answers


async def list_offsets(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    partitions = []
    for topic in body["topics"]:
        for p in topic["partitions"]:
            ts = p["timestamp"]
            item = storage_pb2.ListOffsetsPartition(
                topic=topic["name"],
                partition=p["partition_index"],
                spec=_SPECS.get(ts, common_pb2.TIMESTAMP),
                timestamp_ms=max(ts, 0),
            )
            if p["current_leader_epoch"] >= 0:
                item.current_leader_epoch = p["current_leader_epoch"]
            partitions.append(item)
    forwarded = storage_pb2.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=common_pb2.READ_COMMITTED
        if body["isolation_level"] == 1
        else common_pb2.READ_UNCOMMITTED,
        partitions=partitions,
    )
    try:
        answer = await backend.data.list_offsets(forwarded, backend.deadline())
        results = list(answer.partitions)
    except ROUTER_ERRORS as exc:
        results = all_failed(exc, partitions, list_offsets_error)
    await _explain_refusals(backend, connection, results)

    def entry(r: storage_pb2.ListOffsetsPartitionResult) -> dict[str, Any]:
        return {
            "partition_index": r.partition,
            "error_code": kafka_code(r.error_code),
            "timestamp": r.timestamp_ms,
            "offset": r.offset,
            "leader_epoch": r.leader_epoch,
        }

    return {"throttle_time_ms": 0, "topics": by_topic(results, lambda r: r.topic, entry)}


async def delete_records(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    partitions = [
        storage_pb2.DeleteRecordsPartition(
            topic=topic["name"], partition=p["partition_index"], offset=p["offset"]
        )
        for topic in body["topics"]
        for p in topic["partitions"]
    ]
    forwarded = storage_pb2.DeleteRecordsRequest(
        partitions=partitions, timeout_ms=body["timeout_ms"]
    )
    try:
        answer = await backend.data.delete_records(forwarded, backend.deadline())
        results = list(answer.partitions)
    except ROUTER_ERRORS as exc:
        results = all_failed(exc, partitions, delete_records_error)
    await _explain_refusals(backend, connection, results)

    def entry(r: storage_pb2.DeleteRecordsResult) -> dict[str, Any]:
        return {
            "partition_index": r.partition,
            "low_watermark": r.low_watermark,
            "error_code": kafka_code(r.error_code),
        }

    return {"throttle_time_ms": 0, "topics": by_topic(results, lambda r: r.topic, entry)}


async def offset_for_leader_epoch(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    """Where a leader epoch ends, from the partition's leader (replica id -1: a consumer's
    question, whatever the client sent)."""
    partitions = []
    for topic in request.body["topics"]:
        for p in topic["partitions"]:
            item = storage_pb2.OffsetForLeaderEpochPartition(
                topic=topic["topic"], partition=p["partition"], leader_epoch=p["leader_epoch"]
            )
            if p["current_leader_epoch"] >= 0:
                item.current_leader_epoch = p["current_leader_epoch"]
            partitions.append(item)

    forwarded = storage_pb2.OffsetForLeaderEpochRequest(replica_id=-1, partitions=partitions)
    try:
        answer = await backend.data.offset_for_leader_epoch(forwarded, backend.deadline())
        results = list(answer.partitions)
    except ROUTER_ERRORS as exc:
        results = all_failed(exc, partitions, offset_for_leader_epoch_error)
    await _explain_refusals(backend, connection, results)

    def entry(r: storage_pb2.OffsetForLeaderEpochResult) -> dict[str, Any]:
        return {
            "error_code": kafka_code(r.error_code),
            "partition": r.partition,
            "leader_epoch": r.leader_epoch,
            "end_offset": r.end_offset,
        }

    return {
        "throttle_time_ms": 0,
        "topics": by_topic(results, lambda r: r.topic, entry, name_key="topic"),
    }
