"""ApiVersions, Metadata, DescribeCluster and the administrative requests (topics, partitions,
configs), forwarded to the active controller.

Kafka clients see one broker, this listener (``Backend.broker_id``): it is every partition's
leader and the controller, since the gateway routes each request to the right node itself.
Replica and ISR lists keep the storage nodes' ids, so tools still show where data lives. (One
broker rather than one per storage node at the same address: librdkafka before 2.x merges
brokers that share an address, and would never find the others.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import controller_pb2 as pb
from strom_gateway.kafka.backend import Backend, CallFailed, kafka_code
from strom_gateway.kafka.listener import Connection, served_versions
from strom_gateway.kafka.protocol.frames import Request

__all__ = [
    "alter_configs",
    "api_versions",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_cluster",
    "describe_configs",
    "incremental_alter_configs",
    "metadata",
]

#: Strom's ConfigEntry.Source as Kafka's ConfigSource.
_SOURCES = {
    common_pb2.ConfigEntry.DEFAULT: 5,  # DEFAULT_CONFIG
    common_pb2.ConfigEntry.BROKER_DEFAULT: 4,  # STATIC_BROKER_CONFIG
    common_pb2.ConfigEntry.TOPIC: 1,  # DYNAMIC_TOPIC_CONFIG
}
_NO_ID = bytes(16)


def _topic_id(text: str) -> bytes:
    """Strom's topic id (32 hex digits) as Kafka's 16-byte UUID (zeros when not one)."""
    try:
        raw = bytes.fromhex(text.replace("-", ""))
    except ValueError:
        return _NO_ID
    return raw if len(raw) == 16 else _NO_ID


async def api_versions(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    return {"error_code": 0, "api_keys": served_versions(), "throttle_time_ms": 0}


def _brokers(backend: Backend) -> list[dict[str, Any]]:
    return [{"node_id": backend.broker_id, "host": backend.host, "port": backend.port,
             "rack": None}]  # fmt: skip


async def metadata(backend: Backend, request: Request, connection: Connection) -> dict[str, Any]:
    body = request.body
    asked = body["topics"]
    if asked is None or (request.version == 0 and not asked):
        names: list[str] | None = None
    else:
        names = [t["name"] for t in asked if t["name"] is not None]
    try:
        if names == []:
            response = await backend.metadata(["__consumer_offsets"])
            topics: list[pb.TopicMetadata] = []
        else:
            auto_create = body["allow_auto_topic_creation"]
            response = await backend.metadata(names, auto_create=auto_create)
            topics = list(response.topics)
    except CallFailed:
        response = pb.MetadataResponse()
        topics = [
            pb.TopicMetadata(name=name, error_code=ErrorCode.LEADER_NOT_AVAILABLE)
            for name in names or []
        ]
    return {
        "throttle_time_ms": 0,
        "brokers": _brokers(backend),
        "cluster_id": response.cluster_id or None,
        "controller_id": backend.broker_id,
        "topics": [
            {
                "error_code": kafka_code(t.error_code),
                "name": t.name,
                "topic_id": _topic_id(t.topic_id),
                "is_internal": t.is_internal,
                "partitions": [
                    {
                        "error_code": kafka_code(p.error_code),
                        "partition_index": p.partition,
                        "leader_id": backend.broker_id if p.leader_id >= 0 else -1,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": list(p.replicas),
                        "isr_nodes": list(p.isr),
                        "offline_replicas": list(p.offline_replicas),
                    }
                    for p in sorted(t.partitions, key=lambda p: p.partition)
                ],
            }
            for t in topics
        ],
    }


async def describe_cluster(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    response = await backend.metadata(["__consumer_offsets"])
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "cluster_id": response.cluster_id,
        "controller_id": backend.broker_id,
        "brokers": [
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
            for b in _brokers(backend)
        ],
    }


def _configs(entries: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "value": c.value,
            "read_only": c.read_only,
            "config_source": _SOURCES.get(c.source, 0),
            "is_sensitive": c.sensitive,
        }
        for c in entries
    ]


async def create_topics(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    forwarded = pb.CreateTopicsRequest(
        topics=[
            pb.NewTopic(
                name=t["name"],
                num_partitions=t["num_partitions"],
                replication_factor=t["replication_factor"],
                assignments=[
                    pb.ReplicaAssignment(partition=a["partition_index"], broker_ids=a["broker_ids"])
                    for a in t["assignments"]
                ],
                configs={c["name"]: c["value"] for c in t["configs"] if c["value"] is not None},
            )
            for t in body["topics"]
        ],
        timeout_ms=body["timeout_ms"],
        validate_only=body["validate_only"],
    )
    try:
        answer = await backend.controller("CreateTopics", forwarded, pb.CreateTopicsResponse)
    except CallFailed as exc:
        return {"topics": [{"name": t["name"], "error_code": exc.code, "error_message": exc.message}
                           for t in body["topics"]]}  # fmt: skip
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t.name,
                "topic_id": _topic_id(t.topic_id),
                "error_code": kafka_code(t.error_code),
                "error_message": t.error_message or None,
                "num_partitions": t.num_partitions if not t.error_code else -1,
                "replication_factor": t.replication_factor if not t.error_code else -1,
                "configs": _configs(t.configs) if not t.error_code else None,
            }
            for t in answer.topics
        ],
    }


def _topic_results(results: Sequence[tuple[str, int, str]]) -> list[dict[str, Any]]:
    """(topic, Kafka error code, message) as DeleteTopics'/CreatePartitions' result entries."""
    return [
        {"name": name, "error_code": code, "error_message": message or None}
        for name, code, message in results
    ]


async def delete_topics(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    forwarded = pb.DeleteTopicsRequest(names=body["topic_names"], timeout_ms=body["timeout_ms"])
    try:
        answer = await backend.controller("DeleteTopics", forwarded, pb.DeleteTopicsResponse)
        results = [(t.name, kafka_code(t.error_code), t.error_message) for t in answer.topics]
    except CallFailed as exc:
        results = [(name, exc.code, exc.message) for name in body["topic_names"]]
    return {"throttle_time_ms": 0, "responses": _topic_results(results)}


async def create_partitions(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    topics = []
    for t in body["topics"]:
        assignments = t["assignments"] or []
        first_new = t["count"] - len(assignments)
        topics.append(
            pb.CreatePartitionsTopic(
                name=t["name"],
                count=t["count"],
                assignments=[
                    pb.ReplicaAssignment(partition=first_new + i, broker_ids=a["broker_ids"])
                    for i, a in enumerate(assignments)
                ],
            )
        )
    forwarded = pb.CreatePartitionsRequest(
        topics=topics, timeout_ms=body["timeout_ms"], validate_only=body["validate_only"]
    )
    try:
        answer = await backend.controller(
            "CreatePartitions", forwarded, pb.CreatePartitionsResponse
        )
        results = [(t.name, kafka_code(t.error_code), t.error_message) for t in answer.topics]
    except CallFailed as exc:
        results = [(t.name, exc.code, exc.message) for t in topics]
    return {"throttle_time_ms": 0, "results": _topic_results(results)}


async def _describe(
    backend: Backend, resources: list[pb.ConfigResource]
) -> list[pb.DescribeConfigsResult]:
    forwarded = pb.DescribeConfigsRequest(resources=resources)
    try:
        answer = await backend.controller("DescribeConfigs", forwarded, pb.DescribeConfigsResponse)
    except CallFailed as exc:
        return [
            pb.DescribeConfigsResult(
                type=r.type,
                name=r.name,
                error_code=exc.code,  # type: ignore[arg-type]
                error_message=exc.message,
            )
            for r in resources
        ]
    return list(answer.results)


async def describe_configs(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    resources = [
        pb.ConfigResource(
            type=r["resource_type"],
            name=r["resource_name"],
            config_names=r["configuration_keys"] or [],
        )
        for r in request.body["resources"]
    ]
    results = await _describe(backend, resources)
    return {
        "throttle_time_ms": 0,
        "results": [
            {
                "error_code": kafka_code(r.error_code),
                "error_message": r.error_message or None,
                "resource_type": r.type,
                "resource_name": r.name,
                "configs": [
                    {**entry, "synonyms": [], "config_type": 0, "documentation": None}
                    for entry in _configs(r.configs)
                ],
            }
            for r in results
        ],
    }


def _altered(results: Sequence[tuple[int, str, int, str]]) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {"error_code": code, "error_message": message or None, "resource_type": kind,
             "resource_name": name}
            for kind, name, code, message in results
        ],
    }  # fmt: skip


async def _alter(
    backend: Backend, resources: list[pb.AlterConfigsResource], validate_only: bool
) -> dict[str, Any]:
    forwarded = pb.IncrementalAlterConfigsRequest(resources=resources, validate_only=validate_only)
    try:
        answer = await backend.controller(
            "IncrementalAlterConfigs", forwarded, pb.IncrementalAlterConfigsResponse
        )
    except CallFailed as exc:
        return _altered([(r.type, r.name, exc.code, exc.message) for r in resources])
    return _altered(
        [(r.type, r.name, kafka_code(r.error_code), r.error_message) for r in answer.results]
    )


async def incremental_alter_configs(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    body = request.body
    resources = [
        pb.AlterConfigsResource(
            type=r["resource_type"],
            name=r["resource_name"],
            ops=[
                pb.AlterConfigOp(name=c["name"], value=c["value"] or "", op=c["config_operation"])
                for c in r["configs"]
            ],
        )
        for r in body["resources"]
    ]
    return await _alter(backend, resources, body["validate_only"])


async def alter_configs(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    """Kafka's AlterConfigs replaces a resource's whole set of overrides: the given ones are
    set, every other override the resource has is deleted (one IncrementalAlterConfigs)."""
    body = request.body
    wanted = body["resources"]
    current = await _describe(
        backend,
        [pb.ConfigResource(type=r["resource_type"], name=r["resource_name"]) for r in wanted],
    )
    # Matched by resource (one refused by the ACLs is answered after the others); each
    # resource on its own, as Kafka: one that cannot be described keeps its error, the others
    # are altered.
    found = {(r.type, r.name): r for r in current}
    failed: list[tuple[int, str, int, str]] = []
    resources = []
    for r in wanted:
        kind, name = r["resource_type"], r["resource_name"]
        now = found.get((kind, name))
        if now is None or now.error_code != ErrorCode.NONE:
            code = kafka_code(now.error_code) if now else ErrorCode.UNKNOWN_SERVER_ERROR
            failed.append((kind, name, code, now.error_message if now else "not described"))
            continue
        given = {c["name"]: c["value"] for c in r["configs"]}
        ops = [pb.AlterConfigOp(name=n, value=v or "", op=pb.AlterConfigOp.SET)
               for n, v in given.items() if v is not None]  # fmt: skip
        ops += [
            pb.AlterConfigOp(name=c.name, op=pb.AlterConfigOp.DELETE)
            for c in now.configs
            if c.source == common_pb2.ConfigEntry.TOPIC and given.get(c.name) is None
        ]
        resources.append(pb.AlterConfigsResource(type=kind, name=name, ops=ops))
    answer = await _alter(backend, resources, body["validate_only"]) if resources else _altered([])
    answer["responses"] += _altered(failed)["responses"]
    return answer
