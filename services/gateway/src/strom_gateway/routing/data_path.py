"""Produce, Fetch, ListOffsets, DeleteRecords, DescribeProducers and OffsetForLeaderEpoch (the
Kafka listener's) through the gateway.

Each takes and returns ``StorageNode``'s own messages: ``LeaderRouter`` splits the request by
partition leader and merges the answers; ``ByteBudget`` bounds the record bytes in flight (a
produce holds its request's size, a fetch the most its response may carry) so that a busy
gateway makes callers wait instead of growing without limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from google.protobuf.message import Message

from strom.protocol.v1 import common_pb2, storage_pb2, transaction_pb2
from strom_gateway.routing.byte_budget import ByteBudget
from strom_gateway.routing.leaders import (
    DELETE_RECORDS,
    DESCRIBE_PRODUCERS,
    FETCH,
    LIST_OFFSETS,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    LeaderRouter,
    PartitionItem,
)
from strom_gateway.routing.wire import (
    FetchResult,
    LazyFetchResponse,
    PartitionRef,
    produce_partitions,
    resolve,
)

__all__ = ["DataPath", "fetch_reservation"]

#: A storage node's limits when a fetch leaves them 0 (Kafka's defaults).
DEFAULT_FETCH_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024


def fetch_reservation(request: storage_pb2.FetchRequest, capacity: int) -> int:
    """Bytes a fetch's response may carry (never more than the whole budget: a fetch always
    gets at least one batch, so it must never wait for more than everything)."""
    per_partition = sum(
        p.partition_max_bytes or DEFAULT_PARTITION_MAX_BYTES for p in request.partitions
    )
    overall = request.max_bytes or DEFAULT_FETCH_MAX_BYTES
    return max(1, min(per_partition, overall, capacity))


Request = TypeVar("Request", bound=Message)
Entry = TypeVar("Entry")


def _whole_or(
    request: Request, entries: Sequence[Entry], build: Callable[[list[Entry]], Request]
) -> Callable[[list[Entry]], Request]:
    """``build`` for a leader's share of ``entries`` (the request's partitions), but the
    request itself when the share is all of it (the usual single-leader case: no copy of the
    record bytes)."""

    def share(items: list[Entry]) -> Request:
        if len(items) == len(entries):
            return request
        return build(items)

    return share


class DataPath:
    """The gateway's data RPCs over a ``LeaderRouter`` and a ``ByteBudget``."""

    def __init__(self, router: LeaderRouter, budget: ByteBudget) -> None:
        self.router = router
        self.budget = budget

    async def produce_raw(self, raw: bytes, deadline: float) -> storage_pb2.ProduceResponse:
        """A serialized ProduceRequest: routed from its small fields and, when one leader
        takes it all, forwarded as these very bytes (parsed only to split it)."""
        try:
            items = produce_partitions(raw)
        except ValueError:
            return await self.produce(storage_pb2.ProduceRequest.FromString(raw), deadline)
        parsed: list[storage_pb2.ProduceRequest] = []

        def request() -> storage_pb2.ProduceRequest:
            if not parsed:
                parsed.append(storage_pb2.ProduceRequest.FromString(raw))
            return parsed[0]

        def build(share: list[PartitionRef]) -> storage_pb2.ProduceRequest | bytes:
            if len(share) == len(items):
                return raw
            full = request()
            return produce_share(full, [full.partitions[item.index] for item in share])

        async with self.budget.hold(len(raw)):
            results, whole = await self.router.scatter(
                PRODUCE, items, build, produce_error, deadline
            )
        if whole is not None:
            return whole
        return storage_pb2.ProduceResponse(
            correlation_id=request().correlation_id, partitions=results
        )

    async def produce(
        self, request: storage_pb2.ProduceRequest, deadline: float
    ) -> storage_pb2.ProduceResponse:
        build = _whole_or(request, request.partitions, lambda parts: produce_share(request, parts))
        async with self.budget.hold(request.ByteSize()):
            results, whole = await self.router.scatter(
                PRODUCE, request.partitions, build, produce_error, deadline
            )
        if whole is not None:
            return whole
        return storage_pb2.ProduceResponse(
            correlation_id=request.correlation_id, partitions=results
        )

    async def produce_partitions(
        self,
        items: Sequence[PartitionItem],
        indexes: Sequence[int],
        share: Callable[[list[int]], storage_pb2.ProduceRequest | bytes],
        deadline: float,
    ) -> list[storage_pb2.ProducePartitionResult]:
        """The answers for the partitions ``indexes`` of a produce request whose partitions are
        ``items``, each leader sent ``share(its indexes)``; for a caller that already holds the
        request's bytes (a relay retrying part of a request it has grouped)."""
        refs = [PartitionRef(items[i].topic, items[i].partition, i) for i in indexes]
        results, _ = await self.router.scatter(
            PRODUCE, refs, lambda part: share([r.index for r in part]), produce_error, deadline
        )
        return results

    async def fetch(
        self, request: storage_pb2.FetchRequest, deadline: float
    ) -> storage_pb2.FetchResponse | bytes:
        """The merged FetchResponse, or the leader's serialized one as it came (one leader,
        no retries): the servicer sends bytes on untouched."""
        results, whole = await self._fetch(request, deadline)
        if whole is not None:
            return whole.raw
        return storage_pb2.FetchResponse(
            correlation_id=request.correlation_id, partitions=[resolve(r) for r in results]
        )

    async def fetch_results(
        self, request: storage_pb2.FetchRequest, deadline: float
    ) -> list[storage_pb2.FetchPartitionResult]:
        """The per-partition results of a fetch, in request order."""
        return [resolve(r) for r in (await self._fetch(request, deadline))[0]]

    async def fetch_unresolved(
        self, request: storage_pb2.FetchRequest, deadline: float
    ) -> list[FetchResult]:
        """``fetch_results`` with the leaders' results as they came (read lazily: see
        ``wire``)."""
        return (await self._fetch(request, deadline))[0]

    async def _fetch(
        self, request: storage_pb2.FetchRequest, deadline: float
    ) -> tuple[list[FetchResult], LazyFetchResponse | None]:
        async with self.budget.hold(fetch_reservation(request, self.budget.capacity)):
            build = _whole_or(
                request,
                request.partitions,
                lambda parts: storage_pb2.FetchRequest(
                    replica_id=request.replica_id,
                    max_wait_ms=request.max_wait_ms,
                    min_bytes=request.min_bytes,
                    max_bytes=request.max_bytes,
                    isolation_level=request.isolation_level,
                    partitions=parts,
                    correlation_id=request.correlation_id,
                    rack_id=request.rack_id,
                    client_id=request.client_id,
                ),
            )
            return await self.router.scatter(
                FETCH, request.partitions, build, fetch_error, deadline
            )

    async def list_offsets(
        self, request: storage_pb2.ListOffsetsRequest, deadline: float
    ) -> storage_pb2.ListOffsetsResponse:
        build = _whole_or(
            request,
            request.partitions,
            lambda parts: storage_pb2.ListOffsetsRequest(
                replica_id=request.replica_id,
                isolation_level=request.isolation_level,
                partitions=parts,
            ),
        )
        results, whole = await self.router.scatter(
            LIST_OFFSETS, request.partitions, build, list_offsets_error, deadline
        )
        if whole is not None:
            return whole
        return storage_pb2.ListOffsetsResponse(partitions=results)

    async def delete_records(
        self, request: storage_pb2.DeleteRecordsRequest, deadline: float
    ) -> storage_pb2.DeleteRecordsResponse:
        build = _whole_or(
            request,
            request.partitions,
            lambda parts: storage_pb2.DeleteRecordsRequest(
                partitions=parts, timeout_ms=request.timeout_ms
            ),
        )
        results, whole = await self.router.scatter(
            DELETE_RECORDS, request.partitions, build, delete_records_error, deadline
        )
        if whole is not None:
            return whole
        return storage_pb2.DeleteRecordsResponse(partitions=results)

    async def describe_producers(
        self, request: transaction_pb2.DescribeProducersRequest, deadline: float
    ) -> transaction_pb2.DescribeProducersResponse:
        """Each partition's active producers, as its leader knows them."""
        build = _whole_or(
            request,
            request.partitions,
            lambda parts: transaction_pb2.DescribeProducersRequest(partitions=parts),
        )
        results, whole = await self.router.scatter(
            DESCRIBE_PRODUCERS, request.partitions, build, describe_producers_error, deadline
        )
        if whole is not None:
            return whole
        return transaction_pb2.DescribeProducersResponse(partitions=results)

    async def offset_for_leader_epoch(
        self, request: storage_pb2.OffsetForLeaderEpochRequest, deadline: float
    ) -> storage_pb2.OffsetForLeaderEpochResponse:
        """Where each partition's asked leader epoch ends, as its leader knows it."""
        build = _whole_or(
            request,
            request.partitions,
            lambda parts: storage_pb2.OffsetForLeaderEpochRequest(
                replica_id=request.replica_id, partitions=parts
            ),
        )
        results, whole = await self.router.scatter(
            OFFSET_FOR_LEADER_EPOCH,
            request.partitions,
            build,
            offset_for_leader_epoch_error,
            deadline,
        )
        if whole is not None:
            return whole
        return storage_pb2.OffsetForLeaderEpochResponse(partitions=results)


def produce_share(
    request: storage_pb2.ProduceRequest, partitions: Iterable[storage_pb2.ProducePartitionData]
) -> storage_pb2.ProduceRequest:
    """``request`` with only ``partitions`` (a leader's share of it, or those to retry)."""
    return storage_pb2.ProduceRequest(
        acks=request.acks,
        timeout_ms=request.timeout_ms,
        partitions=partitions,
        correlation_id=request.correlation_id,
        client_id=request.client_id,
        transactional_id=request.transactional_id,
    )


def produce_error(
    item: PartitionItem, code: common_pb2.ErrorCode, message: str
) -> storage_pb2.ProducePartitionResult:
    return storage_pb2.ProducePartitionResult(
        topic=item.topic,
        partition=item.partition,
        error_code=code,
        error_message=message,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
    )


def fetch_error(
    item: PartitionItem, code: common_pb2.ErrorCode, message: str
) -> storage_pb2.FetchPartitionResult:
    return storage_pb2.FetchPartitionResult(
        topic=item.topic,
        partition=item.partition,
        error_code=code,
        error_message=message,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        preferred_read_replica=-1,
    )


def list_offsets_error(
    item: PartitionItem, code: common_pb2.ErrorCode, message: str
) -> storage_pb2.ListOffsetsPartitionResult:
    return storage_pb2.ListOffsetsPartitionResult(
        topic=item.topic,
        partition=item.partition,
        error_code=code,
        error_message=message,
        timestamp_ms=-1,
        offset=-1,
        leader_epoch=-1,
    )


def delete_records_error(
    item: PartitionItem, code: common_pb2.ErrorCode, message: str
) -> storage_pb2.DeleteRecordsResult:
    return storage_pb2.DeleteRecordsResult(
        topic=item.topic,
        partition=item.partition,
        error_code=code,
        error_message=message,
        low_watermark=-1,
    )


def describe_producers_error(
    item: PartitionItem, code: common_pb2.ErrorCode, message: str
) -> transaction_pb2.DescribeProducersResult:
    return transaction_pb2.DescribeProducersResult(
        topic=item.topic, partition=item.partition, error_code=code, error_message=message
    )


def offset_for_leader_epoch_error(
    item: PartitionItem, code: common_pb2.ErrorCode, message: str
) -> storage_pb2.OffsetForLeaderEpochResult:
    return storage_pb2.OffsetForLeaderEpochResult(
        topic=item.topic,
        partition=item.partition,
        error_code=code,
        error_message=message,
        leader_epoch=-1,
        end_offset=-1,
    )


def deadline_in(timeout_s: float) -> float:
    return time.monotonic() + timeout_s
