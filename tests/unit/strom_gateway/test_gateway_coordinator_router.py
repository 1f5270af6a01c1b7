"""CoordinatorRouter against two in-process coordinators: round robin, failover, retries on
coordinator errors, merged ListGroups and split Describe/DeleteGroups."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from gateway_coordinator_fakes import Directory, FakeCoordinator, StaticSource, serving

from strom.errors import ErrorCode
from strom.protocol.v1 import coordinator_pb2 as pb
from strom_gateway.routing.coordinators import CoordinatorRouter

pytestmark = pytest.mark.timeout(60)

Scenario = Callable[
    [CoordinatorRouter, StaticSource, FakeCoordinator, FakeCoordinator], Awaitable[None]
]


@asynccontextmanager
async def two_coordinators() -> AsyncIterator[
    tuple[CoordinatorRouter, StaticSource, FakeCoordinator, FakeCoordinator]
]:
    directory = Directory()
    one, two = FakeCoordinator(1, directory), FakeCoordinator(2, directory)
    async with serving(one), serving(two):
        source = StaticSource({i: f"127.0.0.1:{p}" for i, p in directory.ports.items()})
        router = CoordinatorRouter(source, max_message_size=4 << 20)
        try:
            yield router, source, one, two
        finally:
            await router.close()


def run(scenario: Scenario) -> None:
    async def main() -> None:
        async with two_coordinators() as parts:
            await scenario(*parts)

    asyncio.run(main())


def test_find_coordinator_round_robin_and_skips_an_unreachable_one() -> None:
    async def scenario(
        router: CoordinatorRouter, source: StaticSource, one: FakeCoordinator, two: FakeCoordinator
    ) -> None:
        one.directory.owners["g"] = 2
        for _ in range(4):
            response = await router.find_coordinator(pb.FindCoordinatorRequest(group_id="g"), 5)
            assert response.error_code == 0
            assert response.coordinator.node_id == 2
        assert len(one.calls) == 2 and len(two.calls) == 2
        source.registered[3] = "127.0.0.1:1"  # registered but nothing listens there
        for _ in range(3):
            response = await router.find_coordinator(pb.FindCoordinatorRequest(group_id="g"), 5)
            assert response.error_code == 0 and response.coordinator.node_id == 2

    run(scenario)


def test_no_coordinator_registered_is_an_error_code_at_once() -> None:
    async def scenario(
        router: CoordinatorRouter, source: StaticSource, one: FakeCoordinator, two: FakeCoordinator
    ) -> None:
        source.registered.clear()
        loop = asyncio.get_running_loop()
        started = loop.time()
        found = await router.find_coordinator(pb.FindCoordinatorRequest(group_id="g"), 10)
        assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        beat = await router.call("Heartbeat", pb.HeartbeatRequest(group_id="g"), 10)
        assert beat.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        commit = await router.call(
            "OffsetCommit",
            pb.OffsetCommitRequest(
                group_id="g", partitions=[pb.OffsetCommitPartition(topic="t", partition=3)]
            ),
            10,
        )
        assert [(p.topic, p.partition, p.error_code) for p in commit.partitions] == [
            ("t", 3, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        ]
        listed = await router.list_groups(pb.ListGroupsRequest(), 10)
        assert listed.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        described = await router.describe_groups(pb.DescribeGroupsRequest(group_ids=["a", "b"]), 10)
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("a", ErrorCode.COORDINATOR_NOT_AVAILABLE),
            ("b", ErrorCode.COORDINATOR_NOT_AVAILABLE),
        ]
        assert loop.time() - started < 5  # nothing waited for the 10 s deadline

    run(scenario)


def test_group_call_goes_to_the_owner_and_follows_a_move() -> None:
    async def scenario(
        router: CoordinatorRouter, source: StaticSource, one: FakeCoordinator, two: FakeCoordinator
    ) -> None:
        directory = one.directory
        directory.owners["g"] = 2
        for _ in range(3):
            response = await router.call("Heartbeat", pb.HeartbeatRequest(group_id="g"), 5)
            assert response.error_code == 0
        beats = [c for c in one.calls + two.calls if c[0] == "Heartbeat"]
        assert beats == [("Heartbeat", "g")] * 3 and ("Heartbeat", "g") in two.calls
        finds = [c for c in one.calls + two.calls if c[0] == "FindCoordinator"]
        assert len(finds) == 1  # cached after the first lookup
        directory.owners["g"] = 1  # the group moved: the old owner answers NOT_COORDINATOR
        response = await router.call("Heartbeat", pb.HeartbeatRequest(group_id="g"), 5)
        assert response.error_code == 0
        assert one.calls[-1] == ("Heartbeat", "g")

    run(scenario)


def test_group_call_retries_while_loading_then_answers() -> None:
    async def scenario(
        router: CoordinatorRouter, source: StaticSource, one: FakeCoordinator, two: FakeCoordinator
    ) -> None:
        one.directory.owners["g"] = 1
        one.loading = 3
        response = await router.call("Heartbeat", pb.HeartbeatRequest(group_id="g"), 10)
        assert response.error_code == 0
        assert one.calls.count(("Heartbeat", "g")) == 4

    run(scenario)


def test_group_call_gives_the_last_answer_when_the_deadline_passes() -> None:
    async def scenario(
        router: CoordinatorRouter, source: StaticSource, one: FakeCoordinator, two: FakeCoordinator
    ) -> None:
        one.directory.owners["g"] = 1
        one.loading = 10**6
        response = await router.call("Heartbeat", pb.HeartbeatRequest(group_id="g"), 0.5)
        assert response.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        # The owner dies: an unreachable coordinator becomes COORDINATOR_NOT_AVAILABLE.
        assert one.server is not None
        await one.server.stop(0)
        response = await router.call("Heartbeat", pb.HeartbeatRequest(group_id="g"), 0.5)
        assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE

    run(scenario)


def test_list_groups_merges_every_coordinator() -> None:
    async def scenario(
        router: CoordinatorRouter, source: StaticSource, one: FakeCoordinator, two: FakeCoordinator
    ) -> None:
        one.directory.owners.update({"a": 1, "b": 2, "c": 1})
        response = await router.list_groups(pb.ListGroupsRequest(), 5)
        assert response.error_code == 0
        assert sorted(g.group_id for g in response.groups) == ["a", "b", "c"]
        source.registered[3] = source.registered[2]  # the same groups twice: one entry each
        response = await router.list_groups(pb.ListGroupsRequest(), 5)
        assert sorted(g.group_id for g in response.groups) == ["a", "b", "c"]
        source.registered[4] = "127.0.0.1:1"  # unreachable: its part is missing, said so
        response = await router.list_groups(pb.ListGroupsRequest(), 5)
        assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert sorted(g.group_id for g in response.groups) == ["a", "b", "c"]

    run(scenario)


def test_describe_and_delete_are_split_by_coordinator_in_request_order() -> None:
    async def scenario(
        router: CoordinatorRouter, source: StaticSource, one: FakeCoordinator, two: FakeCoordinator
    ) -> None:
        one.directory.owners.update({"a": 1, "b": 2, "c": 1, "busy": 2})
        ids = ["c", "b", "a", "c"]
        response = await router.describe_groups(pb.DescribeGroupsRequest(group_ids=ids), 5)
        assert [(g.group_id, g.error_code, g.protocol_data) for g in response.groups] == [
            ("c", 0, "by-1"), ("b", 0, "by-2"), ("a", 0, "by-1"), ("c", 0, "by-1"),
        ]  # fmt: skip
        assert ("DescribeGroups", ["c", "a"]) in one.calls
        assert ("DescribeGroups", ["b"]) in two.calls
        one.directory.owners["a"] = 2  # moved: retried on its new coordinator
        response = await router.delete_groups(
            pb.DeleteGroupsRequest(group_ids=["busy", "a", "nobody"]), 1.0
        )
        assert [(r.group_id, r.error_code) for r in response.results] == [
            ("busy", ErrorCode.NON_EMPTY_GROUP),
            ("a", 0),
            ("nobody", ErrorCode.COORDINATOR_NOT_AVAILABLE),  # no owner before the deadline
        ]

    run(scenario)
