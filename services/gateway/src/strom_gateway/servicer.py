"""The Gateway gRPC service: the whole public API in one place.

Metadata and administration go to the active controller (``routing``); the data path
(Produce, ProduceStream, Fetch, ListOffsets, DeleteRecords) to partition leaders
(``data_path``, ``produce_stream``), with ProduceRecords/FetchRecords on top of it
(``record_rpcs``); consumer-group RPCs to the group coordinators (``coordinator_router``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from strom.protocol.v1 import controller_pb2, coordinator_pb2, gateway_pb2_grpc, storage_pb2
from strom_gateway.byte_budget import TooLargeError
from strom_gateway.coordinator_router import CoordinatorRouter
from strom_gateway.data_path import DataPath
from strom_gateway.produce_stream import ProduceStreamRelay
from strom_gateway.record_rpcs import RecordRpcs
from strom_gateway.routing import ControllerRouter, NoControllerError
from strom_server.rpc.raw_methods import add_with_raw_methods

__all__ = ["GatewayServicer", "add_to_server"]

#: Methods whose bytes pass through: Produce's request arrives unparsed (the servicer reads it
#: to route, and forwards the original bytes), Fetch's answer may be the leader's bytes.
RAW_REQUESTS = ("Produce",)
RAW_RESPONSES = ("Produce", "Fetch")


def add_to_server(servicer: GatewayServicer, server: Any) -> None:
    """``add_GatewayServicer_to_server`` with the pass-through methods."""
    add_with_raw_methods(
        gateway_pb2_grpc.add_GatewayServicer_to_server,
        servicer,
        server,
        raw_requests=RAW_REQUESTS,
        raw_responses=RAW_RESPONSES,
    )


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    """Thin: each RPC is one call into a router."""

    def __init__(
        self,
        router: ControllerRouter,
        coordinators: CoordinatorRouter,
        data: DataPath,
        *,
        default_timeout_s: float,
    ) -> None:
        self.router = router
        self.coordinators = coordinators
        self.data = data
        self.records = RecordRpcs(data)
        self.default_timeout_s = default_timeout_s

    def _timeout(self, context: grpc.aio.ServicerContext, floor_s: float = 0.0) -> float:
        """The client's deadline, else the default (at least ``floor_s``)."""
        remaining = context.time_remaining()
        if remaining is None:
            return max(self.default_timeout_s, floor_s)
        return min(remaining, 3600.0)

    async def _forward(
        self, method: str, request: Message, context: grpc.aio.ServicerContext
    ) -> Any:
        try:
            return await self.router.call(method, request, self._timeout(context))
        except NoControllerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")

    async def Metadata(self, request: controller_pb2.MetadataRequest, context: Any) -> Any:
        return await self._forward("Metadata", request, context)

    # -- data path ----------------------------------------------------------------------------

    def _deadline(self, context: grpc.aio.ServicerContext, floor_s: float = 0.0) -> float:
        return time.monotonic() + self._timeout(context, floor_s)

    async def _data(self, call: Any, request: Any, context: Any, floor_s: float = 0.0) -> Any:
        try:
            return await call(request, self._deadline(context, floor_s))
        except TooLargeError as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except NoControllerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

    async def Produce(self, raw: bytes, context: Any) -> Any:
        """``raw``: the ProduceRequest's bytes (see ``add_to_server``)."""
        try:
            return await self.data.produce_raw(raw, self._deadline(context))
        except DecodeError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad ProduceRequest: {exc}")
        except TooLargeError as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except NoControllerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

    async def ProduceStream(
        self, request_iterator: AsyncIterator[storage_pb2.ProduceRequest], context: Any
    ) -> AsyncIterator[storage_pb2.ProduceResponse]:
        relay = ProduceStreamRelay(self.data, timeout_s=self.default_timeout_s)
        try:
            async for response in relay.run(request_iterator):
                yield response
        except TooLargeError as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except NoControllerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

    async def Fetch(self, request: storage_pb2.FetchRequest, context: Any) -> Any:
        # A long poll legitimately takes max_wait_ms.
        return await self._data(self.data.fetch, request, context, request.max_wait_ms / 1000)

    async def ListOffsets(self, request: storage_pb2.ListOffsetsRequest, context: Any) -> Any:
        return await self._data(self.data.list_offsets, request, context)

    async def DeleteRecords(self, request: storage_pb2.DeleteRecordsRequest, context: Any) -> Any:
        return await self._data(self.data.delete_records, request, context)

    async def ProduceRecords(self, request: Any, context: Any) -> Any:
        return await self._data(self.records.produce, request, context)

    async def FetchRecords(self, request: Any, context: Any) -> Any:
        return await self._data(self.records.fetch, request, context, request.max_wait_ms / 1000)

    # -- administration -----------------------------------------------------------------------

    async def CreateTopics(self, request: controller_pb2.CreateTopicsRequest, context: Any) -> Any:
        return await self._forward("CreateTopics", request, context)

    async def DeleteTopics(self, request: controller_pb2.DeleteTopicsRequest, context: Any) -> Any:
        return await self._forward("DeleteTopics", request, context)

    async def CreatePartitions(
        self, request: controller_pb2.CreatePartitionsRequest, context: Any
    ) -> Any:
        return await self._forward("CreatePartitions", request, context)

    async def DescribeConfigs(
        self, request: controller_pb2.DescribeConfigsRequest, context: Any
    ) -> Any:
        return await self._forward("DescribeConfigs", request, context)

    async def IncrementalAlterConfigs(
        self, request: controller_pb2.IncrementalAlterConfigsRequest, context: Any
    ) -> Any:
        return await self._forward("IncrementalAlterConfigs", request, context)

    async def ElectLeaders(self, request: controller_pb2.ElectLeadersRequest, context: Any) -> Any:
        return await self._forward("ElectLeaders", request, context)

    async def AlterPartitionReassignments(
        self, request: controller_pb2.AlterPartitionReassignmentsRequest, context: Any
    ) -> Any:
        return await self._forward("AlterPartitionReassignments", request, context)

    async def ListPartitionReassignments(
        self, request: controller_pb2.ListPartitionReassignmentsRequest, context: Any
    ) -> Any:
        return await self._forward("ListPartitionReassignments", request, context)

    async def InitProducerId(
        self, request: controller_pb2.InitProducerIdRequest, context: Any
    ) -> Any:
        return await self._forward("InitProducerId", request, context)

    # -- consumer groups ----------------------------------------------------------------------

    async def _group(self, method: str, request: Any, context: Any, floor_s: float = 0.0) -> Any:
        try:
            return await self.coordinators.call(method, request, self._timeout(context, floor_s))
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")

    async def FindCoordinator(
        self, request: coordinator_pb2.FindCoordinatorRequest, context: Any
    ) -> Any:
        return await self.coordinators.find_coordinator(request, self._timeout(context))

    async def JoinGroup(self, request: coordinator_pb2.JoinGroupRequest, context: Any) -> Any:
        # A join legitimately waits for the rebalance: up to the rebalance timeout.
        floor_s = request.rebalance_timeout_ms / 1000 + 5.0
        return await self._group("JoinGroup", request, context, floor_s)

    async def SyncGroup(self, request: coordinator_pb2.SyncGroupRequest, context: Any) -> Any:
        return await self._group("SyncGroup", request, context)

    async def Heartbeat(self, request: coordinator_pb2.HeartbeatRequest, context: Any) -> Any:
        return await self._group("Heartbeat", request, context)

    async def LeaveGroup(self, request: coordinator_pb2.LeaveGroupRequest, context: Any) -> Any:
        return await self._group("LeaveGroup", request, context)

    async def OffsetCommit(self, request: coordinator_pb2.OffsetCommitRequest, context: Any) -> Any:
        return await self._group("OffsetCommit", request, context)

    async def OffsetFetch(self, request: coordinator_pb2.OffsetFetchRequest, context: Any) -> Any:
        return await self._group("OffsetFetch", request, context)

    async def OffsetDelete(self, request: coordinator_pb2.OffsetDeleteRequest, context: Any) -> Any:
        return await self._group("OffsetDelete", request, context)

    async def ListGroups(self, request: coordinator_pb2.ListGroupsRequest, context: Any) -> Any:
        try:
            return await self.coordinators.list_groups(request, self._timeout(context))
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")

    async def DescribeGroups(
        self, request: coordinator_pb2.DescribeGroupsRequest, context: Any
    ) -> Any:
        try:
            return await self.coordinators.describe_groups(request, self._timeout(context))
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")

    async def DeleteGroups(self, request: coordinator_pb2.DeleteGroupsRequest, context: Any) -> Any:
        try:
            return await self.coordinators.delete_groups(request, self._timeout(context))
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
