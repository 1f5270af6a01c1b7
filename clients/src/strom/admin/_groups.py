"""The admin client's consumer-group operations, through the gateway to the group coordinators
(documented on ``strom.aio.Admin``, which calls them)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence

from strom.admin._calls import RETRY_BACKOFF_S, AdminCalls, node_info
from strom.cluster import where
from strom.cluster.retry import Deadline
from strom.errors import (
    BrokerResponseError,
    ConfigurationError,
    InconsistentGroupProtocolError,
    for_code,
)
from strom.group.protocol import PROTOCOL_TYPE, decode_assignment
from strom.protocol.v1 import common_pb2, coordinator_pb2
from strom.types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    MemberAssignment,
    MemberDescription,
    NodeInfo,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["GroupAdmin", "group_error", "member_description"]


def group_error(group_id: str, code: int, message: str) -> BrokerResponseError:
    text = f"group {group_id}: {message or common_pb2.ErrorCode.Name(code)}"
    return for_code(code, text)


def member_description(
    member: coordinator_pb2.DescribedGroupMember, protocol_type: str
) -> MemberDescription:
    partitions: tuple[TopicPartition, ...] = ()
    if protocol_type == PROTOCOL_TYPE and member.member_assignment:
        # Not a consumer's assignment after all: shown as none.
        with contextlib.suppress(InconsistentGroupProtocolError):
            partitions = tuple(sorted(decode_assignment(member.member_assignment).partitions))
    return MemberDescription(
        member_id=member.member_id,
        group_instance_id=member.group_instance_id or None,
        client_id=member.client_id,
        host=member.client_host,
        assignment=MemberAssignment(partitions),
    )


def _offset_of(value: OffsetAndMetadata | int) -> tuple[int, str]:
    if isinstance(value, OffsetAndMetadata):
        return value.offset, value.metadata
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"an offset must be an int or OffsetAndMetadata, got {value!r}")
    return value, ""


class GroupAdmin:
    """List, describe and delete groups; read, change and delete their committed offsets."""

    def __init__(self, calls: AdminCalls) -> None:
        self._calls = calls

    async def list_consumer_groups(
        self, states: Sequence[str] | None = None
    ) -> list[ConsumerGroupListing]:
        request = coordinator_pb2.ListGroupsRequest(states_filter=list(states or ()))
        response = await self._calls.group_call("ListGroups", request)
        if response.error_code:
            message = response.error_message or common_pb2.ErrorCode.Name(response.error_code)
            raise for_code(response.error_code, f"list groups: {message}")
        return sorted(
            (
                ConsumerGroupListing(g.group_id, g.protocol_type, g.group_state)
                for g in response.groups
            ),
            key=lambda g: g.group_id,
        )

    async def describe_consumer_groups(
        self, group_ids: Sequence[str]
    ) -> dict[str, ConsumerGroupDescription]:
        request = coordinator_pb2.DescribeGroupsRequest(group_ids=list(group_ids))
        response = await self._calls.group_call("DescribeGroups", request)
        for g in response.groups:
            if g.error_code:
                raise group_error(g.group_id, g.error_code, g.error_message)
        coordinators = await asyncio.gather(
            *(self._coordinator(g.group_id) for g in response.groups)
        )
        return {
            g.group_id: ConsumerGroupDescription(
                group_id=g.group_id,
                is_simple_consumer_group=g.protocol_type == "",
                members=tuple(member_description(m, g.protocol_type) for m in g.members),
                partition_assignor=g.protocol_data,
                state=g.group_state,
                coordinator=coordinator,
                protocol_type=g.protocol_type,
                generation_id=g.generation_id,
            )
            for g, coordinator in zip(response.groups, coordinators, strict=True)
        }

    async def _coordinator(self, group_id: str) -> NodeInfo | None:
        request = coordinator_pb2.FindCoordinatorRequest(group_id=group_id)
        response = await self._calls.group_call("FindCoordinator", request)
        return None if response.error_code else node_info(response.coordinator)

    async def delete_consumer_groups(
        self, group_ids: Sequence[str]
    ) -> dict[str, BrokerResponseError | None]:
        deadline = Deadline(self._calls.timeout_s)
        outcome: dict[str, BrokerResponseError | None] = {}
        pending = list(dict.fromkeys(group_ids))
        while True:
            # Only groups that failed retriably are asked again: the others are already gone.
            request = coordinator_pb2.DeleteGroupsRequest(group_ids=pending)
            response = await self._calls.call("DeleteGroups", request, max(deadline.left(), 0.001))
            for r in response.results:
                outcome[r.group_id] = (
                    group_error(r.group_id, r.error_code, r.error_message) if r.error_code else None
                )
            pending = [g for g in pending if (e := outcome.get(g)) is not None and e.retriable]
            if not pending or not deadline.allows(RETRY_BACKOFF_S):
                return {g: outcome[g] for g in dict.fromkeys(group_ids) if g in outcome}
            await asyncio.sleep(RETRY_BACKOFF_S)  # retry backoff: the coordinator is moving

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        request = coordinator_pb2.OffsetFetchRequest(
            group_id=group_id,
            partitions=[
                common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                for tp in partitions or ()
            ],
        )
        response = await self._calls.group_call("OffsetFetch", request)
        if response.error_code:
            raise group_error(group_id, response.error_code, response.error_message)
        committed = {}
        for p in response.partitions:
            tp = TopicPartition(p.topic, p.partition)
            if p.error_code:
                raise group_error(group_id, p.error_code, where(tp, ""))
            if p.committed_offset >= 0:
                committed[tp] = OffsetAndMetadata(p.committed_offset, p.metadata)
        return dict(sorted(committed.items()))

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> None:
        request = coordinator_pb2.OffsetCommitRequest(group_id=group_id, generation_id=-1)
        for tp, value in offsets.items():
            offset, metadata = _offset_of(value)
            request.partitions.add(
                topic=tp.topic,
                partition=tp.partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                metadata=metadata,
            )
        response = await self._calls.group_call("OffsetCommit", request)
        for p in response.partitions:
            if p.error_code:
                tp = TopicPartition(p.topic, p.partition)
                raise group_error(group_id, p.error_code, where(tp, p.error_message))

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> None:
        request = coordinator_pb2.OffsetDeleteRequest(
            group_id=group_id,
            partitions=[
                common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                for tp in partitions
            ],
        )
        response = await self._calls.group_call("OffsetDelete", request)
        if response.error_code:
            raise group_error(group_id, response.error_code, response.error_message)
        for p in response.partitions:
            if p.error_code:
                tp = TopicPartition(p.topic, p.partition)
                raise group_error(group_id, p.error_code, where(tp, p.error_message))
