"""The StorageNode gRPC service: translate, delegate to ``ReplicaManager``, translate back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from strom.errors import InvalidRequestError
from strom.protocol.v1 import common_pb2, storage_pb2, storage_pb2_grpc, transaction_pb2
from strom_server.rpc.errors import error_fields
from strom_server.rpc.raw_methods import add_with_raw_methods
from strom_storage import convert
from strom_storage.log.log_dirs import describe_log_dirs
from strom_storage.node import ListOffsetsResult, ReplicaManager

__all__ = ["StorageServicer", "add_to_server"]

#: Produce requests arrive as bytes (their records are written from them, never copied into a
#: message); the fetch methods answer with pre-encoded responses (one copy of the records).
RAW_REQUESTS = ("Produce", "ProduceStream")
RAW_RESPONSES = ("Fetch", "FetchStream")


def add_to_server(servicer: StorageServicer, server: Any) -> None:
    """``add_StorageNodeServicer_to_server`` with the raw methods above."""
    add_with_raw_methods(
        storage_pb2_grpc.add_StorageNodeServicer_to_server,
        servicer,
        server,
        raw_requests=RAW_REQUESTS,
        raw_responses=RAW_RESPONSES,
    )


#: Produce requests one ProduceStream may have in flight before the server stops reading more.
MAX_IN_FLIGHT_PER_STREAM = 32


class StorageServicer(storage_pb2_grpc.StorageNodeServicer):
    """Thin: every RPC converts the request, awaits one domain call and converts the result."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        self._closing = asyncio.Event()

    async def close_streams(self) -> None:
        """End every open stream after its current request (shutdown: followers' fetch streams
        never end by themselves)."""
        self._closing.set()

    async def _until_closing(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """``requests`` until the stream ends or the servicer closes."""
        closing = asyncio.ensure_future(self._closing.wait())
        following: asyncio.Future[Any] | None = None
        try:
            iterator = aiter(requests)
            while not self._closing.is_set():
                following = asyncio.ensure_future(anext(iterator))
                done, _ = await asyncio.wait(
                    {following, closing}, return_when=asyncio.FIRST_COMPLETED
                )
                if following not in done:
                    return
                try:
                    yield following.result()
                except StopAsyncIteration:
                    return
        finally:
            closing.cancel()
            if following is not None:
                # Cancelled if pending; its outcome (the stream's end: StopAsyncIteration)
                # taken if it finished meanwhile, else asyncio logs it as never retrieved.
                following.cancel()
                if following.done() and not following.cancelled():
                    following.exception()

    async def Produce(
        self, raw: bytes, context: grpc.aio.ServicerContext
    ) -> storage_pb2.ProduceResponse:
        """``raw``: the serialized ProduceRequest (see ``add_to_server``)."""
        return await self._produce(convert.produce_call_from_bytes(raw))

    async def _produce(self, call: convert.ProduceCall) -> storage_pb2.ProduceResponse:
        results = await self.replicas.append(
            call.acks, call.timeout_ms, call.entries, call.transactional_id
        )
        return convert.produce_response(call.correlation_id, results)

    async def ProduceStream(
        self,
        request_iterator: AsyncIterator[bytes],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[storage_pb2.ProduceResponse]:
        """``request_iterator``: serialized ProduceRequests (see ``add_to_server``); a malformed
        one ends the stream with INVALID_ARGUMENT after the answers to those before it."""
        # Each request starts (and appends) in arrival order; responses leave in the same order.
        in_flight: asyncio.Queue[asyncio.Task[storage_pb2.ProduceResponse] | None] = asyncio.Queue(
            MAX_IN_FLIGHT_PER_STREAM
        )

        async def read_requests() -> None:
            try:
                async for raw in self._until_closing(request_iterator):
                    call = convert.produce_call_from_bytes(raw)
                    await in_flight.put(asyncio.ensure_future(self._produce(call)))
            finally:
                await in_flight.put(None)

        reader = asyncio.ensure_future(read_requests())
        try:
            while (task := await in_flight.get()) is not None:
                yield await task
            await reader
        finally:
            reader.cancel()
            while not in_flight.empty():
                pending = in_flight.get_nowait()
                if pending is not None:
                    pending.cancel()

    async def Fetch(
        self, request: storage_pb2.FetchRequest, context: grpc.aio.ServicerContext
    ) -> bytes:
        """Answers with the serialized FetchResponse (see ``add_to_server``)."""
        results = await self.replicas.fetch(
            convert.fetch_requests(request),
            replica_id=request.replica_id,
            max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes,
            max_bytes=convert.fetch_max_bytes(request),
            read_committed=request.isolation_level == common_pb2.READ_COMMITTED,
        )
        return convert.encode_fetch_response(request.correlation_id, results)

    async def FetchStream(
        self,
        request_iterator: AsyncIterator[storage_pb2.FetchRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[bytes]:
        async for request in self._until_closing(request_iterator):
            yield await self.Fetch(request, context)

    async def ListOffsets(
        self, request: storage_pb2.ListOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.ListOffsetsResponse:
        response = storage_pb2.ListOffsetsResponse()
        read_committed = request.isolation_level == common_pb2.READ_COMMITTED
        for p in request.partitions:
            try:
                timestamp = convert.list_offsets_timestamp(p)
            except InvalidRequestError as exc:
                result = ListOffsetsResult(p.topic, p.partition, exc)
            else:
                result = self.replicas.list_offset(
                    p.topic,
                    p.partition,
                    timestamp,
                    replica_id=request.replica_id,
                    current_leader_epoch=convert.requested_epoch(p),
                    read_committed=read_committed,
                )
            response.partitions.append(convert.list_offsets_partition(result))
        return response

    async def OffsetForLeaderEpoch(
        self, request: storage_pb2.OffsetForLeaderEpochRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.OffsetForLeaderEpochResponse:
        response = storage_pb2.OffsetForLeaderEpochResponse()
        for p in request.partitions:
            error, epoch, end = self.replicas.end_offset_for_epoch(
                p.topic, p.partition, p.leader_epoch, convert.requested_epoch(p)
            )
            code, message = error_fields(error)
            response.partitions.add(
                topic=p.topic,
                partition=p.partition,
                error_code=code,  # type: ignore[arg-type]
                error_message=message,
                leader_epoch=epoch,
                end_offset=end,
            )
        return response

    async def DeleteRecords(
        self, request: storage_pb2.DeleteRecordsRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.DeleteRecordsResponse:
        response = storage_pb2.DeleteRecordsResponse()
        entries = [(p.topic, p.partition, p.offset) for p in request.partitions]
        answers = await self.replicas.delete_records(entries, request.timeout_ms)
        for p, (error, low) in zip(request.partitions, answers, strict=True):
            code, message = error_fields(error)
            response.partitions.add(
                topic=p.topic,
                partition=p.partition,
                error_code=code,  # type: ignore[arg-type]
                error_message=message,
                low_watermark=low,
            )
        return response

    async def WriteTxnMarkers(
        self, request: transaction_pb2.WriteTxnMarkersRequest, context: grpc.aio.ServicerContext
    ) -> transaction_pb2.WriteTxnMarkersResponse:
        """From a transaction coordinator: a malformed request fails whole (INVALID_ARGUMENT);
        otherwise each partition answers in its marker's result."""
        markers = convert.txn_markers(request)
        results = await self.replicas.write_txn_markers(markers, request.timeout_ms)
        return convert.txn_markers_response(results)

    async def DescribeProducers(
        self, request: transaction_pb2.DescribeProducersRequest, context: grpc.aio.ServicerContext
    ) -> transaction_pb2.DescribeProducersResponse:
        return transaction_pb2.DescribeProducersResponse(
            partitions=[
                convert.describe_producers_result(
                    self.replicas.describe_producers(p.topic, p.partition)
                )
                for p in request.partitions
            ]
        )

    async def DescribeLogDirs(
        self, request: storage_pb2.DescribeLogDirsRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.DescribeLogDirsResponse:
        """This node's directories (``log.log_dirs``); statvfs runs in a worker thread."""
        logs = self.replicas.logs
        reports = await asyncio.to_thread(
            describe_log_dirs, logs.log_dirs, logs.logs(), request.topics
        )
        return convert.log_dirs_response(self.replicas.node_id, reports)
