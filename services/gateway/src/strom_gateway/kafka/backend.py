"""What the Kafka handlers call: the gateway's own routers, and the address it advertises.

Kafka requests become the same calls the gRPC servicer makes (the active controller through
``ControllerRouter``, coordinators through ``CoordinatorRouter``, partition leaders through
``DataPath``). A whole-request failure (no controller, a gRPC error) raises ``CallFailed``
with the Kafka error code the handler reports instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypeVar, cast

import grpc
from google.protobuf.message import Message

from strom.cluster import from_rpc_error
from strom.errors import ErrorCode
from strom.protocol.v1 import controller_pb2
from strom_gateway.routing.byte_budget import TooLargeError
from strom_gateway.routing.controller import ControllerRouter, NoControllerError
from strom_gateway.routing.coordinators import CoordinatorRouter
from strom_gateway.routing.data_path import DataPath

__all__ = ["ROUTER_ERRORS", "Backend", "CallFailed", "failure", "kafka_code"]

Answer = TypeVar("Answer", bound=Message)

#: Strom's own codes (1000 and up) as the nearest Kafka code a client knows.
_STROM_CODES = {ErrorCode.TOPIC_DELETION_IN_PROGRESS: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def kafka_code(code: int) -> int:
    """A Strom ``ErrorCode`` as a Kafka error code (the same number below 1000)."""
    if code < 1000:
        return code
    return int(_STROM_CODES.get(code, ErrorCode.UNKNOWN_SERVER_ERROR))  # type: ignore[call-overload]


class CallFailed(Exception):
    """A forwarded call failed as a whole; ``code`` is the Kafka error to report."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: What the gateway's routers raise when a call fails as a whole (``failure`` translates them).
ROUTER_ERRORS = (NoControllerError, TooLargeError, grpc.aio.AioRpcError)


def failure(exc: BaseException, unavailable: int) -> CallFailed:
    """``exc`` (from a router) as a ``CallFailed``; ``unavailable`` is the code for "nothing
    answered" (NOT_CONTROLLER, COORDINATOR_NOT_AVAILABLE, LEADER_NOT_AVAILABLE...). A gRPC
    error takes the code ``from_rpc_error`` finds (the server's own ErrorCode when it sent
    one, else the status's)."""
    if isinstance(exc, NoControllerError):
        return CallFailed(unavailable, str(exc))
    if isinstance(exc, TooLargeError):
        return CallFailed(ErrorCode.MESSAGE_TOO_LARGE, str(exc))
    if isinstance(exc, grpc.aio.AioRpcError):
        problem = from_rpc_error(exc)
        code = getattr(problem, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
        if exc.code() == grpc.StatusCode.UNAVAILABLE:
            code = unavailable
        return CallFailed(kafka_code(code), str(problem))
    raise exc


@dataclass
class Backend:
    """The gateway's routers and this listener's advertised address."""

    router: ControllerRouter
    coordinators: CoordinatorRouter
    data: DataPath
    host: str
    port: int
    timeout_s: float
    #: The one broker id Kafka clients see: every partition's leader, every coordinator and
    #: the controller are this listener under this id.
    broker_id: int = 0

    def deadline(self, extra_s: float = 0.0) -> float:
        return time.monotonic() + self.timeout_s + extra_s

    async def controller(self, method: str, request: Message, answer: type[Answer]) -> Answer:
        """``Controller.<method>`` on the active controller; ``answer`` types the result."""
        try:
            return cast(Answer, await self.router.call(method, request, self.timeout_s))
        except (NoControllerError, grpc.aio.AioRpcError) as exc:
            raise failure(exc, ErrorCode.NOT_CONTROLLER) from exc

    async def metadata(
        self, topics: list[str] | None, *, auto_create: bool = False
    ) -> controller_pb2.MetadataResponse:
        """The controller's metadata: ``topics`` None for every topic."""
        request = controller_pb2.MetadataRequest(
            topics=topics or [], allow_auto_topic_creation=auto_create
        )
        return await self.controller("Metadata", request, controller_pb2.MetadataResponse)
