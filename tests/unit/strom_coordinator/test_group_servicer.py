"""The GroupCoordinator servicer: protobuf in and out, every failure in the error fields."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from group_unitkit import serving_manager

from strom.errors import CoordinatorNotAvailableError, ErrorCode
from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import coordinator_pb2 as pb
from strom_coordinator.convert import peer_host
from strom_coordinator.group.manager import GroupManager
from strom_coordinator.servicer import GroupCoordinatorServicer


class Context:
    def peer(self) -> str:
        return "ipv4:10.1.2.3:5555"


class Directory:
    def __init__(self) -> None:
        self.available = True

    async def find(self, group_id: str, key_type: int = 0) -> tuple[int, str, int]:
        if not self.available:
            raise CoordinatorNotAvailableError("__consumer_offsets has no owner yet")
        return 2, "127.0.0.1", 7000


def run(
    scenario: Callable[[GroupCoordinatorServicer, GroupManager, Directory], Awaitable[None]],
) -> None:
    async def main() -> None:
        manager = serving_manager()
        directory = Directory()
        await scenario(GroupCoordinatorServicer(manager, directory), manager, directory)

    asyncio.run(main())


CTX = Context()


def join_request(member_id: str = "", **kw: object) -> pb.JoinGroupRequest:
    fields: dict[str, object] = {
        "group_id": "g",
        "session_timeout_ms": 1000,
        "rebalance_timeout_ms": 1000,
        "member_id": member_id,
        "protocol_type": "consumer",
        "client_id": "cli",
        "protocols": [pb.GroupProtocol(name="range", metadata=b"m")],
    }
    fields.update(kw)
    return pb.JoinGroupRequest(**fields)  # type: ignore[arg-type]


def test_full_round_through_protobuf() -> None:
    async def scenario(s: GroupCoordinatorServicer, m: GroupManager, d: Directory) -> None:
        found = await s.FindCoordinator(pb.FindCoordinatorRequest(group_id="g"), CTX)
        assert (found.error_code, found.coordinator.node_id, found.coordinator.port) == (0, 2, 7000)
        d.available = False
        found = await s.FindCoordinator(pb.FindCoordinatorRequest(group_id="g"), CTX)
        assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and found.error_message
        first = await s.JoinGroup(join_request(), CTX)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
        joined = await s.JoinGroup(join_request(first.member_id), CTX)
        assert joined.error_code == 0 and joined.generation_id == 1
        assert joined.leader == first.member_id and joined.members[0].metadata == b"m"
        sync = await s.SyncGroup(
            pb.SyncGroupRequest(
                group_id="g",
                generation_id=1,
                member_id=first.member_id,
                assignments=[pb.SyncGroupAssignment(member_id=first.member_id, assignment=b"a")],
            ),
            CTX,
        )
        assert sync.error_code == 0 and sync.assignment == b"a"
        committed = await s.OffsetCommit(
            pb.OffsetCommitRequest(
                group_id="g",
                generation_id=1,
                member_id=first.member_id,
                partitions=[pb.OffsetCommitPartition(topic="t", partition=0, committed_offset=9)],
            ),
            CTX,
        )
        assert [p.error_code for p in committed.partitions] == [0]
        fetched = await s.OffsetFetch(pb.OffsetFetchRequest(group_id="g"), CTX)
        assert [(p.topic, p.committed_offset) for p in fetched.partitions] == [("t", 9)]
        described = await s.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["g"]), CTX)
        member = described.groups[0].members[0]
        assert described.groups[0].group_state == "Stable" and member.client_host == "/10.1.2.3"
        listed = await s.ListGroups(pb.ListGroupsRequest(), CTX)
        assert [g.group_id for g in listed.groups] == ["g"]
        left = await s.LeaveGroup(
            pb.LeaveGroupRequest(group_id="g", members=[pb.LeavingMember(member_id="ghost")]), CTX
        )
        assert left.error_code == 0 and left.members[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
        deleted = await s.DeleteGroups(pb.DeleteGroupsRequest(group_ids=["g", "x"]), CTX)
        assert [r.error_code for r in deleted.results] == [
            ErrorCode.NON_EMPTY_GROUP,
            ErrorCode.GROUP_ID_NOT_FOUND,
        ]

    run(scenario)


def test_errors_land_in_error_fields() -> None:
    async def scenario(s: GroupCoordinatorServicer, m: GroupManager, d: Directory) -> None:
        bad = await s.JoinGroup(join_request(session_timeout_ms=-5), CTX)
        assert bad.error_code == ErrorCode.INVALID_SESSION_TIMEOUT and bad.error_message
        huge = await s.JoinGroup(join_request(group_id="g" * 100_000), CTX)
        assert huge.error_code == ErrorCode.INVALID_GROUP_ID
        hb = await s.Heartbeat(
            pb.HeartbeatRequest(group_id="g", generation_id=2**31 - 1, member_id="x"), CTX
        )
        assert hb.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        commit = await s.OffsetCommit(
            pb.OffsetCommitRequest(
                group_id="g",
                generation_id=3,
                member_id="x",
                partitions=[pb.OffsetCommitPartition(topic="t", partition=p) for p in (0, 1)],
            ),
            CTX,
        )
        assert [p.error_code for p in commit.partitions] == [ErrorCode.ILLEGAL_GENERATION] * 2
        m.partition_count = None
        fetch = await s.OffsetFetch(
            pb.OffsetFetchRequest(
                group_id="g", partitions=[common_pb2.TopicPartition(topic="t", partition=0)]
            ),
            CTX,
        )
        assert fetch.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        described = await s.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["a", "b"]), CTX)
        assert [g.error_code for g in described.groups] == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2

    run(scenario)


def test_unexpected_exception_becomes_unknown_server_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario(s: GroupCoordinatorServicer, m: GroupManager, d: Directory) -> None:
        async def broken(*args: object, **kwargs: object) -> None:
            raise KeyError("bug")

        monkeypatch.setattr(m, "heartbeat", broken)
        monkeypatch.setattr(m, "delete_groups", broken)
        hb = await s.Heartbeat(pb.HeartbeatRequest(group_id="g", member_id="x"), CTX)
        assert hb.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and "KeyError" in hb.error_message
        deleted = await s.DeleteGroups(pb.DeleteGroupsRequest(group_ids=["a"]), CTX)
        assert deleted.results[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR

    run(scenario)


@pytest.mark.parametrize(
    ("peer", "host"),
    [("ipv4:10.0.0.1:5000", "/10.0.0.1"), ("ipv6:[::1]:5000", "/::1"), ("unix:/tmp/s", "/tmp/s")],
)
def test_peer_host(peer: str, host: str) -> None:
    assert peer_host(peer) == host
