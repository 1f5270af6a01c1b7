"""Small in-process group coordinators on real grpc.aio servers, for the gateway's router tests.

A shared ``Directory`` says which coordinator owns each group; a coordinator answers
NOT_COORDINATOR for groups it does not own, and COORDINATOR_LOAD_IN_PROGRESS while its
``loading`` counter is above zero (one answer per unit).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2, coordinator_pb2, coordinator_pb2_grpc

pb = coordinator_pb2


@dataclass
class Directory:
    """group id -> owning coordinator id; coordinator id -> port."""

    owners: dict[str, int] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)


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
        owner = self.directory.owners.get(request.group_id)
        if owner is None:
            return pb.FindCoordinatorResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        node = common_pb2.Node(node_id=owner, host="127.0.0.1", port=self.directory.ports[owner])
        return pb.FindCoordinatorResponse(coordinator=node)

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        self.calls.append(("Heartbeat", request.group_id))
        return pb.HeartbeatResponse(error_code=self._refusal(request.group_id))

    async def OffsetCommit(self, request: Any, context: Any) -> Any:
        self.calls.append(("OffsetCommit", request.group_id))
        code = self._refusal(request.group_id)
        return pb.OffsetCommitResponse(
            partitions=[
                pb.OffsetCommitPartitionResult(
                    topic=p.topic, partition=p.partition, error_code=code
                )
                for p in request.partitions
            ]
        )

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
    port = server.add_insecure_port("127.0.0.1:0")
    coordinator.directory.ports[coordinator.id] = port
    coordinator.server = server
    await server.start()
    try:
        yield server
    finally:
        await server.stop(0)
