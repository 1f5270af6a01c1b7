"""The gRPC GroupCoordinator service: decode, one call on ``GroupManager``, encode.

Every failure is answered in the response's error fields (per partition, member or group where
the response has no top-level one); an unexpected exception becomes UNKNOWN_SERVER_ERROR and is
logged.
"""

from __future__ import annotations

from typing import Protocol

from strom.errors import BrokerResponseError
from strom.protocol.v1 import common_pb2, transaction_pb2
from strom.protocol.v1 import coordinator_pb2 as pb
from strom.protocol.v1.coordinator_pb2_grpc import GroupCoordinatorServicer as _Base
from strom_coordinator import convert
from strom_coordinator.answers import answer, top_level_error
from strom_coordinator.group.api import (
    DeleteGroupResult,
    GroupDescription,
    LeaveResult,
    MarkerGroupResult,
)
from strom_coordinator.group.manager import GroupManager
from strom_server.rpc.server import ServicerContext as Ctx

__all__ = ["CoordinatorDirectory", "GroupCoordinatorServicer"]


class CoordinatorDirectory(Protocol):
    async def find(self, key: str, key_type: int = 0) -> tuple[int, str, int]:
        """(coordinator_id, host, port) serving the group (key_type GROUP = 0) or the
        transactional id (TRANSACTION = 1); raises CoordinatorNotAvailableError while no
        instance owns its partition."""
        ...


class GroupCoordinatorServicer(_Base):
    def __init__(self, manager: GroupManager, directory: CoordinatorDirectory) -> None:
        self._m = manager
        self._directory = directory

    async def FindCoordinator(
        self, request: pb.FindCoordinatorRequest, context: Ctx
    ) -> pb.FindCoordinatorResponse:
        async def work() -> pb.FindCoordinatorResponse:
            node_id, host, port = await self._directory.find(request.group_id, request.key_type)
            node = common_pb2.Node(node_id=node_id, host=host, port=port)
            return pb.FindCoordinatorResponse(coordinator=node)

        return await answer("FindCoordinator", work, top_level_error(pb.FindCoordinatorResponse))

    async def JoinGroup(self, request: pb.JoinGroupRequest, context: Ctx) -> pb.JoinGroupResponse:
        async def work() -> pb.JoinGroupResponse:
            join = convert.join_request(request, convert.peer_host(context.peer() or ""))
            return convert.join_response(await self._m.join_group(join))

        def fail(e: BrokerResponseError) -> pb.JoinGroupResponse:
            code, message = convert.error_fields(e)
            return pb.JoinGroupResponse(
                error_code=code,
                error_message=message,
                member_id=request.member_id,
                generation_id=-1,
            )

        return await answer("JoinGroup", work, fail)

    async def SyncGroup(self, request: pb.SyncGroupRequest, context: Ctx) -> pb.SyncGroupResponse:
        async def work() -> pb.SyncGroupResponse:
            result = await self._m.sync_group(
                request.group_id,
                request.generation_id,
                request.member_id,
                group_instance_id=request.group_instance_id or None,
                protocol_type=request.protocol_type or None,
                protocol_name=request.protocol_name or None,
                assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
            )
            return convert.sync_response(result)

        return await answer("SyncGroup", work, top_level_error(pb.SyncGroupResponse))

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Ctx) -> pb.HeartbeatResponse:
        async def work() -> pb.HeartbeatResponse:
            await self._m.heartbeat(
                request.group_id,
                request.generation_id,
                request.member_id,
                request.group_instance_id or None,
            )
            return pb.HeartbeatResponse()

        return await answer("Heartbeat", work, top_level_error(pb.HeartbeatResponse))

    async def LeaveGroup(
        self, request: pb.LeaveGroupRequest, context: Ctx
    ) -> pb.LeaveGroupResponse:
        async def work() -> pb.LeaveGroupResponse:
            results = await self._m.leave_group(request.group_id, convert.leave_members(request))
            return convert.leave_response(results)

        def fail(e: BrokerResponseError) -> pb.LeaveGroupResponse:
            response = convert.leave_response(
                [LeaveResult(m.member_id, m.group_instance_id or None, e) for m in request.members]
            )
            response.error_code, response.error_message = convert.error_fields(e)
            return response

        return await answer("LeaveGroup", work, fail)

    async def OffsetCommit(
        self, request: pb.OffsetCommitRequest, context: Ctx
    ) -> pb.OffsetCommitResponse:
        async def work() -> pb.OffsetCommitResponse:
            results = await self._m.commit_offsets(
                request.group_id,
                request.generation_id,
                request.member_id,
                convert.commit_partitions(request),
                group_instance_id=request.group_instance_id or None,
            )
            return convert.commit_response(results)

        return await answer("OffsetCommit", work, lambda e: convert.commit_error(request, e))

    async def OffsetFetch(
        self, request: pb.OffsetFetchRequest, context: Ctx
    ) -> pb.OffsetFetchResponse:
        async def work() -> pb.OffsetFetchResponse:
            offsets = await self._m.fetch_offsets(
                request.group_id,
                convert.topic_partitions(request.partitions),
                require_stable=request.require_stable,
            )
            return convert.fetch_response(offsets)

        return await answer("OffsetFetch", work, top_level_error(pb.OffsetFetchResponse))

    async def OffsetDelete(
        self, request: pb.OffsetDeleteRequest, context: Ctx
    ) -> pb.OffsetDeleteResponse:
        async def work() -> pb.OffsetDeleteResponse:
            results = await self._m.delete_offsets(
                request.group_id, convert.topic_partitions(request.partitions)
            )
            return convert.offset_delete_response(results)

        return await answer("OffsetDelete", work, top_level_error(pb.OffsetDeleteResponse))

    async def ListGroups(
        self, request: pb.ListGroupsRequest, context: Ctx
    ) -> pb.ListGroupsResponse:
        async def work() -> pb.ListGroupsResponse:
            groups = await self._m.list_groups(list(request.states_filter))
            return convert.list_groups_response(groups)

        return await answer("ListGroups", work, top_level_error(pb.ListGroupsResponse))

    async def DescribeGroups(
        self, request: pb.DescribeGroupsRequest, context: Ctx
    ) -> pb.DescribeGroupsResponse:
        async def work() -> pb.DescribeGroupsResponse:
            groups = await self._m.describe_groups(list(request.group_ids))
            return convert.describe_groups_response(groups)

        def fail(e: BrokerResponseError) -> pb.DescribeGroupsResponse:
            return convert.describe_groups_response(
                [GroupDescription(g, "", error=e) for g in request.group_ids]
            )

        return await answer("DescribeGroups", work, fail)

    async def DeleteGroups(
        self, request: pb.DeleteGroupsRequest, context: Ctx
    ) -> pb.DeleteGroupsResponse:
        async def work() -> pb.DeleteGroupsResponse:
            results = await self._m.delete_groups(list(request.group_ids))
            return convert.delete_groups_response(results)

        def fail(e: BrokerResponseError) -> pb.DeleteGroupsResponse:
            return convert.delete_groups_response(
                [DeleteGroupResult(g, e) for g in request.group_ids]
            )

        return await answer("DeleteGroups", work, fail)

    async def TxnOffsetCommit(
        self, request: pb.TxnOffsetCommitRequest, context: Ctx
    ) -> pb.TxnOffsetCommitResponse:
        async def work() -> pb.TxnOffsetCommitResponse:
            results = await self._m.txn_commit_offsets(convert.txn_commit_request(request))
            return convert.txn_commit_response(results)

        return await answer("TxnOffsetCommit", work, lambda e: convert.txn_commit_error(request, e))

    async def WriteTxnMarkers(
        self, request: transaction_pb2.WriteTxnMarkersRequest, context: Ctx
    ) -> transaction_pb2.WriteTxnMarkersResponse:
        """From a transaction coordinator: end a transaction's pending offsets in its groups."""
        response = transaction_pb2.WriteTxnMarkersResponse()
        for marker in request.markers:

            async def work(m: transaction_pb2.WriteTxnMarker = marker) -> list[MarkerGroupResult]:
                groups = list(m.group_ids)
                return await self._m.end_txn(groups, m.producer_id, m.producer_epoch, m.committed)

            def fail(
                e: BrokerResponseError, m: transaction_pb2.WriteTxnMarker = marker
            ) -> list[MarkerGroupResult]:
                return [MarkerGroupResult(g, e) for g in m.group_ids]

            groups = await answer("WriteTxnMarkers", work, fail)
            response.markers.append(convert.txn_marker_result(marker, groups))
        return response
