"""Small in-process coordinators on real grpc.aio servers, for the gateway's router tests.

Each serves GroupCoordinator and TransactionCoordinator, as the real coordinator process does.
A shared ``Directory`` says which coordinator owns each group and each transactional id; a
coordinator answers NOT_COORDINATOR for keys it does not own, and COORDINATOR_LOAD_IN_PROGRESS
while its ``loading`` counter is above zero (one answer per unit).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from strom.errors import ErrorCode
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    coordinator_pb2,
    coordinator_pb2_grpc,
    transaction_pb2,
    transaction_pb2_grpc,
)

pb = coordinator_pb2
txn = transaction_pb2


@dataclass
class Directory:
    """group id -> owning coordinator id; coordinator id -> port."""

    owners: dict[str, int] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)
    #: transactional id -> owning coordinator id
    txn_owners: dict[str, int] = field(default_factory=dict)


class FakeCoordinator(coordinator_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, coordinator_id: int, directory: Directory) -> None:
        self.id = coordinator_id
        self.directory = directory
        self.calls: list[tuple[str, Any]] = []
        self.loading = 0
        self.server: grpc.aio.Server | None = None

    def _refusal(self, group_id: str) -> int:
        if self.directory.owners.get(group_id) != self.id:
            return ErrorCode.NOT_COORDINATOR
        if self.loading > 0:
            self.loading -= 1
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return 0

    async def FindCoordinator(self, request: Any, context: Any) -> Any:
        self.calls.append(("FindCoordinator", request.group_id))
        owners = self.directory.owners
        if request.key_type == pb.TRANSACTION:
            self.calls[-1] = ("FindCoordinator", f"txn:{request.group_id}")
            owners = self.directory.txn_owners
        owner = owners.get(request.group_id)
        if owner is None:
            return pb.FindCoordinatorResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        node = common_pb2.Node(node_id=owner, host="127.0.0.1", port=self.directory.ports[owner])
        return pb.FindCoordinatorResponse(coordinator=node)

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        self.calls.append(("Heartbeat", request.group_id))
        return pb.HeartbeatResponse(error_code=self._refusal(request.group_id))

    def _commit(self, method: str, request: Any) -> Any:
        self.calls.append((method, request.group_id))
        code = self._refusal(request.group_id)
        return getattr(pb, f"{method}Response")(
            partitions=[
                pb.OffsetCommitPartitionResult(
                    topic=p.topic, partition=p.partition, error_code=code
                )
                for p in request.partitions
            ]
        )

    async def OffsetCommit(self, request: Any, context: Any) -> Any:
        return self._commit("OffsetCommit", request)

    async def TxnOffsetCommit(self, request: Any, context: Any) -> Any:
        return self._commit("TxnOffsetCommit", request)

    async def ListGroups(self, request: Any, context: Any) -> Any:
        self.calls.append(("ListGroups", None))
        mine = sorted(g for g, owner in self.directory.owners.items() if owner == self.id)
        return pb.ListGroupsResponse(
            groups=[pb.ListedGroup(group_id=g, protocol_type="consumer", group_state="Stable")
                    for g in mine]
        )  # fmt: skip

    async def DescribeGroups(self, request: Any, context: Any) -> Any:
        self.calls.append(("DescribeGroups", list(request.group_ids)))
        return pb.DescribeGroupsResponse(
            groups=[
                pb.DescribedGroup(
                    group_id=g,
                    error_code=self._refusal(g),
                    group_state="Stable",
                    protocol_data=f"by-{self.id}",
                )
                for g in request.group_ids
            ]
        )

    async def DeleteGroups(self, request: Any, context: Any) -> Any:
        self.calls.append(("DeleteGroups", list(request.group_ids)))
        results = []
        for g in request.group_ids:
            code = self._refusal(g)
            if code == 0 and g.startswith("busy"):
                code = ErrorCode.NON_EMPTY_GROUP
            results.append(pb.DeleteGroupResult(group_id=g, error_code=code))
        return pb.DeleteGroupsResponse(results=results)


class FakeTxnCoordinator(transaction_pb2_grpc.TransactionCoordinatorServicer):
    """The TransactionCoordinator side of a ``FakeCoordinator`` (its calls, loading and
    directory); producer ids are 1000 + the coordinator id."""

    def __init__(self, coordinator: FakeCoordinator) -> None:
        self.c = coordinator

    def _refusal(self, transactional_id: str) -> int:
        if self.c.directory.txn_owners.get(transactional_id) != self.c.id:
            return ErrorCode.NOT_COORDINATOR
        if self.c.loading > 0:
            self.c.loading -= 1
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return 0

    async def InitProducerId(self, request: Any, context: Any) -> Any:
        self.c.calls.append(("InitProducerId", request.transactional_id))
        code = self._refusal(request.transactional_id)
        return controller_pb2.InitProducerIdResponse(
            error_code=code, producer_id=-1 if code else 1000 + self.c.id, producer_epoch=0
        )

    async def AddPartitionsToTxn(self, request: Any, context: Any) -> Any:
        self.c.calls.append(("AddPartitionsToTxn", request.transactional_id))
        code = self._refusal(request.transactional_id)
        return txn.AddPartitionsToTxnResponse(
            error_code=code,
            results=[
                txn.AddPartitionsToTxnResult(topic=p.topic, partition=p.partition, error_code=code)
                for p in request.partitions
            ],
        )

    async def AddOffsetsToTxn(self, request: Any, context: Any) -> Any:
        self.c.calls.append(("AddOffsetsToTxn", request.transactional_id))
        return txn.AddOffsetsToTxnResponse(error_code=self._refusal(request.transactional_id))

    async def EndTxn(self, request: Any, context: Any) -> Any:
        self.c.calls.append(("EndTxn", request.transactional_id))
        code = self._refusal(request.transactional_id)
        epoch = request.producer_epoch + 1
        return txn.EndTxnResponse(
            error_code=code, producer_id=request.producer_id, producer_epoch=epoch
        )

    async def ListTransactions(self, request: Any, context: Any) -> Any:
        self.c.calls.append(("ListTransactions", None))
        mine = sorted(t for t, owner in self.c.directory.txn_owners.items() if owner == self.c.id)
        return txn.ListTransactionsResponse(
            transactions=[txn.ListedTransaction(transactional_id=t, producer_id=1000 + self.c.id,
                                                state="Ongoing") for t in mine]
        )  # fmt: skip

    async def DescribeTransactions(self, request: Any, context: Any) -> Any:
        self.c.calls.append(("DescribeTransactions", list(request.transactional_ids)))
        return txn.DescribeTransactionsResponse(
            transactions=[
                txn.DescribedTransaction(
                    transactional_id=t,
                    error_code=self._refusal(t),
                    state="Ongoing",
                    coordinator_id=self.c.id,
                )
                for t in request.transactional_ids
            ]
        )


@dataclass
class StaticSource:
    """A CoordinatorSource whose registrations the test edits."""

    registered: dict[int, str] = field(default_factory=dict)
    refreshes: int = 0

    @property
    def addresses(self) -> dict[int, str]:
        return dict(self.registered)

    async def refresh(self) -> dict[int, str]:
        self.refreshes += 1
        return dict(self.registered)


@asynccontextmanager
async def serving(coordinator: FakeCoordinator) -> AsyncIterator[grpc.aio.Server]:
    """Serve ``coordinator`` on a free loopback port (recorded in its directory)."""
    server = grpc.aio.server()
    coordinator_pb2_grpc.add_GroupCoordinatorServicer_to_server(coordinator, server)
    transaction_pb2_grpc.add_TransactionCoordinatorServicer_to_server(
        FakeTxnCoordinator(coordinator), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    coordinator.directory.ports[coordinator.id] = port
    coordinator.server = server
    await server.start()
    try:
        yield server
    finally:
        await server.stop(0)
