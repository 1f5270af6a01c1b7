"""Forward requests to the active controller, following it across failovers.

A forwarded call is retried, within the request's deadline, when the controller is
unreachable or answers NOT_CONTROLLER (it lost an election): the locator re-reads the leader
key and the call goes to the new active controller. Nothing is buffered beyond the requests in
flight: backpressure is the client's own deadline.
"""

from __future__ import annotations

import asyncio
import time

import grpc
import structlog
from google.protobuf.message import Message

from strom.errors import ErrorCode
from strom.protocol.v1 import controller_pb2_grpc
from strom.security import ChannelSecurity
from strom_server.etcd.controller_locator import ControllerLocator
from strom_server.rpc.channels import open_channel

log = structlog.get_logger(__name__)

__all__ = ["ControllerRouter", "NoControllerError"]

RETRY_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)
RETRIABLE_STATUS = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class NoControllerError(Exception):
    """No active controller answered before the deadline."""


def mentions_not_controller(message: Message) -> bool:
    """Whether any ``error_code`` field in ``message`` (at any depth) is NOT_CONTROLLER."""
    for field, value in message.ListFields():
        if field.name == "error_code" and value == ErrorCode.NOT_CONTROLLER:
            return True
        if field.message_type is not None:
            values = value if field.is_repeated else [value]
            if any(isinstance(v, Message) and mentions_not_controller(v) for v in values):
                return True
    return False


class ControllerRouter:
    """Calls Controller RPCs on whichever controller is active."""

    def __init__(
        self,
        locator: ControllerLocator,
        *,
        max_message_size: int,
        security: ChannelSecurity | None = None,
    ) -> None:
        """``security``: the channels' (None: the process's, calling as the service)."""
        self.locator = locator
        self._max_message_size = max_message_size
        self._security = security
        self._channels: dict[str, tuple[grpc.aio.Channel, controller_pb2_grpc.ControllerStub]] = {}

    def _stub(self, address: str) -> controller_pb2_grpc.ControllerStub:
        entry = self._channels.get(address)
        if entry is None:
            channel = open_channel(
                address, max_message_size=self._max_message_size, security=self._security
            )
            entry = (channel, controller_pb2_grpc.ControllerStub(channel))
            self._channels[address] = entry
        return entry[1]

    async def call(self, method: str, request: Message, timeout_s: float) -> Message:
        """``Controller.<method>(request)`` on the active controller, retried until
        ``timeout_s`` passes; raises NoControllerError or the last gRPC error. The answer is
        ``<method>Response`` (the generated stubs carry no types to say so)."""
        deadline = time.monotonic() + timeout_s
        attempt = 0
        last_problem = "no active controller is registered in etcd"
        while True:
            address = self.locator.address or await self.locator.refresh()
            remaining = deadline - time.monotonic()
            if address is not None and remaining > 0:
                try:
                    response: Message = await getattr(self._stub(address), method)(
                        request, timeout=remaining
                    )
                except grpc.aio.AioRpcError as exc:
                    if exc.code() not in RETRIABLE_STATUS:
                        raise
                    last_problem = f"controller {address}: {exc.code().name} {exc.details()}"
                else:
                    if not mentions_not_controller(response):
                        return response
                    last_problem = f"controller {address} is no longer active"
                    if time.monotonic() + RETRY_BACKOFF_S[0] >= deadline:
                        return response  # let the client see NOT_CONTROLLER and retry itself
                await self.locator.refresh()
            delay = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
            if time.monotonic() + delay >= deadline:
                raise NoControllerError(f"{method}: {last_problem}")
            attempt += 1
            log.debug("retrying on another controller", method=method, problem=last_problem)
            await asyncio.sleep(delay)

    async def close(self) -> None:
        for channel, _ in self._channels.values():
            await channel.close()
        self._channels.clear()
