"""A local cluster with two group coordinators, and raw group-protocol calls through the
gateway (``GroupMember``) to create group state without the consumer."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import grpc
import pytest
from cluster_testkit import LocalCluster, start_local_cluster

from strom import Admin, NewTopic
from strom.cluster import channel_options
from strom.errors import ErrorCode
from strom.group.protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from strom.protocol.v1 import coordinator_pb2 as pb
from strom.protocol.v1 import gateway_pb2_grpc
from strom.types import TopicPartition

__all__ = ["GroupMember", "commit", "create_topic", "gateway_stub", "groups_cluster"]

#: Groups form at once and members may use short sessions.
FAST_GROUPS = (
    "--group-initial-rebalance-delay-ms", "0",
    "--group-min-session-timeout-ms", "500",
)  # fmt: skip


@pytest.fixture(scope="module")
def groups_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One cluster (2 coordinators) for the whole test module."""
    yield from start_local_cluster(
        tmp_path_factory.mktemp("groups-cluster"), coordinators=2, coordinator_flags=FAST_GROUPS
    )


def gateway_stub(cluster: LocalCluster) -> gateway_pb2_grpc.GatewayStub:
    channel = grpc.insecure_channel(cluster.gateway, options=channel_options())
    return gateway_pb2_grpc.GatewayStub(channel)


def create_topic(admin: Admin, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])


def commit(
    stub: gateway_pb2_grpc.GatewayStub,
    group_id: str,
    offsets: dict[TopicPartition, int],
    *,
    generation_id: int = -1,
    member_id: str = "",
) -> dict[TopicPartition, int]:
    """OffsetCommit through the gateway; returns each partition's error code."""
    request = pb.OffsetCommitRequest(
        group_id=group_id, generation_id=generation_id, member_id=member_id
    )
    for tp, offset in offsets.items():
        request.partitions.add(topic=tp.topic, partition=tp.partition, committed_offset=offset)
    response = stub.OffsetCommit(request, timeout=30)
    return {TopicPartition(p.topic, p.partition): p.error_code for p in response.partitions}


@dataclass
class GroupMember:
    """A consumer-protocol member driven by hand: join, sync (as leader it assigns
    ``partitions`` to itself), heartbeat, leave."""

    stub: gateway_pb2_grpc.GatewayStub
    group_id: str
    topics: Sequence[str]
    partitions: Sequence[TopicPartition] = ()
    session_timeout_ms: int = 30000
    client_id: str = "groups-test"
    member_id: str = ""
    generation_id: int = -1
    joined: list[pb.JoinGroupResponse] = field(default_factory=list)

    def join(self) -> pb.JoinGroupResponse:
        request = pb.JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=10000,
            member_id=self.member_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[
                pb.GroupProtocol(
                    name="range", metadata=encode_subscription(Subscription(list(self.topics)))
                )
            ],
            client_id=self.client_id,
        )
        response = self.stub.JoinGroup(request, timeout=60)
        if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            request.member_id = self.member_id = response.member_id
            response = self.stub.JoinGroup(request, timeout=60)
        assert response.error_code == 0, response
        self.member_id, self.generation_id = response.member_id, response.generation_id
        self.joined.append(response)
        return response

    def sync(self) -> list[TopicPartition]:
        request = pb.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name="range",
        )
        if self.joined[-1].leader == self.member_id:
            request.assignments.add(
                member_id=self.member_id,
                assignment=encode_assignment(Assignment(list(self.partitions))),
            )
        response = self.stub.SyncGroup(request, timeout=60)
        assert response.error_code == 0, response
        return decode_assignment(response.assignment).partitions

    def start(self) -> list[TopicPartition]:
        self.join()
        return self.sync()

    def heartbeat(self) -> int:
        request = pb.HeartbeatRequest(
            group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id
        )
        return int(self.stub.Heartbeat(request, timeout=30).error_code)

    def commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return commit(
            self.stub,
            self.group_id,
            offsets,
            generation_id=self.generation_id,
            member_id=self.member_id,
        )

    def leave(self) -> int:
        request = pb.LeaveGroupRequest(
            group_id=self.group_id, members=[pb.LeavingMember(member_id=self.member_id)]
        )
        return int(self.stub.LeaveGroup(request, timeout=30).error_code)
