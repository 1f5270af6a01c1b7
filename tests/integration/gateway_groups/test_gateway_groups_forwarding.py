"""The gateway forwards every group RPC to the right one of two coordinators (real processes):
FindCoordinator, commits and fetches, merged ListGroups, split DescribeGroups, a member's
join/sync/heartbeat/leave, and failover when a coordinator stops."""

from __future__ import annotations

import grpc
import pytest
from cluster_testkit import LocalCluster, wait_until
from gateway_groups_testkit import GroupMember, commit, create_topic, gateway_stub

from strom.cluster import channel_options
from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2, coordinator_pb2_grpc
from strom.protocol.v1 import coordinator_pb2 as pb
from strom.types import TopicPartition

pytestmark = pytest.mark.integration

GROUPS = [f"fwd-{i}" for i in range(12)]
TOPIC = "fwd-topic"


def coordinator_addresses(cluster: LocalCluster) -> dict[int, str]:
    return {
        int(name.rpartition("-")[2]): process.address
        for name, process in cluster.processes.items()
        if name.startswith("coordinator-") and process.exit_code() is None
    }


def find(stub: object, group_id: str) -> pb.FindCoordinatorResponse:
    request = pb.FindCoordinatorRequest(group_id=group_id)
    return stub.FindCoordinator(request, timeout=30)  # type: ignore[attr-defined]


def test_find_coordinator_names_a_live_coordinator(groups_cluster: LocalCluster) -> None:
    stub = gateway_stub(groups_cluster)
    live = coordinator_addresses(groups_cluster)
    assert len(live) == 2

    def everyone_found() -> dict[str, int] | None:
        answers = {g: find(stub, g) for g in GROUPS}
        if any(a.error_code for a in answers.values()):
            return None  # __consumer_offsets is being created or loaded
        owners = {g: a.coordinator.node_id for g, a in answers.items()}
        # Both coordinators serve some of the groups once partitions settled (rendezvous
        # hashing spreads the partitions), so the split RPCs below really are split.
        return owners if set(owners.values()) == set(live) else None

    owners = wait_until(everyone_found, 60, "both coordinators to serve some of the groups")
    for group_id, owner in owners.items():
        answer = find(stub, group_id)
        assert f"{answer.coordinator.host}:{answer.coordinator.port}" == live[owner]
        # The coordinator itself agrees.
        with grpc.insecure_channel(live[owner], options=channel_options()) as channel:
            direct = coordinator_pb2_grpc.GroupCoordinatorStub(channel)
            assert find(direct, group_id).coordinator.node_id == owner


def test_commit_fetch_list_and_describe_through_the_gateway(groups_cluster: LocalCluster) -> None:
    stub = gateway_stub(groups_cluster)
    with groups_cluster.admin() as admin:
        create_topic(admin, TOPIC, 2)
    for i, group_id in enumerate(GROUPS):
        codes = commit(
            stub, group_id, {TopicPartition(TOPIC, 0): i, TopicPartition(TOPIC, 1): 2 * i}
        )
        assert set(codes.values()) == {0}, (group_id, codes)
    for i, group_id in enumerate(GROUPS):
        fetched = stub.OffsetFetch(pb.OffsetFetchRequest(group_id=group_id), timeout=30)
        assert fetched.error_code == 0
        assert {(p.topic, p.partition, p.committed_offset) for p in fetched.partitions} == {
            (TOPIC, 0, i),
            (TOPIC, 1, 2 * i),
        }
    listed = stub.ListGroups(pb.ListGroupsRequest(), timeout=30)
    assert listed.error_code == 0
    names = [g.group_id for g in listed.groups]
    assert set(GROUPS) <= set(names) and len(names) == len(set(names))
    assert all(g.group_state == "Empty" for g in listed.groups if g.group_id in GROUPS)
    order = [*reversed(GROUPS), "fwd-unknown"]
    described = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=order), timeout=30)
    assert [g.group_id for g in described.groups] == order
    assert [g.group_state for g in described.groups] == ["Empty"] * len(GROUPS) + ["Dead"]
    assert all(g.error_code == 0 for g in described.groups)


def test_a_member_joins_syncs_heartbeats_and_leaves(groups_cluster: LocalCluster) -> None:
    stub = gateway_stub(groups_cluster)
    tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    member = GroupMember(stub, "fwd-member", [TOPIC], tps)
    assert member.start() == tps
    assert member.heartbeat() == 0
    assert set(member.commit({tps[0]: 5}).values()) == {0}
    (group,) = stub.DescribeGroups(
        pb.DescribeGroupsRequest(group_ids=["fwd-member"]), timeout=30
    ).groups
    assert group.group_state == "Stable" and group.protocol_data == "range"
    assert [m.member_id for m in group.members] == [member.member_id]
    # A commit outside the generation is refused while the group has a member.
    refused = commit(stub, "fwd-member", {tps[0]: 1})
    assert set(refused.values()) - {0}, refused
    assert member.leave() == 0
    (group,) = stub.DescribeGroups(
        pb.DescribeGroupsRequest(group_ids=["fwd-member"]), timeout=30
    ).groups
    assert group.group_state == "Empty" and not group.members
    deleted = stub.DeleteGroups(
        pb.DeleteGroupsRequest(group_ids=["fwd-member", "fwd-never"]), timeout=30
    )
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("fwd-member", 0),
        ("fwd-never", ErrorCode.GROUP_ID_NOT_FOUND),
    ]


def test_groups_survive_a_coordinator_stop(groups_cluster: LocalCluster) -> None:
    stub = gateway_stub(groups_cluster)
    owners = {g: find(stub, g).coordinator.node_id for g in GROUPS}
    victim = min(owners.values())
    moved = [g for g, owner in owners.items() if owner == victim]
    groups_cluster.stop(f"coordinator-{victim}")

    def served_elsewhere() -> bool:
        for group_id in moved:
            answer = find(stub, group_id)
            if answer.error_code or answer.coordinator.node_id == victim:
                return False
        return True

    wait_until(served_elsewhere, 60, "the other coordinator to take over")
    for group_id in moved:
        i = GROUPS.index(group_id)
        request = pb.OffsetFetchRequest(
            group_id=group_id, partitions=[common_pb2.TopicPartition(topic=TOPIC, partition=1)]
        )
        fetched = stub.OffsetFetch(request, timeout=30)
        assert fetched.error_code == 0
        assert [p.committed_offset for p in fetched.partitions] == [2 * i]
    listed = stub.ListGroups(pb.ListGroupsRequest(), timeout=30)
    assert listed.error_code == 0 and set(GROUPS) <= {g.group_id for g in listed.groups}
    groups_cluster.restart(f"coordinator-{victim}")
