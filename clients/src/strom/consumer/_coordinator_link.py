"""``CoordinatorLink``: how a consumer reaches its group's coordinator.

``FindCoordinator`` goes to the gateway (which asks a registered coordinator instance); every
other group RPC goes straight to the coordinator it named, over a cached grpc.aio channel.
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and network errors forget the coordinator, so the
next call finds it again (after ``retry_backoff_ms``), as Kafka's ``markCoordinatorUnknown``.
Not thread-safe: it lives on the consumer's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import grpc.aio

from strom.cluster import ClusterClient, channel_options, translate_errors
from strom.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NetworkExceptionError,
    NotCoordinatorError,
    RequestTimedOutError,
    StromError,
    StromTimeoutError,
    for_code,
)
from strom.protocol.v1 import common_pb2, coordinator_pb2, coordinator_pb2_grpc

__all__ = ["COORDINATOR_ERRORS", "CoordinatorLink", "is_coordinator_error"]

log = logging.getLogger("strom.consumer")

_E = common_pb2.ErrorCode
#: Codes meaning "this is not (or no longer) the coordinator to talk to": find it again.
COORDINATOR_ERRORS = frozenset({_E.NOT_COORDINATOR, _E.COORDINATOR_NOT_AVAILABLE})
_CHANNEL_OPTIONS = [
    *channel_options(),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def is_coordinator_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the coordinator must be looked up again."""
    return isinstance(
        exc,
        NotCoordinatorError
        | CoordinatorNotAvailableError
        | NetworkExceptionError
        | RequestTimedOutError,
    )


class CoordinatorLink:
    """The coordinator of one group: found through the gateway, called directly."""

    def __init__(self, cluster: ClusterClient, group_id: str, *, retry_backoff_ms: int) -> None:
        self._cluster = cluster
        self._group_id = group_id
        self._backoff = max(retry_backoff_ms, 1) / 1000
        self._stub: coordinator_pb2_grpc.GroupCoordinatorStub | None = None
        self.address: str | None = None
        self.coordinator_id: int | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._finding: asyncio.Future[coordinator_pb2_grpc.GroupCoordinatorStub] | None = None
        self._closed = False

    @property
    def known(self) -> bool:
        return self._stub is not None

    def mark_unknown(self, why: object = "") -> None:
        """Forget the coordinator: the next call finds it again."""
        if self._stub is not None:
            log.info(
                "group %r: coordinator %s is unavailable or moved (%s); finding it again",
                self._group_id,
                self.address,
                why,
            )
        self._stub = None
        self.address = None
        self.coordinator_id = None

    async def find(self, deadline: float) -> coordinator_pb2_grpc.GroupCoordinatorStub:
        """The coordinator's stub, asking the gateway until one is named or ``deadline``
        (loop time) passes; concurrent callers share one lookup."""
        if self._stub is not None:
            return self._stub
        if self._finding is None or self._finding.done():
            self._finding = asyncio.ensure_future(self._find(deadline))
            # Retrieved here: a cancelled caller must not leave the lookup's error unseen.
            self._finding.add_done_callback(lambda f: f.cancelled() or f.exception())
        return await asyncio.shield(self._finding)

    async def _find(self, deadline: float) -> coordinator_pb2_grpc.GroupCoordinatorStub:
        loop = asyncio.get_running_loop()
        request = coordinator_pb2.FindCoordinatorRequest(group_id=self._group_id)
        last: StromError | None = None
        while True:
            if self._closed:
                raise StromError("the consumer is closed")
            try:
                with translate_errors(self._cluster.gateway_address):
                    response = await self._cluster.gateway.FindCoordinator(
                        request,
                        timeout=max(
                            min(self._cluster.request_timeout, deadline - loop.time()), 0.01
                        ),
                    )
                if response.error_code:
                    raise for_code(response.error_code, response.error_message)
                node = response.coordinator
                return self._connect(node.node_id, f"{node.host}:{node.port}")
            except StromError as exc:
                last = exc
            if not last.retriable:
                raise last
            log.debug("group %r: FindCoordinator failed, retrying: %s", self._group_id, last)
            if loop.time() + self._backoff >= deadline:
                raise StromTimeoutError(
                    f"group {self._group_id!r}: no coordinator found in time (last error: {last})"
                ) from last
            await asyncio.sleep(self._backoff)

    def _connect(self, node_id: int, address: str) -> coordinator_pb2_grpc.GroupCoordinatorStub:
        if self._cluster.gateway_only:  # the gateway forwards every group RPC
            self._stub = self._cluster.gateway  # type: ignore[assignment]
            self.address = self._cluster.gateway_address
            self.coordinator_id = node_id
            return self._stub  # type: ignore[return-value]
        channel = self._channels.get(address)
        if channel is None:
            if self._closed:
                raise StromError("the consumer is closed")
            channel = self._channels[address] = self._cluster.open_channel(
                address, _CHANNEL_OPTIONS
            )
        self._stub = coordinator_pb2_grpc.GroupCoordinatorStub(channel)
        self.address = address
        self.coordinator_id = node_id
        log.debug("group %r: coordinator is %d at %s", self._group_id, node_id, address)
        return self._stub

    async def call(self, method: str, request: Any, timeout_s: float, deadline: float) -> Any:
        """One RPC to the coordinator (found first, within ``deadline``). gRPC errors become
        ``strom.errors``; a network error also forgets the coordinator."""
        stub = await self.find(deadline)
        try:
            with translate_errors(self.address or ""):
                return await getattr(stub, method)(request, timeout=timeout_s)
        except StromError as error:
            if is_coordinator_error(error):
                self.mark_unknown(error)
            raise

    async def backoff(self) -> None:
        await asyncio.sleep(self._backoff)

    @property
    def backoff_s(self) -> float:
        return self._backoff

    async def close(self) -> None:
        self._closed = True
        if self._finding is not None and not self._finding.done():
            self._finding.cancel()
        channels = list(self._channels.values())
        self._channels.clear()
        self._stub = None
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)


def retriable_group_error(exc: StromError) -> bool:
    """Errors after which a group request is simply sent again (after a backoff)."""
    return is_coordinator_error(exc) or isinstance(exc, CoordinatorLoadInProgressError)
