"""The Gateway gRPC service: the whole public API in one place.

Most RPCs only forward their request, and are made from one table, ``FORWARDED`` (RPC name ->
``Route``): to the active controller (``routing.controller``), to the partition leaders
(``routing.data_path``, with ProduceRecords/FetchRecords on top of it in ``api.record_rpcs``),
or to the coordinators (``routing.coordinators``: by group id, by transactional id, by commit
id, or split, merged and sent to all by the router's own methods). The RPCs with logic of
their own are written below: Metadata (adds the controllers), Produce (bytes in), ProduceStream
(``routing.produce_stream``), InitProducerId (the controller without a transactional id or
with a reserved ``__strom_`` one, else the id's coordinator), FindCoordinator and
DescribeLogDirs (``routing.log_dirs``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NoReturn, TypeVar, cast

import grpc
from google.protobuf.message import DecodeError, Message

from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    coordinator_pb2,
    gateway_pb2_grpc,
    storage_pb2,
)
from strom_gateway.api.record_rpcs import RecordRpcs
from strom_gateway.routing.byte_budget import TooLargeError
from strom_gateway.routing.controller import ControllerRouter, NoControllerError
from strom_gateway.routing.coordinators import (
    CoordinatorRouter,
    TxnRequest,
    is_controller_producer_id,
)
from strom_gateway.routing.data_path import DataPath
from strom_gateway.routing.log_dirs import LogDirsFanOut
from strom_gateway.routing.produce_stream import ProduceStreamRelay
from strom_server.rpc.raw_methods import add_with_raw_methods
from strom_server.rpc.server import ServicerContext as Ctx

__all__ = ["FORWARDED", "GatewayServicer", "Route", "To", "add_to_server"]

#: Methods whose bytes pass through: Produce's request arrives unparsed (the servicer reads it
#: to route, and forwards the original bytes), Fetch's answer may be the leader's bytes.
RAW_REQUESTS = ("Produce",)
RAW_RESPONSES = ("Produce", "Fetch")

Request = TypeVar("Request")
Response = TypeVar("Response")
Answer = TypeVar("Answer", bound=Message)
Servicer = TypeVar("Servicer", bound=type)


class To(Enum):
    """Where a forwarded RPC goes (the value says how, for the methods' docstrings)."""

    CONTROLLER = "the active controller's Controller.{rpc}"
    GROUP = "GroupCoordinator.{rpc} on the coordinator of the request's group_id"
    TXN = "TransactionCoordinator.{rpc} on the coordinator of the request's transactional_id"
    STAGED = "TransactionCoordinator.{rpc} on the coordinator of the request's commit_id"
    COORDINATORS = "the coordinators, through CoordinatorRouter.{method}"
    DATA = "the partition leaders, through DataPath.{method}"
    RECORDS = "the partition leaders, through RecordRpcs.{method}"


@dataclass(frozen=True, slots=True)
class Route:
    """How one forwarded RPC is routed."""

    to: To
    #: The router's method taking (request, timeout or deadline), for COORDINATORS, DATA and
    #: RECORDS; the others call the RPC of the same name.
    method: str = ""
    #: The least time the RPC may take, from its request (a long poll, a rebalance): the
    #: client's deadline if it set one, else the default timeout but at least this.
    floor_s: Callable[[Any], float] | None = None

    def describe(self, rpc: str) -> str:
        return self.to.value.format(rpc=rpc, method=self.method)


CONTROLLER = Route(To.CONTROLLER)
GROUP = Route(To.GROUP)
TXN = Route(To.TXN)
STAGED = Route(To.STAGED)
#: CoordinatorRouter's method for each keyed route (it takes the RPC's name).
_BY_KEY = {To.GROUP: "call", To.TXN: "call_txn", To.STAGED: "call_staged"}


def _max_wait_s(request: Any) -> float:
    """A long poll legitimately takes ``max_wait_ms``."""
    return float(request.max_wait_ms) / 1000


def _rebalance_s(request: coordinator_pb2.JoinGroupRequest) -> float:
    """A join legitimately waits for the rebalance: up to the rebalance timeout."""
    return request.rebalance_timeout_ms / 1000 + 5.0


#: Every RPC that only forwards its request: adding one is a line here (and its rule in
#: ``strom_server.security.rules``).
FORWARDED: dict[str, Route] = {
    "CreateTopics": CONTROLLER,
    "DeleteTopics": CONTROLLER,
    "CreatePartitions": CONTROLLER,
    "DescribeConfigs": CONTROLLER,
    "IncrementalAlterConfigs": CONTROLLER,
    "ElectLeaders": CONTROLLER,
    "AlterPartitionReassignments": CONTROLLER,
    "ListPartitionReassignments": CONTROLLER,
    "Fetch": Route(To.DATA, "fetch", _max_wait_s),
    "ListOffsets": Route(To.DATA, "list_offsets"),
    "DeleteRecords": Route(To.DATA, "delete_records"),
    "DescribeProducers": Route(To.DATA, "describe_producers"),
    "ProduceRecords": Route(To.RECORDS, "produce"),
    "FetchRecords": Route(To.RECORDS, "fetch", _max_wait_s),
    "JoinGroup": Route(To.GROUP, floor_s=_rebalance_s),
    "SyncGroup": GROUP,
    "Heartbeat": GROUP,
    "LeaveGroup": GROUP,
    "OffsetCommit": GROUP,
    "OffsetFetch": GROUP,
    "OffsetDelete": GROUP,
    "TxnOffsetCommit": GROUP,
    "ListGroups": Route(To.COORDINATORS, "list_groups"),
    "DescribeGroups": Route(To.COORDINATORS, "describe_groups"),
    "DeleteGroups": Route(To.COORDINATORS, "delete_groups"),
    "AddPartitionsToTxn": TXN,
    "AddOffsetsToTxn": TXN,
    "EndTxn": TXN,
    "ListTransactions": Route(To.COORDINATORS, "list_transactions"),
    "DescribeTransactions": Route(To.COORDINATORS, "describe_transactions"),
    "CommitStagedTransactions": STAGED,
    "DescribeStagedCommit": STAGED,
}


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


def _forwarder(rpc: str, route: Route) -> Callable[..., Awaitable[Message]]:
    """The servicer method of a ``FORWARDED`` RPC."""

    async def forward(self: GatewayServicer, request: Message, context: Ctx) -> Message:
        return await self._route(rpc, route, request, context)

    forward.__name__ = rpc
    forward.__qualname__ = f"GatewayServicer.{rpc}"
    forward.__doc__ = f"Forwarded to {route.describe(rpc)}."
    return forward


def _with_forwarded(cls: Servicer) -> Servicer:
    """``cls`` with a method for each ``FORWARDED`` RPC (grpc looks them up by name)."""
    for rpc, route in FORWARDED.items():
        if rpc in vars(cls):
            raise TypeError(f"Gateway.{rpc} is both in FORWARDED and written by hand")
        setattr(cls, rpc, _forwarder(rpc, route))
    return cls


@_with_forwarded
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

    def _deadline(self, context: Ctx, floor_s: float = 0.0) -> float:
        return time.monotonic() + self._timeout(context, floor_s)

    async def _route(self, rpc: str, route: Route, request: Message, context: Ctx) -> Message:
        """A ``FORWARDED`` RPC: ``request`` sent where ``route`` says."""
        floor_s = 0.0 if route.floor_s is None else route.floor_s(request)
        if route.to is To.CONTROLLER:
            return await self._forward(rpc, request, Message, context)
        if route.to is To.DATA:
            return await self._data(getattr(self.data, route.method), request, context, floor_s)
        if route.to is To.RECORDS:
            call = getattr(self.records, route.method)
            return await self._data(call, request, context, floor_s)
        keyed = _BY_KEY.get(route.to)
        if keyed is not None:
            call = getattr(self.coordinators, keyed)
            return await self._routed(lambda t: call(rpc, request, t), context, floor_s)
        method = getattr(self.coordinators, route.method)
        return await self._routed(lambda t: method(request, t), context, floor_s)

    # -- the active controller ----------------------------------------------------------------

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

    async def InitProducerId(
        self, request: controller_pb2.InitProducerIdRequest, context: Ctx
    ) -> controller_pb2.InitProducerIdResponse:
        answer = controller_pb2.InitProducerIdResponse
        if is_controller_producer_id(request.transactional_id):
            return await self._forward("InitProducerId", request, answer, context)
        return await self._txn("InitProducerId", request, answer, context)

    # -- data path ----------------------------------------------------------------------------

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

    async def DescribeLogDirs(
        self, request: storage_pb2.DescribeLogDirsRequest, context: Ctx
    ) -> storage_pb2.DescribeLogDirsResponse:
        if self.log_dirs is None:
            await _abort(context, grpc.StatusCode.UNIMPLEMENTED, "DescribeLogDirs is not set up")
        return await self._data(self.log_dirs.describe, request, context)

    # -- coordinators -------------------------------------------------------------------------

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
