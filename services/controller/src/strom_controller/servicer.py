"""The gRPC Controller service: decode, one call on ``Controller``, encode. Nothing else."""

from __future__ import annotations

from strom.protocol.v1 import controller_pb2 as pb
from strom.protocol.v1.controller_pb2_grpc import ControllerServicer as _Base
from strom_controller import convert
from strom_controller.controller import Controller
from strom_server.rpc.server import ServicerContext as Ctx

__all__ = ["ControllerServicer"]


class ControllerServicer(_Base):
    def __init__(self, controller: Controller) -> None:
        self._c = controller

    async def Metadata(self, request: pb.MetadataRequest, context: Ctx) -> pb.MetadataResponse:
        view = await self._c.metadata(list(request.topics), request.allow_auto_topic_creation)
        return convert.metadata_response(view)

    async def CreateTopics(
        self, request: pb.CreateTopicsRequest, context: Ctx
    ) -> pb.CreateTopicsResponse:
        specs = convert.create_topics_request(request)
        outcomes = await self._c.create_topics(specs, validate_only=request.validate_only)
        return convert.create_topics_response(specs, outcomes)

    async def DeleteTopics(
        self, request: pb.DeleteTopicsRequest, context: Ctx
    ) -> pb.DeleteTopicsResponse:
        outcomes = await self._c.delete_topics(list(request.names))
        return pb.DeleteTopicsResponse(topics=convert.topic_results(request.names, outcomes))

    async def CreatePartitions(
        self, request: pb.CreatePartitionsRequest, context: Ctx
    ) -> pb.CreatePartitionsResponse:
        items = convert.create_partitions_request(request)
        outcomes = await self._c.create_partitions(items, validate_only=request.validate_only)
        names = [i.name for i in items]
        return pb.CreatePartitionsResponse(topics=convert.topic_results(names, outcomes))

    async def DescribeConfigs(
        self, request: pb.DescribeConfigsRequest, context: Ctx
    ) -> pb.DescribeConfigsResponse:
        outcomes = await self._c.describe_configs(convert.describe_configs_request(request))
        keys = [(r.type, r.name) for r in request.resources]
        return pb.DescribeConfigsResponse(results=convert.describe_configs_results(keys, outcomes))

    async def IncrementalAlterConfigs(
        self, request: pb.IncrementalAlterConfigsRequest, context: Ctx
    ) -> pb.IncrementalAlterConfigsResponse:
        changes = convert.alter_configs_request(request)
        outcomes = await self._c.incremental_alter_configs(
            changes, validate_only=request.validate_only
        )
        keys = [(r.type, r.name) for r in request.resources]
        return pb.IncrementalAlterConfigsResponse(
            results=convert.describe_configs_results(keys, outcomes)
        )

    async def ElectLeaders(
        self, request: pb.ElectLeadersRequest, context: Ctx
    ) -> pb.ElectLeadersResponse:
        results = await self._c.elect_leaders(
            convert.election_type(request.election_type),
            [(p.topic, p.partition) for p in request.partitions],
        )
        return pb.ElectLeadersResponse(
            partitions=[convert.partition_result(t, p, o) for t, p, o in results]
        )

    async def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: Ctx
    ) -> pb.AlterPartitionReassignmentsResponse:
        items = [(r.topic, r.partition, tuple(r.replicas)) for r in request.reassignments]
        outcomes = await self._c.alter_reassignments(items, request.throttle_bytes_per_sec)
        return pb.AlterPartitionReassignmentsResponse(
            partitions=[
                convert.partition_result(t, p, o)
                for (t, p, _), o in zip(items, outcomes, strict=True)
            ]
        )

    async def ListPartitionReassignments(
        self, request: pb.ListPartitionReassignmentsRequest, context: Ctx
    ) -> pb.ListPartitionReassignmentsResponse:
        ongoing = await self._c.list_reassignments(
            [(p.topic, p.partition) for p in request.partitions]
        )
        return convert.reassignments_response(ongoing)

    async def AlterPartition(
        self, request: pb.AlterPartitionRequest, context: Ctx
    ) -> pb.AlterPartitionResponse:
        items = convert.alter_partition_request(request)
        outcomes = await self._c.alter_partition(request.broker_id, request.broker_epoch, items)
        return convert.alter_partition_response(items, outcomes)

    async def InitProducerId(
        self, request: pb.InitProducerIdRequest, context: Ctx
    ) -> pb.InitProducerIdResponse:
        outcome = await self._c.init_producer_id(
            request.producer_id, request.producer_epoch, request.transactional_id
        )
        return convert.init_producer_id_response(outcome)
