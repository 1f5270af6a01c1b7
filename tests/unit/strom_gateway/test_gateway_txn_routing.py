"""Where the gateway sends each transaction RPC: a real GatewayServicer on a grpc.aio server in
front of an in-process controller and two in-process coordinators (GroupCoordinator and
TransactionCoordinator each)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import pytest
from gateway_coordinator_fakes import Directory, FakeCoordinator, StaticSource, serving

from strom.errors import ErrorCode
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
    gateway_pb2_grpc,
)
from strom.protocol.v1 import coordinator_pb2 as pb
from strom.protocol.v1 import transaction_pb2 as txn
from strom_gateway.api.servicer import GatewayServicer, add_to_server
from strom_gateway.routing.byte_budget import ByteBudget
from strom_gateway.routing.controller import ControllerRouter
from strom_gateway.routing.coordinators import CoordinatorRouter, is_controller_producer_id
from strom_gateway.routing.data_path import DataPath
from strom_gateway.routing.leaders import LeaderRouter
from strom_gateway.routing.metadata_cache import MetadataCache

pytestmark = pytest.mark.timeout(60)

MAX = 4 << 20


class FakeController(controller_pb2_grpc.ControllerServicer):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def InitProducerId(self, request: Any, context: Any) -> Any:
        self.calls.append(request.transactional_id)
        return controller_pb2.InitProducerIdResponse(producer_id=7, producer_epoch=0)


@dataclass
class FixedLocator:
    """The active controller's address, fixed (the router's ControllerLocator reads etcd)."""

    address: str

    async def refresh(self) -> str:
        return self.address


@dataclass
class Rig:
    gateway: gateway_pb2_grpc.GatewayStub
    controller: FakeController
    one: FakeCoordinator
    two: FakeCoordinator
    source: StaticSource

    @property
    def directory(self) -> Directory:
        return self.one.directory

    def calls(self, method: str) -> list[tuple[int, Any]]:
        """(coordinator id, key) of each ``method`` call, in order per coordinator."""
        return [(c.id, key) for c in (self.one, self.two) for m, key in c.calls if m == method]


@asynccontextmanager
async def rig() -> AsyncIterator[Rig]:
    directory = Directory()
    one, two = FakeCoordinator(1, directory), FakeCoordinator(2, directory)
    controller = FakeController()
    controller_server = grpc.aio.server()
    controller_pb2_grpc.add_ControllerServicer_to_server(controller, controller_server)
    controller_port = controller_server.add_insecure_port("127.0.0.1:0")
    await controller_server.start()
    async with serving(one), serving(two):
        source = StaticSource({i: f"127.0.0.1:{p}" for i, p in directory.ports.items()})
        locator = FixedLocator(f"127.0.0.1:{controller_port}")
        router = ControllerRouter(locator, max_message_size=MAX)  # type: ignore[arg-type]
        coordinators = CoordinatorRouter(source, max_message_size=MAX)
        leaders = LeaderRouter(MetadataCache(router, max_age_s=60), max_message_size=MAX)
        servicer = GatewayServicer(
            router, coordinators, DataPath(leaders, ByteBudget(MAX)), default_timeout_s=5
        )
        server = grpc.aio.server()
        add_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        try:
            yield Rig(gateway_pb2_grpc.GatewayStub(channel), controller, one, two, source)
        finally:
            await channel.close()
            await server.stop(0)
            await coordinators.close()
            await leaders.close()
            await router.close()
            await controller_server.stop(0)


def run(scenario: Callable[[Rig], Awaitable[None]]) -> None:
    async def main() -> None:
        async with rig() as r:
            await scenario(r)

    asyncio.run(main())


def test_init_producer_id_goes_to_the_controller_or_the_transaction_coordinator() -> None:
    assert is_controller_producer_id("")
    assert is_controller_producer_id("__strom_coordinator-offsets-3")
    assert not is_controller_producer_id("app-1")
    assert not is_controller_producer_id("_strom_lookalike")

    async def scenario(r: Rig) -> None:
        r.directory.txn_owners["app-1"] = 2
        r.directory.txn_owners["__strom_coordinator-offsets-3"] = 1  # never asked
        for tid in ("", "__strom_coordinator-offsets-3"):
            answer = await r.gateway.InitProducerId(
                controller_pb2.InitProducerIdRequest(transactional_id=tid), timeout=5
            )
            assert (answer.error_code, answer.producer_id) == (0, 7)
        assert r.controller.calls == ["", "__strom_coordinator-offsets-3"]
        answer = await r.gateway.InitProducerId(
            controller_pb2.InitProducerIdRequest(transactional_id="app-1"), timeout=5
        )
        assert (answer.error_code, answer.producer_id) == (0, 1002)
        assert r.calls("InitProducerId") == [(2, "app-1")]
        assert r.controller.calls == ["", "__strom_coordinator-offsets-3"]

    run(scenario)


def test_transaction_calls_find_the_coordinator_by_transactional_id_and_follow_a_move() -> None:
    async def scenario(r: Rig) -> None:
        r.directory.txn_owners["app"] = 1
        r.directory.owners["app"] = 2  # the same string as a group id lives elsewhere
        part = common_pb2.TopicPartition(topic="t", partition=0)
        added = await r.gateway.AddPartitionsToTxn(
            txn.AddPartitionsToTxnRequest(transactional_id="app", partitions=[part]), timeout=5
        )
        assert added.error_code == 0 and [x.error_code for x in added.results] == [0]
        offsets = await r.gateway.AddOffsetsToTxn(
            txn.AddOffsetsToTxnRequest(transactional_id="app", group_id="g"), timeout=5
        )
        assert offsets.error_code == 0
        finds = [key for _, key in r.calls("FindCoordinator")]
        assert finds == ["txn:app"]  # looked up once, with key_type TRANSACTION, then cached
        # The group of the same name is cached apart.
        await r.gateway.Heartbeat(pb.HeartbeatRequest(group_id="app"), timeout=5)
        assert r.calls("Heartbeat") == [(2, "app")]
        # The transactional id moves: NOT_COORDINATOR, found again, answered by the new owner.
        r.directory.txn_owners["app"] = 2
        ended = await r.gateway.EndTxn(
            txn.EndTxnRequest(transactional_id="app", producer_id=5, producer_epoch=3), timeout=5
        )
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, 5, 4)
        assert r.calls("EndTxn") == [(1, "app"), (2, "app")]
        assert r.calls("AddPartitionsToTxn") == [(1, "app")]
        assert r.calls("AddOffsetsToTxn") == [(1, "app")]

    run(scenario)


def test_transaction_calls_retry_while_loading_and_answer_an_error_when_nobody_owns_it() -> None:
    async def scenario(r: Rig) -> None:
        r.directory.txn_owners["app"] = 2
        r.two.loading = 2
        ended = await r.gateway.EndTxn(txn.EndTxnRequest(transactional_id="app"), timeout=5)
        assert ended.error_code == 0
        assert r.calls("EndTxn") == [(2, "app")] * 3
        r.source.registered.clear()
        ended = await r.gateway.EndTxn(txn.EndTxnRequest(transactional_id="app"), timeout=5)
        assert ended.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert (ended.producer_id, ended.producer_epoch) == (-1, -1)
        add = txn.AddPartitionsToTxnRequest(
            transactional_id="app", partitions=[common_pb2.TopicPartition(topic="t")]
        )
        added = await r.gateway.AddPartitionsToTxn(add, timeout=5)
        assert added.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert [x.error_code for x in added.results] == [ErrorCode.COORDINATOR_NOT_AVAILABLE]

    run(scenario)


def test_txn_offset_commit_goes_to_the_groups_coordinator() -> None:
    async def scenario(r: Rig) -> None:
        r.directory.owners["g"] = 2
        r.directory.txn_owners["app"] = 1
        request = pb.TxnOffsetCommitRequest(
            transactional_id="app",
            group_id="g",
            partitions=[pb.OffsetCommitPartition(topic="t", partition=4, committed_offset=9)],
        )
        answer = await r.gateway.TxnOffsetCommit(request, timeout=5)
        assert [(p.topic, p.partition, p.error_code) for p in answer.partitions] == [("t", 4, 0)]
        assert r.calls("TxnOffsetCommit") == [(2, "g")]

    run(scenario)


def test_find_coordinator_passes_the_key_type_through() -> None:
    async def scenario(r: Rig) -> None:
        r.directory.owners["k"] = 1
        r.directory.txn_owners["k"] = 2
        group = await r.gateway.FindCoordinator(pb.FindCoordinatorRequest(group_id="k"), timeout=5)
        found = await r.gateway.FindCoordinator(
            pb.FindCoordinatorRequest(group_id="k", key_type=pb.TRANSACTION), timeout=5
        )
        assert (group.coordinator.node_id, found.coordinator.node_id) == (1, 2)

    run(scenario)


def test_list_transactions_merges_every_coordinator_and_names_unreachable_ones() -> None:
    async def scenario(r: Rig) -> None:
        r.directory.txn_owners.update({"a": 1, "b": 2, "c": 2})
        listed = await r.gateway.ListTransactions(txn.ListTransactionsRequest(), timeout=5)
        assert listed.error_code == 0 and not listed.unreachable_coordinators
        assert sorted(t.transactional_id for t in listed.transactions) == ["a", "b", "c"]
        r.source.registered[3] = "127.0.0.1:1"  # registered, but nothing listens there
        listed = await r.gateway.ListTransactions(txn.ListTransactionsRequest(), timeout=5)
        assert sorted(t.transactional_id for t in listed.transactions) == ["a", "b", "c"]
        assert list(listed.unreachable_coordinators) == [3]
        assert listed.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE

    run(scenario)


def test_describe_transactions_is_split_by_coordinator_in_request_order() -> None:
    async def scenario(r: Rig) -> None:
        r.directory.txn_owners.update({"a": 1, "b": 2, "c": 1})
        request = txn.DescribeTransactionsRequest(transactional_ids=["c", "b", "a", "nobody"])
        described = await r.gateway.DescribeTransactions(request, timeout=2)
        assert [(d.transactional_id, d.coordinator_id) for d in described.transactions] == [
            ("c", 1),
            ("b", 2),
            ("a", 1),
            ("nobody", 0),
        ]
        assert described.transactions[3].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert sorted(r.calls("DescribeTransactions")) == [(1, ["c", "a"]), (2, ["b"])]

    run(scenario)
