"""Leaders' ISR changes to the active controller (AlterPartition), batched per round trip.

A partition has at most one change in flight (``Partition.pending_isr``). A change the
controller refuses (stale leader or partition epoch, not the leader) is dropped: fresher
metadata arrives through etcd and the leader re-evaluates. A controller that cannot be reached,
or that is no longer active, is retried with backoff, keeping the change pending.

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc
import structlog

from strom.cluster import from_rpc_error
from strom.errors import for_code
from strom.protocol.v1 import controller_pb2, controller_pb2_grpc
from strom_server.rpc.channels import PeerChannel
from strom_storage.node import ReplicaManager
from strom_storage.node.partition import IsrChange

log = structlog.get_logger(__name__)

__all__ = ["AlterPartitionClient"]

RETRY_BACKOFF_S = 0.2
REQUEST_TIMEOUT_S = 10.0


class AlterPartitionClient:
    """Implements ``replica_manager.IsrUpdates`` over gRPC to the active controller."""

    def __init__(
        self,
        replicas: ReplicaManager,
        *,
        node_id: int,
        controller_address: Callable[[], str | None],
        broker_epoch: Callable[[], int],
    ) -> None:
        self._replicas = replicas
        self._node_id = node_id
        self._controller_address = controller_address
        self._broker_epoch = broker_epoch
        self._queued: dict[tuple[str, int], IsrChange] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._channel = PeerChannel()

    def propose(self, change: IsrChange) -> None:
        self._queued[(change.topic, change.partition)] = change
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._channel.close()

    def _stub(self, address: str) -> controller_pb2_grpc.ControllerStub:
        return controller_pb2_grpc.ControllerStub(self._channel.get(address))

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._queued = self._queued, {}
            if not batch:
                continue
            try:
                await self._send(list(batch.values()))
            except Exception as exc:
                log.warning("AlterPartition failed; retrying", error=str(exc),
                            partitions=len(batch))  # fmt: skip
                for key, change in batch.items():
                    self._queued.setdefault(key, change)
                await asyncio.sleep(RETRY_BACKOFF_S)
                self._wake.set()

    async def _send(self, changes: list[IsrChange]) -> None:
        address = self._controller_address()
        if address is None:
            raise ConnectionError("no active controller is known")
        request = controller_pb2.AlterPartitionRequest(
            broker_id=self._node_id,
            broker_epoch=self._broker_epoch(),
            partitions=[
                controller_pb2.AlterPartitionItem(
                    topic=c.topic,
                    partition=c.partition,
                    leader_epoch=c.leader_epoch,
                    new_isr=list(c.new_isr),
                    partition_epoch=c.partition_epoch,
                )
                for c in changes
            ],
        )
        try:
            response = await self._stub(address).AlterPartition(request, timeout=REQUEST_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc, address) from exc
        by_key = {(c.topic, c.partition): c for c in changes}
        for result in response.partitions:
            change = by_key.pop((result.topic, result.partition), None)
            if change is None:
                continue
            if result.error_code == 0:
                self._replicas.isr_committed(change, tuple(result.isr), result.partition_epoch)
                continue
            error = for_code(result.error_code, result.error_message)
            log.info("ISR change refused", topic=change.topic, partition=change.partition,
                     error=str(error), code=type(error).__name__)  # fmt: skip
            self._replicas.isr_rejected(change)
        for change in by_key.values():  # not answered: try again
            self.propose(change)
