"""``PeerCoordinators``: calls to the coordinator serving a key, straight to it over gRPC.

The coordinator serving a group id or a transactional id is the owner of the key's partition
of its internal topic, at the address it registered: the owners and registrations this
instance follows anyway (``CoordinatorRuntime.locate``), so no FindCoordinator and no gateway
in between. One channel per peer address (this very process included: the call then loops
back), opened with the process's channel security (``strom_server.rpc.channels``).

``call_transaction`` retries, locating the id again each time, while its owner is unknown,
moving (an answer carrying NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
COORDINATOR_NOT_AVAILABLE: ``strom_server.rpc.errors.coordinator_moving``) or unreachable (gRPC
UNAVAILABLE), with the project's backoff (``strom.cluster.retry``) until its timeout, as the
gateway's router does for clients; then it returns the last answer, or raises
COORDINATOR_NOT_AVAILABLE when no peer answered. Any other gRPC failure is raised as it is.

Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from strom.cluster.retry import Backoff, Deadline
from strom.errors import CoordinatorNotAvailableError
from strom.protocol.v1 import coordinator_pb2_grpc, transaction_pb2_grpc
from strom_coordinator.config import TRANSACTION_STATE_TOPIC
from strom_server.rpc.channels import open_channel
from strom_server.rpc.errors import coordinator_moving
from strom_server.runtime.logs import get_logger

__all__ = ["Locate", "PeerCoordinators"]

log = get_logger(__name__)

#: (topic, key) -> (address "host:port" of the coordinator serving it, its partition), or None
#: while unknown (``CoordinatorRuntime.locate``).
Locate = Callable[[str, str], tuple[str, int] | None]

_BACKOFF_S = 0.02
_BACKOFF_MAX_S = 0.4


class _Peer:
    """One coordinator process: its channel and the stubs of the two services it serves."""

    def __init__(self, address: str) -> None:
        self.channel = open_channel(address)
        self.groups = coordinator_pb2_grpc.GroupCoordinatorStub(self.channel)
        self.transactions = transaction_pb2_grpc.TransactionCoordinatorStub(self.channel)


class PeerCoordinators:
    """Direct calls to the other coordinators (see the module docstring)."""

    def __init__(self, locate: Locate) -> None:
        self.locate = locate
        self._peers: dict[str, _Peer] = {}

    def groups(self, address: str) -> coordinator_pb2_grpc.GroupCoordinatorStub:
        """The GroupCoordinator stub of the coordinator at ``address``."""
        return self._peer(address).groups

    def transactions(self, address: str) -> transaction_pb2_grpc.TransactionCoordinatorStub:
        """The TransactionCoordinator stub of the coordinator at ``address``."""
        return self._peer(address).transactions

    async def call_transaction(
        self, transactional_id: str, method: str, request: Message, *, timeout_s: float
    ) -> Any:
        """TransactionCoordinator ``method`` with ``request`` at the coordinator serving
        ``transactional_id`` (see the module docstring)."""
        deadline = Deadline(timeout_s)
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        last: Any = None
        why = "its coordinator is unknown"
        while True:
            located = self.locate(TRANSACTION_STATE_TOPIC, transactional_id)
            if located is None:
                why = "its coordinator is unknown"
            else:
                address = located[0]
                try:
                    response = await getattr(self.transactions(address), method)(
                        request, timeout=max(deadline.left(), 0.001)
                    )
                except grpc.aio.AioRpcError as exc:
                    if exc.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                    why = f"coordinator {address}: {exc.code().name} {exc.details()}"
                else:
                    if coordinator_moving(response) is None:
                        return response
                    last = response
            delay = backoff.next()
            if not deadline.allows(delay):
                break
            log.debug("retrying a call to a peer coordinator", method=method,
                      transactional_id=transactional_id, why=why)  # fmt: skip
            await asyncio.sleep(delay)
        if last is not None:
            return last
        raise CoordinatorNotAvailableError(f"{method} for {transactional_id!r}: {why}")

    async def close(self) -> None:
        peers, self._peers = list(self._peers.values()), {}
        await asyncio.gather(*(p.channel.close() for p in peers), return_exceptions=True)

    def _peer(self, address: str) -> _Peer:
        peer = self._peers.get(address)
        if peer is None:
            peer = self._peers[address] = _Peer(address)
        return peer
