"""The Gateway gRPC service: the whole public API in one place.

Metadata and administration go to the active controller (``routing``); the data path
(Produce, ProduceStream, Fetch, ListOffsets, DeleteRecords) to partition leaders
(``data_path``, ``produce_stream``), with ProduceRecords/FetchRecords on top of it
(``record_rpcs``); consumer-group and transaction RPCs to the coordinators
(``coordinator_router``), except InitProducerId without a transactional id or with a reserved
``__strom_`` one (the controller's); DescribeProducers to partition leaders (``data_path``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import NoReturn, TypeVar, cast

import grpc
from google.protobuf.message import DecodeError, Message

from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    coordinator_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
    storage_pb2,
    transaction_pb2,
)
from strom_gateway.byte_budget import TooLargeError
from strom_gateway.coordinator_router import (
    CoordinatorRouter,
    GroupRequest,
    TxnRequest,
    is_controller_producer_id,
)
from strom_gateway.data_path import DataPath
from strom_gateway.log_dirs import LogDirsFanOut
from strom_gateway.produce_stream import ProduceStreamRelay
from strom_gateway.record_rpcs import RecordRpcs
from strom_gateway.routing import ControllerRouter, NoControllerError
from strom_server.rpc.raw_methods import add_with_raw_methods
from strom_server.rpc.server import ServicerContext as Ctx

__all__ = ["GatewayServicer", "add_to_server"]

#: Methods whose bytes pass through: Produce's request arrives unparsed (the servicer reads it
#: to route, and forwards the original bytes), Fetch's answer may be the leader's bytes.
RAW_REQUESTS = ("Produce",)
RAW_RESPONSES = ("Produce", "Fetch")

Request = TypeVar("Request")
Response = TypeVar("Response")
Answer = TypeVar("Answer", bound=Message)


async def _abort(context: Ctx, code: grpc.StatusCode, details: str) -> NoReturn:
    """``context.abort``, which always raises (grpc ships no types that say so)."""
    await context.abort(code, details)
    raise AssertionError("ServicerContext.abort returned")  # unreachable


def add_to_server(servicer: GatewayServicer, server: grpc.aio.Server) -> None:
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
        log_dirs: LogDirsFanOut | None = None,
    ) -> None:
        self.router = router
        self.coordinators = coordinators
        self.data = data
        self.log_dirs = log_dirs
        self.records = RecordRpcs(data)
        self.default_timeout_s = default_timeout_s

    def _timeout(self, context: Ctx, floor_s: float = 0.0) -> float:
        """The client's deadline, else the default (at least ``floor_s``)."""
        remaining: float | None = context.time_remaining()
        if remaining is None:
            return max(self.default_timeout_s, floor_s)
        return min(remaining, 3600.0)

    async def _forward(
        self, method: str, request: Message, answer: type[Answer], context: Ctx
    ) -> Answer:
        """``Controller.<method>``; ``answer``, its response type, is for the type checker
        only (the generated stubs carry no types)."""
        try:
            response = await self.router.call(method, request, self._timeout(context))
        except NoControllerError as exc:
            await _abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))
        except grpc.aio.AioRpcError as exc:
            await _abort(context, exc.code(), exc.details() or "")
        return cast(Answer, response)

    async def Metadata(
        self, request: controller_pb2.MetadataRequest, context: Ctx
    ) -> controller_pb2.MetadataResponse:
        response = await self._forward(
            "Metadata", request, controller_pb2.MetadataResponse, context
        )
        response.controllers.extend(
            common_pb2.Node(node_id=c.node_id, host=c.host, port=c.port)
            for c in self.router.locator.members
        )
        return response

    # -- data path ----------------------------------------------------------------------------

    def _deadline(self, context: Ctx, floor_s: float = 0.0) -> float:
        return time.monotonic() + self._timeout(context, floor_s)

    async def _data(
        self,
        call: Callable[[Request, float], Awaitable[Response]],
        request: Request,
        context: Ctx,
        floor_s: float = 0.0,
    ) -> Response:
        try:
            return await call(request, self._deadline(context, floor_s))
        except TooLargeError as exc:
            await _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except NoControllerError as exc:
            await _abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))

    async def Produce(self, raw: bytes, context: Ctx) -> storage_pb2.ProduceResponse:
        """``raw``: the ProduceRequest's bytes (see ``add_to_server``)."""
        try:
            return await self.data.produce_raw(raw, self._deadline(context))
        except DecodeError as exc:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"bad ProduceRequest: {exc}")
        except TooLargeError as exc:
            await _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except NoControllerError as exc:
            await _abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))

    async def ProduceStream(
        self, request_iterator: AsyncIterator[storage_pb2.ProduceRequest], context: Ctx
    ) -> AsyncIterator[storage_pb2.ProduceResponse]:
        relay = ProduceStreamRelay(self.data, timeout_s=self.default_timeout_s)
        try:
            async for response in relay.run(request_iterator):
                yield response
        except TooLargeError as exc:
            await _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except NoControllerError as exc:
            await _abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))

    async def Fetch(
        self, request: storage_pb2.FetchRequest, context: Ctx
    ) -> storage_pb2.FetchResponse | bytes:
        # A long poll legitimately takes max_wait_ms.
        return await self._data(self.data.fetch, request, context, request.max_wait_ms / 1000)

    async def ListOffsets(
        self, request: storage_pb2.ListOffsetsRequest, context: Ctx
    ) -> storage_pb2.ListOffsetsResponse:
        return await self._data(self.data.list_offsets, request, context)

    async def DeleteRecords(
        self, request: storage_pb2.DeleteRecordsRequest, context: Ctx
    ) -> storage_pb2.DeleteRecordsResponse:
        return await self._data(self.data.delete_records, request, context)

    async def ProduceRecords(
        self, request: gateway_pb2.ProduceRecordsRequest, context: Ctx
    ) -> gateway_pb2.ProduceRecordsResponse:
        return await self._data(self.records.produce, request, context)

    async def FetchRecords(
        self, request: gateway_pb2.FetchRecordsRequest, context: Ctx
    ) -> gateway_pb2.FetchRecordsResponse:
        return await self._data(self.records.fetch, request, context, request.max_wait_ms / 1000)

    # -- administration -----------------------------------------------------------------------

    async def CreateTopics(
        self, request: controller_pb2.CreateTopicsRequest, context: Ctx
    ) -> controller_pb2.CreateTopicsResponse:
        return await self._forward(
            "CreateTopics", request, controller_pb2.CreateTopicsResponse, context
        )

    async def DeleteTopics(
        self, request: controller_pb2.DeleteTopicsRequest, context: Ctx
    ) -> controller_pb2.DeleteTopicsResponse:
        return await self._forward(
            "DeleteTopics", request, controller_pb2.DeleteTopicsResponse, context
        )

    async def CreatePartitions(
        self, request: controller_pb2.CreatePartitionsRequest, context: Ctx
    ) -> controller_pb2.CreatePartitionsResponse:
        return await self._forward(
            "CreatePartitions", request, controller_pb2.CreatePartitionsResponse, context
        )

    async def DescribeConfigs(
        self, request: controller_pb2.DescribeConfigsRequest, context: Ctx
    ) -> controller_pb2.DescribeConfigsResponse:
        return await self._forward(
            "DescribeConfigs", request, controller_pb2.DescribeConfigsResponse, context
        )

    async def IncrementalAlterConfigs(
        self, request: controller_pb2.IncrementalAlterConfigsRequest, context: Ctx
    ) -> controller_pb2.IncrementalAlterConfigsResponse:
        return await self._forward(
            "IncrementalAlterConfigs",
            request,
            controller_pb2.IncrementalAlterConfigsResponse,
            context,
        )

    async def ElectLeaders(
        self, request: controller_pb2.ElectLeadersRequest, context: Ctx
    ) -> controller_pb2.ElectLeadersResponse:
        return await self._forward(
            "ElectLeaders", request, controller_pb2.ElectLeadersResponse, context
        )

    async def AlterPartitionReassignments(
        self, request: controller_pb2.AlterPartitionReassignmentsRequest, context: Ctx
    ) -> controller_pb2.AlterPartitionReassignmentsResponse:
        return await self._forward(
            "AlterPartitionReassignments",
            request,
            controller_pb2.AlterPartitionReassignmentsResponse,
            context,
        )

    async def ListPartitionReassignments(
        self, request: controller_pb2.ListPartitionReassignmentsRequest, context: Ctx
    ) -> controller_pb2.ListPartitionReassignmentsResponse:
        return await self._forward(
            "ListPartitionReassignments",
            request,
            controller_pb2.ListPartitionReassignmentsResponse,
            context,
        )

    async def InitProducerId(
        self, request: controller_pb2.InitProducerIdRequest, context: Ctx
    ) -> controller_pb2.InitProducerIdResponse:
        answer = controller_pb2.InitProducerIdResponse
        if is_controller_producer_id(request.transactional_id):
            return await self._forward("InitProducerId", request, answer, context)
        return await self._txn("InitProducerId", request, answer, context)

    # -- consumer groups ----------------------------------------------------------------------

    async def _group(
        self,
        method: str,
        request: GroupRequest,
        answer: type[Answer],
        context: Ctx,
        floor_s: float = 0.0,
    ) -> Answer:
        """``GroupCoordinator.<method>`` on the group's coordinator; ``answer``, its response
        type, is for the type checker only (the generated stubs carry no types)."""
        response = await self._routed(
            lambda t: self.coordinators.call(method, request, t), context, floor_s
        )
        return cast(Answer, response)

    async def _txn(
        self, method: str, request: TxnRequest, answer: type[Answer], context: Ctx
    ) -> Answer:
        """``TransactionCoordinator.<method>`` on the transactional id's coordinator."""
        response = await self._routed(
            lambda t: self.coordinators.call_txn(method, request, t), context
        )
        return cast(Answer, response)

    async def _routed(
        self, call: Callable[[float], Awaitable[Response]], context: Ctx, floor_s: float = 0.0
    ) -> Response:
        """``call(timeout_s)`` into the coordinator router; a gRPC failure it passes on
        (anything but a coordinator being unavailable) ends the client's call alike."""
        try:
            return await call(self._timeout(context, floor_s))
        except grpc.aio.AioRpcError as exc:
            await _abort(context, exc.code(), exc.details() or "")

    async def FindCoordinator(
        self, request: coordinator_pb2.FindCoordinatorRequest, context: Ctx
    ) -> coordinator_pb2.FindCoordinatorResponse:
        return await self.coordinators.find_coordinator(request, self._timeout(context))

    async def JoinGroup(
        self, request: coordinator_pb2.JoinGroupRequest, context: Ctx
    ) -> coordinator_pb2.JoinGroupResponse:
        # A join legitimately waits for the rebalance: up to the rebalance timeout.
        floor_s = request.rebalance_timeout_ms / 1000 + 5.0
        answer = coordinator_pb2.JoinGroupResponse
        return await self._group("JoinGroup", request, answer, context, floor_s)

    async def SyncGroup(
        self, request: coordinator_pb2.SyncGroupRequest, context: Ctx
    ) -> coordinator_pb2.SyncGroupResponse:
        return await self._group("SyncGroup", request, coordinator_pb2.SyncGroupResponse, context)

    async def Heartbeat(
        self, request: coordinator_pb2.HeartbeatRequest, context: Ctx
    ) -> coordinator_pb2.HeartbeatResponse:
        return await self._group("Heartbeat", request, coordinator_pb2.HeartbeatResponse, context)

    async def LeaveGroup(
        self, request: coordinator_pb2.LeaveGroupRequest, context: Ctx
    ) -> coordinator_pb2.LeaveGroupResponse:
        return await self._group("LeaveGroup", request, coordinator_pb2.LeaveGroupResponse, context)

    async def OffsetCommit(
        self, request: coordinator_pb2.OffsetCommitRequest, context: Ctx
    ) -> coordinator_pb2.OffsetCommitResponse:
        return await self._group(
            "OffsetCommit", request, coordinator_pb2.OffsetCommitResponse, context
        )

    async def OffsetFetch(
        self, request: coordinator_pb2.OffsetFetchRequest, context: Ctx
    ) -> coordinator_pb2.OffsetFetchResponse:
        return await self._group(
            "OffsetFetch", request, coordinator_pb2.OffsetFetchResponse, context
        )

    async def OffsetDelete(
        self, request: coordinator_pb2.OffsetDeleteRequest, context: Ctx
    ) -> coordinator_pb2.OffsetDeleteResponse:
        return await self._group(
            "OffsetDelete", request, coordinator_pb2.OffsetDeleteResponse, context
        )

    async def ListGroups(
        self, request: coordinator_pb2.ListGroupsRequest, context: Ctx
    ) -> coordinator_pb2.ListGroupsResponse:
        return await self._routed(lambda t: self.coordinators.list_groups(request, t), context)

    async def DescribeGroups(
        self, request: coordinator_pb2.DescribeGroupsRequest, context: Ctx
    ) -> coordinator_pb2.DescribeGroupsResponse:
        return await self._routed(lambda t: self.coordinators.describe_groups(request, t), context)

    async def DeleteGroups(
        self, request: coordinator_pb2.DeleteGroupsRequest, context: Ctx
    ) -> coordinator_pb2.DeleteGroupsResponse:
        return await self._routed(lambda t: self.coordinators.delete_groups(request, t), context)

    async def TxnOffsetCommit(
        self, request: coordinator_pb2.TxnOffsetCommitRequest, context: Ctx
    ) -> coordinator_pb2.TxnOffsetCommitResponse:
        return await self._group(
            "TxnOffsetCommit", request, coordinator_pb2.TxnOffsetCommitResponse, context
        )

    # -- transactions -------------------------------------------------------------------------

    async def AddPartitionsToTxn(
        self, request: transaction_pb2.AddPartitionsToTxnRequest, context: Ctx
    ) -> transaction_pb2.AddPartitionsToTxnResponse:
        return await self._txn(
            "AddPartitionsToTxn", request, transaction_pb2.AddPartitionsToTxnResponse, context
        )

    async def AddOffsetsToTxn(
        self, request: transaction_pb2.AddOffsetsToTxnRequest, context: Ctx
    ) -> transaction_pb2.AddOffsetsToTxnResponse:
        return await self._txn(
            "AddOffsetsToTxn", request, transaction_pb2.AddOffsetsToTxnResponse, context
        )

    async def EndTxn(
        self, request: transaction_pb2.EndTxnRequest, context: Ctx
    ) -> transaction_pb2.EndTxnResponse:
        return await self._txn("EndTxn", request, transaction_pb2.EndTxnResponse, context)

    async def ListTransactions(
        self, request: transaction_pb2.ListTransactionsRequest, context: Ctx
    ) -> transaction_pb2.ListTransactionsResponse:
        return await self._routed(
            lambda t: self.coordinators.list_transactions(request, t), context
        )

    async def DescribeTransactions(
        self, request: transaction_pb2.DescribeTransactionsRequest, context: Ctx
    ) -> transaction_pb2.DescribeTransactionsResponse:
        return await self._routed(
            lambda t: self.coordinators.describe_transactions(request, t), context
        )

    async def DescribeProducers(
        self, request: transaction_pb2.DescribeProducersRequest, context: Ctx
    ) -> transaction_pb2.DescribeProducersResponse:
        return await self._data(self.data.describe_producers, request, context)

    async def DescribeLogDirs(
        self, request: storage_pb2.DescribeLogDirsRequest, context: Ctx
    ) -> storage_pb2.DescribeLogDirsResponse:
        if self.log_dirs is None:
            await _abort(context, grpc.StatusCode.UNIMPLEMENTED, "DescribeLogDirs is not set up")
        return await self._data(self.log_dirs.describe, request, context)

    async def CommitStagedTransactions(
        self, request: transaction_pb2.CommitStagedTransactionsRequest, context: Ctx
    ) -> transaction_pb2.CommitStagedTransactionsResponse:
        response = await self._routed(
            lambda t: self.coordinators.call_staged("CommitStagedTransactions", request, t),
            context,
        )
        return cast(transaction_pb2.CommitStagedTransactionsResponse, response)

    async def DescribeStagedCommit(
        self, request: transaction_pb2.DescribeStagedCommitRequest, context: Ctx
    ) -> transaction_pb2.DescribeStagedCommitResponse:
        response = await self._routed(
            lambda t: self.coordinators.call_staged("DescribeStagedCommit", request, t), context
        )
        return cast(transaction_pb2.DescribeStagedCommitResponse, response)
