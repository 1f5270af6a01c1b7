"""Protobuf <-> domain conversions for the Controller service (the only protobuf-aware module
besides the servicer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strom.protocol.v1 import common_pb2, controller_pb2
from strom_controller.keys import PartitionRecord
from strom_controller.model import (
    AlterConfigOp,
    AlterPartitionItem,
    ConfigResourceRef,
    ConfigValue,
    CreatedTopic,
    MetadataView,
    NewPartitions,
    NewTopicSpec,
    OngoingReassignment,
    Outcome,
)
from strom_server.rpc.errors import error_fields

__all__ = [
    "alter_partition_request",
    "alter_partition_response",
    "create_partitions_request",
    "create_topics_request",
    "create_topics_response",
    "metadata_response",
]

_SOURCES = {
    "DEFAULT": common_pb2.ConfigEntry.DEFAULT,
    "BROKER_DEFAULT": common_pb2.ConfigEntry.BROKER_DEFAULT,
    "TOPIC": common_pb2.ConfigEntry.TOPIC,
}
_RESOURCE_TYPES = {controller_pb2.RESOURCE_TOPIC: "topic", controller_pb2.RESOURCE_BROKER: "broker"}
_OPS = {
    controller_pb2.AlterConfigOp.SET: "set",
    controller_pb2.AlterConfigOp.DELETE: "delete",
    controller_pb2.AlterConfigOp.APPEND: "append",
    controller_pb2.AlterConfigOp.SUBTRACT: "subtract",
}


def _configs(values: Sequence[ConfigValue]) -> list[common_pb2.ConfigEntry]:
    return [
        common_pb2.ConfigEntry(
            name=v.name, value=v.value, source=_SOURCES[v.source], read_only=v.read_only
        )
        for v in values
    ]


# --- Metadata ----------------------------------------------------------------------------


def metadata_response(view: MetadataView) -> controller_pb2.MetadataResponse:
    response = controller_pb2.MetadataResponse(cluster_id=view.cluster_id)
    for node_id, host, port, rack in view.brokers:
        response.brokers.add(node_id=node_id, host=host, port=port, rack=rack)
    if view.controller is not None:
        node_id, host, port = view.controller
        response.controller.CopyFrom(common_pb2.Node(node_id=node_id, host=host, port=port))
    else:
        response.controller.CopyFrom(common_pb2.Node(node_id=-1))
    for topic in view.topics:
        code, _ = error_fields(topic.error)
        t = response.topics.add(
            error_code=code, name=topic.name, is_internal=topic.internal, topic_id=topic.topic_id
        )
        for p in topic.partitions:
            pcode, _ = error_fields(p.error)
            t.partitions.add(
                error_code=pcode,
                partition=p.partition,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replicas=p.replicas,
                isr=p.isr,
                offline_replicas=p.offline,
            )
    return response


# --- topics ------------------------------------------------------------------------------


def create_topics_request(request: controller_pb2.CreateTopicsRequest) -> list[NewTopicSpec]:
    return [
        NewTopicSpec(
            name=t.name,
            num_partitions=t.num_partitions,
            replication_factor=t.replication_factor,
            assignments={a.partition: tuple(a.broker_ids) for a in t.assignments},
            configs=dict(t.configs),
        )
        for t in request.topics
    ]


def create_topics_response(
    specs: Sequence[NewTopicSpec], outcomes: Sequence[Outcome[CreatedTopic]]
) -> controller_pb2.CreateTopicsResponse:
    response = controller_pb2.CreateTopicsResponse()
    for spec, outcome in zip(specs, outcomes, strict=True):
        code, message = error_fields(outcome.error)
        result = response.topics.add(name=spec.name, error_code=code, error_message=message)
        created = outcome.value
        if created is not None:
            result.topic_id = created.topic_id
            result.num_partitions = created.num_partitions
            result.replication_factor = created.replication_factor
            result.configs.extend(_configs(created.configs))
    return response


def topic_results(
    names: Sequence[str], outcomes: Sequence[Outcome[Any]]
) -> list[controller_pb2.TopicResult]:
    out = []
    for name, outcome in zip(names, outcomes, strict=True):
        code, message = error_fields(outcome.error)
        out.append(controller_pb2.TopicResult(name=name, error_code=code, error_message=message))
    return out


def create_partitions_request(
    request: controller_pb2.CreatePartitionsRequest,
) -> list[NewPartitions]:
    return [
        NewPartitions(
            t.name,
            t.count,
            tuple(tuple(a.broker_ids) for a in sorted(t.assignments, key=lambda a: a.partition)),
        )
        for t in request.topics
    ]


# --- configs -----------------------------------------------------------------------------


def config_resource(
    type_: controller_pb2.ResourceType, name: str, names: Sequence[str] = ()
) -> ConfigResourceRef:
    return ConfigResourceRef(_RESOURCE_TYPES.get(type_, "unknown"), name, tuple(names))


def describe_configs_request(
    request: controller_pb2.DescribeConfigsRequest,
) -> list[ConfigResourceRef]:
    return [config_resource(r.type, r.name, r.config_names) for r in request.resources]


def describe_configs_results(
    request_types: Sequence[tuple[controller_pb2.ResourceType, str]],
    outcomes: Sequence[Outcome[list[ConfigValue]] | Outcome[None]],
) -> list[controller_pb2.DescribeConfigsResult]:
    out = []
    for (type_, name), outcome in zip(request_types, outcomes, strict=True):
        code, message = error_fields(outcome.error)
        result = controller_pb2.DescribeConfigsResult(
            type=type_,
            name=name,
            error_code=code,
            error_message=message,
        )
        if outcome.value is not None:
            result.configs.extend(_configs(outcome.value))
        out.append(result)
    return out


def alter_configs_request(
    request: controller_pb2.IncrementalAlterConfigsRequest,
) -> list[tuple[ConfigResourceRef, list[AlterConfigOp]]]:
    return [
        (
            config_resource(r.type, r.name),
            [AlterConfigOp(op.name, op.value, _OPS.get(op.op, "unknown")) for op in r.ops],
        )
        for r in request.resources
    ]


# --- partitions --------------------------------------------------------------------------


def election_type(value: int) -> str:
    return "unclean" if value == controller_pb2.UNCLEAN else "preferred"


def partition_result(
    topic: str, partition: int, outcome: Outcome[Any]
) -> controller_pb2.PartitionResult:
    code, message = error_fields(outcome.error)
    return controller_pb2.PartitionResult(
        topic=topic, partition=partition, error_code=code, error_message=message
    )


def alter_partition_request(
    request: controller_pb2.AlterPartitionRequest,
) -> list[AlterPartitionItem]:
    return [
        AlterPartitionItem(
            p.topic, p.partition, p.leader_epoch, tuple(p.new_isr), p.partition_epoch
        )
        for p in request.partitions
    ]


def alter_partition_response(
    items: Sequence[AlterPartitionItem], outcomes: Sequence[Outcome[PartitionRecord]]
) -> controller_pb2.AlterPartitionResponse:
    response = controller_pb2.AlterPartitionResponse()
    for item, outcome in zip(items, outcomes, strict=True):
        code, message = error_fields(outcome.error)
        result = response.partitions.add(
            topic=item.topic, partition=item.partition, error_code=code, error_message=message
        )
        state = outcome.value
        if state is not None:
            result.leader_id = state.leader
            result.leader_epoch = state.leader_epoch
            result.isr.extend(state.isr)
            result.partition_epoch = state.partition_epoch
    return response


def reassignments_response(
    ongoing: Sequence[OngoingReassignment],
) -> controller_pb2.ListPartitionReassignmentsResponse:
    response = controller_pb2.ListPartitionReassignmentsResponse()
    for r in ongoing:
        response.reassignments.add(
            topic=r.topic,
            partition=r.partition,
            replicas=r.replicas,
            adding_replicas=r.adding,
            removing_replicas=r.removing,
        )
    return response


def init_producer_id_response(
    outcome: Outcome[tuple[int, int]],
) -> controller_pb2.InitProducerIdResponse:
    code, message = error_fields(outcome.error)
    response = controller_pb2.InitProducerIdResponse(error_code=code, error_message=message)
    if outcome.value is not None:
        response.producer_id, response.producer_epoch = outcome.value
    else:
        response.producer_id, response.producer_epoch = -1, -1
    return response
