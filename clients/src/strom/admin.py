"""``Admin``: topic and cluster administration through the gateway (synchronous).

::

    from strom import Admin, NewTopic

    with Admin(bootstrap_servers="localhost:9092") as admin:
        admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=3)])
        print(admin.describe_topics(["orders"]))

Every method raises a ``strom.errors`` exception naming the topic or partition that failed;
when several fail, the first one is raised. The client library issue adds the asyncio twin and
the group operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType

import grpc

from strom._transport import channel_options, translate_errors
from strom.errors import ConfigurationError, for_code
from strom.protocol.v1 import common_pb2, controller_pb2, gateway_pb2_grpc
from strom.types import (
    ClusterDescription,
    ConfigValue,
    NewTopic,
    NodeInfo,
    PartitionDescription,
    TopicDescription,
    TopicPartition,
)

__all__ = ["Admin"]

_SOURCES = {v: k for k, v in common_pb2.ConfigEntry.Source.items()}


def _check(items: Iterable[object], describe: str) -> None:
    """Raise the first per-item error of a response."""
    for item in items:
        code = getattr(item, "error_code", 0)
        if code:
            name = getattr(item, "name", "") or getattr(item, "topic", "")
            partition = getattr(item, "partition", None)
            where = (
                f"{name}-{partition}" if partition is not None and describe == "partition" else name
            )
            message = getattr(item, "error_message", "")
            raise for_code(code, f"{where}: {message}" if message else where)


def _node(node: common_pb2.Node) -> NodeInfo:
    return NodeInfo(node.node_id, node.host, node.port, node.rack)


class Admin:
    """Administration client; a context manager (closes its channel)."""

    def __init__(
        self,
        bootstrap_servers: str = "localhost:9092",
        *,
        request_timeout_ms: int = 30000,
    ) -> None:
        servers = [s.strip() for s in bootstrap_servers.split(",") if s.strip()]
        if not servers:
            raise ConfigurationError("bootstrap_servers is empty")
        if request_timeout_ms <= 0:
            raise ConfigurationError(f"request_timeout_ms must be > 0, got {request_timeout_ms}")
        self.bootstrap_servers = servers
        self._timeout = request_timeout_ms / 1000
        self._channel = grpc.insecure_channel(servers[0], options=channel_options())
        self._stub = gateway_pb2_grpc.GatewayStub(self._channel)

    def _call(self, method: str, request: object) -> object:
        with translate_errors(self.bootstrap_servers[0]):
            return getattr(self._stub, method)(request, timeout=self._timeout)

    # -- cluster ------------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        response = self._call("Metadata", controller_pb2.MetadataRequest())
        controller = response.controller if response.HasField("controller") else None  # type: ignore[attr-defined]
        return ClusterDescription(
            cluster_id=response.cluster_id,  # type: ignore[attr-defined]
            controller=_node(controller) if controller is not None else None,
            brokers=tuple(_node(b) for b in response.brokers),  # type: ignore[attr-defined]
        )

    # -- topics -------------------------------------------------------------------------------

    def create_topics(self, new_topics: Sequence[NewTopic], *, validate_only: bool = False) -> None:
        request = controller_pb2.CreateTopicsRequest(
            timeout_ms=int(self._timeout * 1000), validate_only=validate_only
        )
        for topic in new_topics:
            entry = request.topics.add(
                name=topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
            )
            entry.configs.update({str(k): str(v) for k, v in topic.topic_configs.items()})
            for partition, brokers in sorted((topic.replica_assignment or {}).items()):
                entry.assignments.add(partition=partition, broker_ids=list(brokers))
        _check(self._call("CreateTopics", request).topics, "topic")  # type: ignore[attr-defined]

    def delete_topics(self, names: Sequence[str]) -> None:
        request = controller_pb2.DeleteTopicsRequest(
            names=list(names), timeout_ms=int(self._timeout * 1000)
        )
        _check(self._call("DeleteTopics", request).topics, "topic")  # type: ignore[attr-defined]

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        response = self._call("Metadata", controller_pb2.MetadataRequest())
        return sorted(
            t.name
            for t in response.topics  # type: ignore[attr-defined]
            if include_internal or not t.is_internal
        )

    def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        response = self._call("Metadata", controller_pb2.MetadataRequest(topics=list(names or [])))
        described = []
        for t in response.topics:  # type: ignore[attr-defined]
            if t.error_code and names:
                # Metadata has no error message: name the code, not just the topic.
                raise for_code(t.error_code, f"{t.name}: {common_pb2.ErrorCode.Name(t.error_code)}")
            partitions = tuple(
                PartitionDescription(
                    partition=p.partition,
                    leader=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isr),
                    offline_replicas=tuple(p.offline_replicas),
                    error=common_pb2.ErrorCode.Name(p.error_code) if p.error_code else "",
                )
                for p in sorted(t.partitions, key=lambda p: p.partition)
            )
            described.append(TopicDescription(t.name, t.topic_id, t.is_internal, partitions))
        return sorted(described, key=lambda d: d.name)

    def create_partitions(self, new_counts: Mapping[str, int]) -> None:
        request = controller_pb2.CreatePartitionsRequest(timeout_ms=int(self._timeout * 1000))
        for name, count in new_counts.items():
            request.topics.add(name=name, count=count)
        _check(self._call("CreatePartitions", request).topics, "topic")  # type: ignore[attr-defined]

    # -- configs ------------------------------------------------------------------------------

    def describe_configs(self, topic: str) -> dict[str, ConfigValue]:
        request = controller_pb2.DescribeConfigsRequest(
            resources=[
                controller_pb2.ConfigResource(type=controller_pb2.RESOURCE_TOPIC, name=topic)
            ]
        )
        results = self._call("DescribeConfigs", request).results  # type: ignore[attr-defined]
        _check(results, "topic")
        return {
            c.name: ConfigValue(
                c.name, c.value, _SOURCES.get(c.source, "SOURCE_UNKNOWN"), c.read_only
            )
            for r in results
            for c in r.configs
        }

    def alter_configs(
        self,
        topic: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Incrementally set and/or delete (back to the inherited value) topic configs."""
        resource = controller_pb2.AlterConfigsResource(
            type=controller_pb2.RESOURCE_TOPIC, name=topic
        )
        for name, value in (set_configs or {}).items():
            resource.ops.add(name=name, value=str(value), op=controller_pb2.AlterConfigOp.SET)
        for name in delete_configs:
            resource.ops.add(name=name, op=controller_pb2.AlterConfigOp.DELETE)
        request = controller_pb2.IncrementalAlterConfigsRequest(
            resources=[resource], validate_only=validate_only
        )
        _check(self._call("IncrementalAlterConfigs", request).results, "topic")  # type: ignore[attr-defined]

    # -- leaders and reassignment -------------------------------------------------------------

    def elect_leaders(
        self, election_type: str = "preferred", partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, str]:
        """Run a preferred (or unclean) election; returns each partition's outcome code name
        (``NONE`` when a new leader was elected, ``ELECTION_NOT_NEEDED`` when it already led)."""
        kinds = {"preferred": controller_pb2.PREFERRED, "unclean": controller_pb2.UNCLEAN}
        if election_type not in kinds:
            raise ConfigurationError(
                f"election_type must be preferred or unclean, got {election_type!r}"
            )
        request = controller_pb2.ElectLeadersRequest(
            election_type=kinds[election_type],
            partitions=[
                common_pb2.TopicPartition(topic=p.topic, partition=p.partition)
                for p in partitions or ()
            ],
            timeout_ms=int(self._timeout * 1000),
        )
        response = self._call("ElectLeaders", request)
        return {
            TopicPartition(p.topic, p.partition): common_pb2.ErrorCode.Name(p.error_code)
            for p in response.partitions  # type: ignore[attr-defined]
        }

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        throttle_bytes_per_sec: int = 0,
    ) -> None:
        """Move partitions to new replica lists (preferred leader first); None cancels."""
        request = controller_pb2.AlterPartitionReassignmentsRequest(
            throttle_bytes_per_sec=throttle_bytes_per_sec, timeout_ms=int(self._timeout * 1000)
        )
        for tp, replicas in reassignments.items():
            request.reassignments.add(
                topic=tp.topic, partition=tp.partition, replicas=list(replicas or [])
            )
        _check(self._call("AlterPartitionReassignments", request).partitions, "partition")  # type: ignore[attr-defined]

    def list_partition_reassignments(self) -> dict[TopicPartition, dict[str, tuple[int, ...]]]:
        response = self._call(
            "ListPartitionReassignments", controller_pb2.ListPartitionReassignmentsRequest()
        )
        return {
            TopicPartition(r.topic, r.partition): {
                "replicas": tuple(r.replicas),
                "adding": tuple(r.adding_replicas),
                "removing": tuple(r.removing_replicas),
            }
            for r in response.reassignments  # type: ignore[attr-defined]
        }

    # -- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
