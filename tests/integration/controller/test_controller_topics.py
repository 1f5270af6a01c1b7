"""Topic administration through a real controller process: create, describe, alter configs,
add partitions, delete, auto-creation, and every rejection with its error code."""

from __future__ import annotations

import pytest
from controller_testkit import Cluster, RunningController, wait_until

from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import controller_pb2 as pb

pytestmark = pytest.mark.integration

E = common_pb2


def _create(c: RunningController, *topics: pb.NewTopic, validate_only: bool = False):
    response = c.stub.CreateTopics(
        pb.CreateTopicsRequest(topics=topics, validate_only=validate_only), timeout=10
    )
    return list(response.topics)


def _topic(name: str, partitions: int = 1, rf: int = 1, **kwargs) -> pb.NewTopic:
    return pb.NewTopic(name=name, num_partitions=partitions, replication_factor=rf, **kwargs)


def _describe(c: RunningController, rtype: int, name: str, *names: str):
    response = c.stub.DescribeConfigs(
        pb.DescribeConfigsRequest(
            resources=[pb.ConfigResource(type=rtype, name=name, config_names=names)]
        ),
        timeout=5,
    )
    return response.results[0]


def _alter(c: RunningController, rtype: int, name: str, *ops: pb.AlterConfigOp, validate=False):
    response = c.stub.IncrementalAlterConfigs(
        pb.IncrementalAlterConfigsRequest(
            resources=[pb.AlterConfigsResource(type=rtype, name=name, ops=ops)],
            validate_only=validate,
        ),
        timeout=5,
    )
    return response.results[0]


@pytest.fixture
def active(cluster: Cluster) -> RunningController:
    for broker, rack in ((1, "rack-a"), (2, "rack-a"), (3, "rack-b")):
        cluster.register_broker(broker, rack=rack)
    controller = cluster.start_controller(1)
    cluster.active()
    wait_until(lambda: len(controller.metadata().brokers) == 3, 5, "three brokers")
    return controller


def test_create_describe_and_delete_a_topic(cluster: Cluster, active: RunningController) -> None:
    [result] = _create(active, _topic("orders", 6, 2, configs={"retention.ms": "60000"}))
    assert result.error_code == E.NONE, result.error_message
    assert (result.num_partitions, result.replication_factor) == (6, 2)
    assert len(result.topic_id) == 32
    configs = {c.name: c for c in result.configs}
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == E.ConfigEntry.TOPIC
    assert configs["segment.bytes"].source == E.ConfigEntry.DEFAULT

    stored = cluster.get_json("/topics/orders")
    assert stored["topic_id"] == result.topic_id
    assert stored["configs"] == {"retention.ms": "60000"}
    assert sorted(stored["partitions"]) == [str(p) for p in range(6)]

    [topic] = active.metadata("orders").topics
    assert topic.error_code == E.NONE and topic.topic_id == result.topic_id
    leaders = []
    for p in topic.partitions:
        replicas = list(p.replicas)
        assert len(replicas) == 2 and len(set(replicas)) == 2
        assert p.leader_id == replicas[0]  # the preferred leader leads a new partition
        assert list(p.isr) == replicas and p.leader_epoch == 0
        # Rack-aware: every partition has a replica on each of the two racks.
        assert 3 in replicas
        assert stored["partitions"][str(p.partition)] == replicas
        state = cluster.get_json(f"/partitions/orders/{p.partition}")
        assert state == {"leader": replicas[0], "leader_epoch": 0, "isr": replicas,
                         "partition_epoch": 0}  # fmt: skip
        leaders.append(p.leader_id)
    assert {leaders.count(b) for b in (1, 2, 3)} == {2}  # leaders balanced over the brokers

    deleted = active.stub.DeleteTopics(pb.DeleteTopicsRequest(names=["orders", "nope"]), timeout=5)
    assert [t.error_code for t in deleted.topics] == [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert cluster.get_json("/topics/orders") is None
    assert list(cluster.client.get_prefix(f"{cluster.prefix}/partitions/orders/")) == []
    assert active.metadata("orders").topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_create_rejections(cluster: Cluster, active: RunningController) -> None:
    assert _create(active, _topic("a.b"))[0].error_code == E.NONE
    cases = [
        (_topic("a.b"), E.TOPIC_ALREADY_EXISTS, "already exists"),
        (_topic("a_b"), E.INVALID_TOPIC_EXCEPTION, "collides"),
        (_topic(""), E.INVALID_TOPIC_EXCEPTION, "empty"),
        (_topic("."), E.INVALID_TOPIC_EXCEPTION, "cannot be"),
        (_topic(".."), E.INVALID_TOPIC_EXCEPTION, "cannot be"),
        (_topic("x" * 250), E.INVALID_TOPIC_EXCEPTION, "249"),
        (_topic("has space"), E.INVALID_TOPIC_EXCEPTION, "illegal"),
        (_topic("a/b"), E.INVALID_TOPIC_EXCEPTION, "illegal"),
        (_topic("t-rf", 1, 4), E.INVALID_REPLICATION_FACTOR, "live brokers (3)"),
        (_topic("t-rf0", 1, 0), E.INVALID_REPLICATION_FACTOR, "larger than 0"),
        (_topic("t-p0", 0, 1), E.INVALID_PARTITIONS, "number of partitions"),
        (_topic("t-cfg", configs={"retention.ms": "soon"}), E.INVALID_CONFIG, "retention.ms"),
        (_topic("t-cfg2", configs={"no.such.config": "1"}), E.INVALID_CONFIG, "no.such.config"),
        (_topic("t-cfg3", configs={"min.insync.replicas": "0"}), E.INVALID_CONFIG, "min.insync"),
        (
            pb.NewTopic(name="t-both", num_partitions=2, replication_factor=-1,
                        assignments=[pb.ReplicaAssignment(partition=0, broker_ids=[1])]),
            E.INVALID_REQUEST, "not both",
        ),
        (
            pb.NewTopic(name="t-dup", num_partitions=-1, replication_factor=-1,
                        assignments=[pb.ReplicaAssignment(partition=0, broker_ids=[1, 1])]),
            E.INVALID_REPLICA_ASSIGNMENT, "twice",
        ),
        (
            pb.NewTopic(name="t-unknown", num_partitions=-1, replication_factor=-1,
                        assignments=[pb.ReplicaAssignment(partition=0, broker_ids=[1, 9])]),
            E.INVALID_REPLICA_ASSIGNMENT, "not registered",
        ),
        (
            pb.NewTopic(name="t-gap", num_partitions=-1, replication_factor=-1,
                        assignments=[pb.ReplicaAssignment(partition=1, broker_ids=[1])]),
            E.INVALID_REPLICA_ASSIGNMENT, "consecutive",
        ),
        (
            pb.NewTopic(name="t-uneven", num_partitions=-1, replication_factor=-1, assignments=[
                pb.ReplicaAssignment(partition=0, broker_ids=[1]),
                pb.ReplicaAssignment(partition=1, broker_ids=[1, 2])]),
            E.INVALID_REPLICA_ASSIGNMENT, "same for every partition",
        ),
    ]  # fmt: skip
    results = _create(active, *(spec for spec, _, _ in cases))
    for (spec, code, text), result in zip(cases, results, strict=True):
        assert (spec.name[:20], result.error_code) == (spec.name[:20], code), result.error_message
        assert text in result.error_message, (spec.name, result.error_message)
    names = {t.name for t in active.metadata().topics}
    assert names == {"a.b"}
    # One bad item does not fail the others; duplicates in one request are refused.
    mixed = _create(active, _topic("good"), _topic("bad!"), _topic("twice"), _topic("twice"))
    assert [r.error_code for r in mixed] == [
        E.NONE, E.INVALID_TOPIC_EXCEPTION, E.INVALID_REQUEST, E.INVALID_REQUEST
    ]  # fmt: skip


def test_explicit_assignment_and_validate_only(cluster: Cluster, active: RunningController) -> None:
    spec = pb.NewTopic(
        name="placed", num_partitions=-1, replication_factor=-1,
        assignments=[pb.ReplicaAssignment(partition=0, broker_ids=[3, 1]),
                     pb.ReplicaAssignment(partition=1, broker_ids=[2, 3])],
    )  # fmt: skip
    [checked] = _create(active, spec, validate_only=True)
    assert checked.error_code == E.NONE and checked.num_partitions == 2
    assert cluster.get_json("/topics/placed") is None
    [created] = _create(active, spec)
    assert created.error_code == E.NONE
    assert cluster.get_json("/topics/placed")["partitions"] == {"0": [3, 1], "1": [2, 3]}
    leaders = [p.leader_id for p in active.metadata("placed").topics[0].partitions]
    assert leaders == [3, 2]


def test_defaults_apply_when_counts_are_omitted(cluster: Cluster) -> None:
    cluster.register_broker(1)
    cluster.register_broker(2)
    c = cluster.start_controller(
        1, "--num.partitions", "3", "--default.replication.factor", "2",
        "--topic.config.defaults", "retention.ms=1000",
    )  # fmt: skip
    cluster.active()
    [result] = _create(c, pb.NewTopic(name="d", num_partitions=-1, replication_factor=-1))
    assert (result.error_code, result.num_partitions, result.replication_factor) == (
        E.NONE, 3, 2
    )  # fmt: skip
    assert cluster.get_json("/config/brokers") == {"retention.ms": "1000"}
    described = _describe(c, pb.RESOURCE_TOPIC, "d", "retention.ms", "segment.ms")
    assert [(e.name, e.value, e.source) for e in described.configs] == [
        ("retention.ms", "1000", E.ConfigEntry.BROKER_DEFAULT),
        ("segment.ms", "604800000", E.ConfigEntry.DEFAULT),
    ]
    broker = _describe(c, pb.RESOURCE_BROKER, "")
    entries = {e.name: e for e in broker.configs}
    assert entries["retention.ms"].source == E.ConfigEntry.BROKER_DEFAULT
    assert entries["num.partitions"].value == "3" and entries["num.partitions"].read_only


def test_alter_configs(cluster: Cluster, active: RunningController) -> None:
    assert _create(active, _topic("cfg"))[0].error_code == E.NONE
    op = pb.AlterConfigOp
    ok = _alter(active, pb.RESOURCE_TOPIC, "cfg", op(name="retention.ms", value="1000"),
                op(name="cleanup.policy", value="compact", op=op.APPEND))  # fmt: skip
    assert ok.error_code == E.NONE, ok.error_message
    assert cluster.get_json("/topics/cfg")["configs"] == {
        "retention.ms": "1000", "cleanup.policy": "delete,compact"
    }  # fmt: skip
    entries = {e.name: e for e in _describe(active, pb.RESOURCE_TOPIC, "cfg").configs}
    assert entries["retention.ms"].source == E.ConfigEntry.TOPIC
    assert entries["cleanup.policy"].value == "delete,compact"

    rejected = [
        (op(name="retention.ms", value="x"), E.INVALID_CONFIG),
        (op(name="retention.ms", value="-5"), E.INVALID_CONFIG),
        (op(name="not.a.config", value="1"), E.INVALID_CONFIG),
        (op(name="retention.ms", value="5", op=op.APPEND), E.INVALID_CONFIG),
        (op(name="cleanup.policy", value="forever"), E.INVALID_CONFIG),
    ]
    for bad, code in rejected:
        assert _alter(active, pb.RESOURCE_TOPIC, "cfg", bad).error_code == code, bad
    assert cluster.get_json("/topics/cfg")["configs"]["retention.ms"] == "1000"
    missing = _alter(active, pb.RESOURCE_TOPIC, "missing", op(name="retention.ms", value="1"))
    assert missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION

    validate = _alter(active, pb.RESOURCE_TOPIC, "cfg", op(name="retention.ms", value="7"),
                      validate=True)  # fmt: skip
    assert validate.error_code == E.NONE
    assert cluster.get_json("/topics/cfg")["configs"]["retention.ms"] == "1000"

    back = _alter(active, pb.RESOURCE_TOPIC, "cfg", op(name="retention.ms", op=op.DELETE))
    assert back.error_code == E.NONE
    assert "retention.ms" not in cluster.get_json("/topics/cfg")["configs"]

    # Cluster-wide broker defaults for topic configs.
    assert (
        _alter(active, pb.RESOURCE_BROKER, "", op(name="retention.ms", value="5000")).error_code
        == E.NONE
    )
    assert cluster.get_json("/config/brokers") == {"retention.ms": "5000"}
    entries = {e.name: e for e in _describe(active, pb.RESOURCE_TOPIC, "cfg").configs}
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "5000", E.ConfigEntry.BROKER_DEFAULT
    )  # fmt: skip
    read_only = _alter(active, pb.RESOURCE_BROKER, "", op(name="num.partitions", value="9"))
    assert read_only.error_code == E.INVALID_CONFIG
    unknown = _describe(active, pb.RESOURCE_TOPIC, "missing")
    assert unknown.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_increase_partitions_and_refuse_a_decrease(
    cluster: Cluster, active: RunningController
) -> None:
    assert _create(active, _topic("grow", 2, 2))[0].error_code == E.NONE

    def grow(count: int, *assignments: list[int], validate: bool = False) -> pb.TopicResult:
        request = pb.CreatePartitionsRequest(
            topics=[pb.CreatePartitionsTopic(name="grow", count=count, assignments=[
                pb.ReplicaAssignment(partition=i, broker_ids=a)
                for i, a in enumerate(assignments)])],
            validate_only=validate,
        )  # fmt: skip
        return active.stub.CreatePartitions(request, timeout=5).topics[0]

    assert grow(4).error_code == E.NONE
    assert len(cluster.get_json("/topics/grow")["partitions"]) == 4
    assert cluster.get_json("/partitions/grow/3")["leader_epoch"] == 0
    assert grow(6, validate=True).error_code == E.NONE
    assert len(cluster.get_json("/topics/grow")["partitions"]) == 4
    assert grow(5, [2, 3]).error_code == E.NONE
    assert cluster.get_json("/topics/grow")["partitions"]["4"] == [2, 3]
    decrease = grow(3)
    assert decrease.error_code == E.INVALID_PARTITIONS
    assert "cannot be decreased" in decrease.error_message
    assert grow(5).error_code == E.INVALID_PARTITIONS
    assert grow(6, [1]).error_code == E.INVALID_REPLICA_ASSIGNMENT
    assert len(active.metadata("grow").topics[0].partitions) == 5
    unknown = active.stub.CreatePartitions(
        pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsTopic(name="nope", count=3)]),
        timeout=5,
    )
    assert unknown.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_auto_creates_topics_when_allowed(cluster: Cluster) -> None:
    cluster.register_broker(1)
    on = cluster.start_controller(1)
    cluster.active()
    [missing] = on.metadata("auto").topics
    assert missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    [created] = on.metadata("auto", auto_create=True).topics
    assert created.error_code == E.NONE and len(created.partitions) == 1
    assert created.partitions[0].leader_id == 1
    [bad] = on.metadata("bad name", auto_create=True).topics
    assert bad.error_code == E.INVALID_TOPIC_EXCEPTION
    on.process.stop(5)

    off = cluster.start_controller(2, "--no-auto.create.topics.enable")
    wait_until(lambda: off.active_id() == 2, 10, "controller 2 active")
    [refused] = off.metadata("other", auto_create=True).topics
    assert refused.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.get_json("/topics/other") is None
