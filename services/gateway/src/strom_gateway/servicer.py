"""The Gateway gRPC service: Metadata and administration, forwarded to the active controller.

Produce, fetch and consumer-group RPCs through the gateway arrive with the gateway issue; until
then they answer UNIMPLEMENTED (the generated base class) and clients talk to partition leaders
directly.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.message import Message

from strom.protocol.v1 import controller_pb2, gateway_pb2_grpc
from strom_gateway.routing import ControllerRouter, NoControllerError

__all__ = ["GatewayServicer"]


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    """Thin: each admin RPC is one forwarded call."""

    def __init__(self, router: ControllerRouter, *, default_timeout_s: float) -> None:
        self.router = router
        self.default_timeout_s = default_timeout_s

    async def _forward(
        self, method: str, request: Message, context: grpc.aio.ServicerContext
    ) -> Any:
        remaining = context.time_remaining()
        timeout = self.default_timeout_s if remaining is None else min(remaining, 3600.0)
        try:
            return await self.router.call(method, request, timeout)
        except NoControllerError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")

    async def Metadata(self, request: controller_pb2.MetadataRequest, context: Any) -> Any:
        return await self._forward("Metadata", request, context)

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
