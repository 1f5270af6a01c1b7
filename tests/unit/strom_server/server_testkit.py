"""Test-only helpers of the strom_server tests: a canned StorageNode servicer.

The servicer is a test fixture, not product code: its answers are computed from the request.
ListOffsets looks at the first partition's topic name:

    raise:retriable   NotLeaderOrFollowerError          raise:invalid   InvalidRequestError
    raise:state       OffsetOutOfRangeError             raise:config    ConfigurationError
    raise:bug         ZeroDivisionError                 abort:not-found context.abort(NOT_FOUND)
    log:<event>       logs <event> at info, then answers normally
    anything else     offset = partition * 100 + len(topic), leader_epoch = 7

ProduceStream answers each request with correlation_id echoed and base_offset =
correlation_id * 10; a request whose client_id is ``raise:retriable`` fails the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import grpc
import grpc.aio

from strom.errors import (
    ConfigurationError,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from strom.protocol.v1 import storage_pb2, storage_pb2_grpc
from strom_server.rpc.server import GrpcServer
from strom_server.runtime.logs import get_logger

fixture_log = get_logger("tests.server.servicer")


class CannedStorageServicer(storage_pb2_grpc.StorageNodeServicer):
    """ListOffsets and ProduceStream with answers derived from the request (see module doc)."""

    async def ListOffsets(
        self, request: storage_pb2.ListOffsetsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> storage_pb2.ListOffsetsResponse:
        topic = request.partitions[0].topic if request.partitions else ""
        if topic == "raise:retriable":
            raise NotLeaderOrFollowerError("node 3 leads orders-0")
        if topic == "raise:invalid":
            raise InvalidRequestError("no partitions given")
        if topic == "raise:state":
            raise OffsetOutOfRangeError("offset 99 is past the log end 10")
        if topic == "raise:config":
            raise ConfigurationError("segment.bytes must be positive")
        if topic == "raise:bug":
            _ = 1 / 0
        if topic == "abort:not-found":
            await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
        if topic.startswith("log:"):
            fixture_log.info(topic.removeprefix("log:"))
        return storage_pb2.ListOffsetsResponse(
            partitions=[
                storage_pb2.ListOffsetsPartitionResult(
                    topic=p.topic,
                    partition=p.partition,
                    offset=p.partition * 100 + len(p.topic),
                    leader_epoch=7,
                )
                for p in request.partitions
            ]
        )

    async def ProduceStream(
        self,
        request_iterator: AsyncIterator[storage_pb2.ProduceRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[storage_pb2.ProduceResponse]:
        async for request in request_iterator:
            if request.client_id == "raise:retriable":
                raise NotLeaderOrFollowerError("leadership moved")
            yield storage_pb2.ProduceResponse(
                correlation_id=request.correlation_id,
                partitions=[
                    storage_pb2.ProducePartitionResult(
                        topic=p.topic,
                        partition=p.partition,
                        base_offset=request.correlation_id * 10,
                    )
                    for p in request.partitions
                ],
            )


def list_offsets_request(topic: str, partition: int = 0) -> storage_pb2.ListOffsetsRequest:
    return storage_pb2.ListOffsetsRequest(
        partitions=[storage_pb2.ListOffsetsPartition(topic=topic, partition=partition)]
    )


RunningServer = Callable[..., AbstractAsyncContextManager[tuple[GrpcServer, grpc.aio.Channel]]]
