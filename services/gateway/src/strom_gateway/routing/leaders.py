"""Forward data-path requests to partition leaders: split by leader, call concurrently, merge.

A request naming partitions led by different storage nodes becomes one sub-request per node
(``StorageNode`` takes the very same messages), sent concurrently; the per-partition results
come back in the order of the request. Record batches are copied through as they are: the
gateway never decodes them on this path (design rule 1).

Bytes pass through when they can: a request that goes whole to one leader is sent as the bytes
the client sent (``DataPath`` hands them over), and a fetch answer that goes back whole is
returned as the bytes the leader sent (``Fetch`` is called with no response deserializer; the
gateway parses a copy only to look at the error codes).

A partition whose leader answers NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION (a node
that has not heard of a new topic yet) or LEADER_NOT_AVAILABLE, or whose leader cannot be
reached, marks its topic's metadata stale and is retried, alone, on the new leader after a
short backoff, until the request's deadline; then the client gets the last answer for it and
retries itself. A topic the controller does not know fails at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, cast

import grpc
import structlog
from google.protobuf.message import Message

from strom.cluster import from_rpc_error
from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2, storage_pb2, storage_pb2_grpc, transaction_pb2
from strom.security import ChannelSecurity
from strom_gateway.routing.metadata_cache import MetadataCache
from strom_gateway.routing.wire import LazyFetchResponse
from strom_server.rpc.channels import open_channel, trace_metadata
from strom_server.rpc.raw_methods import serialize

log = structlog.get_logger(__name__)

__all__ = [
    "DELETE_RECORDS",
    "DESCRIBE_PRODUCERS",
    "FETCH",
    "LIST_OFFSETS",
    "OFFSET_FOR_LEADER_EPOCH",
    "PRODUCE",
    "RETRY_CODES",
    "LeaderRouter",
    "PartitionItem",
    "StorageMethod",
]

#: Per-partition answers that mean "ask the controller again and retry on the new leader".
RETRY_CODES = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)
#: gRPC statuses of a leader that is down or restarting.
UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
RETRY_BACKOFF_S = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0)


_SERVICE = "/strom.protocol.v1.StorageNode/"


class PartitionItem(Protocol):
    """The partition entry of any data-path request (ProducePartitionData, FetchPartition...)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


class Answer(Protocol):
    """A leader's answer to a data-path request: one result per partition, in request order."""

    # Any: each answer has its own result type (ProduceResponse: ProducePartitionResult...),
    # which Python's generics cannot tie to the answer's type.
    @property
    def partitions(self) -> Sequence[Any]: ...


Item = TypeVar("Item", bound=PartitionItem)
Result = TypeVar("Result")
Response = TypeVar("Response", bound=Answer)
Response_co = TypeVar("Response_co", bound=Answer, covariant=True)
#: Builds a storage request (a message, or bytes sent as they are) from the partition entries
#: bound for one leader.
Build: TypeAlias = Callable[[list[Item]], Message | bytes]
#: A per-partition result carrying an error: (item, code, message) -> result message.
ErrorResult: TypeAlias = Callable[[Item, common_pb2.ErrorCode, str], Result]
#: (index of an item, error code, message) for items that cannot be sent.
Failure: TypeAlias = tuple[int, common_pb2.ErrorCode, str]


@dataclass(frozen=True, slots=True)
class StorageMethod(Generic[Response_co]):
    """A StorageNode RPC that scatter() calls, and how its answer's bytes are read."""

    name: str
    read: Callable[[bytes], Response_co]
    #: gRPC hands the answer over as bytes, read here (not by gRPC) with ``read``.
    raw: bool = False


PRODUCE = StorageMethod("Produce", storage_pb2.ProduceResponse.FromString)
#: Read raw: the answer is passed on as the leader's bytes when it goes back whole.
FETCH = StorageMethod("Fetch", LazyFetchResponse, raw=True)
LIST_OFFSETS = StorageMethod("ListOffsets", storage_pb2.ListOffsetsResponse.FromString)
DELETE_RECORDS = StorageMethod("DeleteRecords", storage_pb2.DeleteRecordsResponse.FromString)
DESCRIBE_PRODUCERS = StorageMethod(
    "DescribeProducers", transaction_pb2.DescribeProducersResponse.FromString
)
#: For Kafka clients validating their positions after a leader change (the Kafka listener).
OFFSET_FOR_LEADER_EPOCH = StorageMethod(
    "OffsetForLeaderEpoch", storage_pb2.OffsetForLeaderEpochResponse.FromString
)
_METHODS: tuple[StorageMethod[Answer], ...] = (
    PRODUCE,
    FETCH,
    LIST_OFFSETS,
    DELETE_RECORDS,
    DESCRIBE_PRODUCERS,
    OFFSET_FOR_LEADER_EPOCH,
)


class _Leader:
    """One storage node: its channel, generated stub and pass-through callables."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.stub = storage_pb2_grpc.StorageNodeStub(channel)
        self.calls = {
            method.name: channel.unary_unary(
                _SERVICE + method.name,
                request_serializer=serialize,
                response_deserializer=None if method.raw else method.read,
            )
            for method in _METHODS
        }
        #: ProduceStream taking messages or requests already serialized (the Kafka listener's).
        self.produce_stream = channel.stream_stream(
            _SERVICE + "ProduceStream",
            request_serializer=serialize,
            response_deserializer=storage_pb2.ProduceResponse.FromString,
        )


class LeaderRouter:
    """Calls StorageNode RPCs on partition leaders, following leadership changes."""

    def __init__(
        self,
        metadata: MetadataCache,
        *,
        max_message_size: int,
        security: ChannelSecurity | None = None,
    ) -> None:
        """``security``: the channels' (None: the process's, calling as the service)."""
        self.metadata = metadata
        self._security = security
        self._max_message_size = max_message_size
        self._leaders: dict[str, _Leader] = {}

    def stub(self, address: str) -> storage_pb2_grpc.StorageNodeStub:
        """A stub to the storage node at ``address`` (one channel per node, reused; untraced:
        a call made for one request passes ``metadata=trace_metadata()``)."""
        return self._leader(address).stub

    def produce_stream(self, address: str) -> grpc.aio.StreamStreamMultiCallable:
        """ProduceStream to the storage node at ``address``: requests may be messages or their
        serialized bytes (sent as they are)."""
        return self._leader(address).produce_stream

    def _leader(self, address: str) -> _Leader:
        leader = self._leaders.get(address)
        if leader is None:
            channel = open_channel(
                address,
                max_message_size=self._max_message_size,
                options=[
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.min_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", 1000),
                ],
                traced=False,  # the data path: calls carry trace_metadata() instead
                security=self._security,
            )
            leader = self._leaders[address] = _Leader(channel)
        return leader

    async def group(
        self, items: Sequence[PartitionItem], indexes: Sequence[int], deadline: float
    ) -> tuple[dict[str, list[int]], list[Failure], list[Failure]]:
        """Indexes of ``items`` by leader address, plus (index, code, message) failures that
        are final (unknown topic or partition) and retriable (no leader right now).

        A topic or partition the cache does not know is looked up once more unless the cache
        heard of it since this call began: it may have been created (or grown) since."""
        started = time.monotonic()
        await self.metadata.ensure({items[i].topic for i in indexes}, _left(deadline))
        unknown = {
            items[i].topic
            for i in indexes
            if self.metadata.leader(items[i].topic, items[i].partition) is None
        }
        again = {t for t in unknown if not self.metadata.refreshed_since(t, started)}
        if again:
            self.metadata.mark_stale(again)
            await self.metadata.ensure(again, _left(deadline))
        by_leader: dict[str, list[int]] = {}
        final: list[Failure] = []
        retry: list[Failure] = []
        for i in indexes:
            item = items[i]
            leader = self.metadata.leader(item.topic, item.partition)
            if leader is None:
                what = (
                    f"partition {item.partition} of topic '{item.topic}' does not exist"
                    if self.metadata.topic_exists(item.topic)
                    else f"unknown topic '{item.topic}'"
                )
                final.append((i, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, what))
            elif leader.node_id < 0 or not leader.address:
                what = f"{item.topic}-{item.partition} has no leader"
                retry.append((i, ErrorCode.LEADER_NOT_AVAILABLE, what))
            else:
                by_leader.setdefault(leader.address, []).append(i)
        return by_leader, final, retry

    async def scatter(
        self,
        method: StorageMethod[Response],
        items: Sequence[Item],
        build: Build[Item],
        error: ErrorResult[Item, Result],
        deadline: float,
    ) -> tuple[list[Result], Response | None]:
        """Results for ``items`` in order; the second value is the leader's own response
        (for a method read raw, it keeps the bytes as they came) when exactly one leader
        answered for every item on the first attempt, so that it can be passed on as it is."""
        results: list[Result | None] = [None] * len(items)
        pending = list(range(len(items)))
        attempt = 0
        whole: Response | None = None
        while pending:
            by_leader, final, retry_now = await self.group(items, pending, deadline)
            for i, code, message in final:
                results[i] = error(items[i], code, message)
            retry = [i for i, _, _ in retry_now]
            for i, code, message in retry_now:
                results[i] = error(items[i], code, message)
            calls = [
                self._call(method, address, [items[i] for i in indexes], build, deadline)
                for address, indexes in by_leader.items()
            ]
            # One leader (the usual case): awaited directly, no task per call.
            outcomes = [await calls[0]] if len(calls) == 1 else await asyncio.gather(*calls)
            for (address, indexes), answer_or_error in zip(
                by_leader.items(), outcomes, strict=True
            ):
                if isinstance(answer_or_error, grpc.aio.AioRpcError):
                    problem = from_rpc_error(answer_or_error, address)
                    code = getattr(problem, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
                    for i in indexes:
                        results[i] = error(items[i], code, str(problem))
                    if answer_or_error.code() in UNREACHABLE:
                        retry.extend(indexes)
                    continue
                outcome = answer_or_error
                answers = outcome.partitions
                if len(answers) != len(indexes):
                    for i in indexes:
                        message = f"{address} answered {len(answers)} of {len(indexes)} partitions"
                        results[i] = error(items[i], ErrorCode.UNKNOWN_SERVER_ERROR, message)
                    continue
                for i, answer in zip(indexes, answers, strict=True):
                    results[i] = answer
                    if answer.error_code in RETRY_CODES:
                        retry.append(i)
                if attempt == 0 and len(by_leader) == 1 and not final and not retry_now:
                    whole = outcome
            if not retry:
                break
            whole = None
            self.metadata.mark_stale({items[i].topic for i in retry})
            delay = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
            if time.monotonic() + delay >= deadline:
                break  # the client sees the last answer and retries on its own
            attempt += 1
            log.debug("retrying on new leaders", method=method.name, partitions=len(retry))
            await asyncio.sleep(delay)
            pending = sorted(retry)
        # Every slot is filled on the first attempt: by an answer or an error result.
        return cast(list[Result], results), whole

    async def _call(
        self,
        method: StorageMethod[Response],
        address: str,
        items: list[Item],
        build: Build[Item],
        deadline: float,
    ) -> Response | grpc.aio.AioRpcError:
        """One sub-request to one leader: its response; a gRPC failure is returned, not
        raised."""
        call = self._leader(address).calls[method.name]
        try:
            response = await call(build(items), timeout=_left(deadline), metadata=trace_metadata())
        except grpc.aio.AioRpcError as exc:
            if exc.code() in UNREACHABLE:
                self.metadata.mark_stale({item.topic for item in items})
            return exc
        if isinstance(response, bytes):
            return method.read(response)  # read raw: the answer keeps the bytes it came as
        return response

    async def close(self) -> None:
        channels = [leader.channel for leader in self._leaders.values()]
        self._leaders.clear()
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)
