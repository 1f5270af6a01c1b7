"""``strom.Admin`` against a real local cluster: the API side of the admin CLI tests."""

from __future__ import annotations

import signal

import pytest
from cluster_testkit import LocalCluster, free_port, wait_until

from strom import Admin, NewTopic
from strom.errors import (
    BrokerResponseError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    NetworkExceptionError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from strom.types import TopicPartition

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(cluster: LocalCluster) -> Admin:
    with cluster.admin() as client:
        yield client  # type: ignore[misc]


def test_describe_cluster(admin: Admin) -> None:
    described = admin.describe_cluster()
    assert described.cluster_id
    assert described.controller is not None and described.controller.node_id in (1, 2)
    assert sorted(b.node_id for b in described.brokers) == [1, 2, 3]
    assert sorted(b.rack for b in described.brokers) == ["rack-1", "rack-2", "rack-3"]


def test_validate_only_creates_nothing(admin: Admin) -> None:
    admin.create_topics([NewTopic("checked", 3, 3)], validate_only=True)
    assert "checked" not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError, match="checked"):
        admin.describe_topics(["checked"])
    with pytest.raises(InvalidReplicationFactorError):  # validation still runs
        admin.create_topics([NewTopic("checked", 1, 4)], validate_only=True)


def test_explicit_replica_assignment_is_honoured(cluster: LocalCluster, admin: Admin) -> None:
    placement = {0: [2, 3, 1], 1: [3, 1, 2], 2: [1, 3, 2], 3: [2, 1, 3]}
    admin.create_topics([NewTopic("placed", replica_assignment=placement)])
    (described,) = admin.describe_topics(["placed"])
    assert {p.partition: list(p.replicas) for p in described.partitions} == placement
    assert [p.leader for p in described.partitions] == [2, 3, 1, 2]
    assert all(sorted(p.isr) == [1, 2, 3] for p in described.partitions)
    for node in (1, 2, 3):
        wait_until(
            lambda node=node: (
                cluster.partition_dirs(node, "placed") == {f"placed-{p}" for p in range(4)}
            ),
            20,
            f"storage-{node} to host placed-0..3",
        )
    admin.delete_topics(["placed"])
    assert "placed" not in admin.list_topics()
    wait_until(
        lambda: not any(cluster.partition_dirs(node, "placed") for node in (1, 2, 3)),
        20,
        "the storage nodes to remove the placed-* directories",
    )


def test_configs_and_partitions(admin: Admin) -> None:
    admin.create_topics(
        [NewTopic("tuned", 2, 2, topic_configs={"retention.ms": "1000", "segment.bytes": 1 << 20})]
    )
    configs = admin.describe_configs("tuned")
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == ("1000", "TOPIC")
    assert (configs["segment.bytes"].value, configs["segment.bytes"].source) == (
        str(1 << 20),
        "TOPIC",
    )
    assert configs["cleanup.policy"].source in ("DEFAULT", "BROKER_DEFAULT")

    admin.alter_configs("tuned", set_configs={"cleanup.policy": "compact"})
    admin.alter_configs("tuned", delete_configs=["retention.ms"])
    configs = admin.describe_configs("tuned")
    assert (configs["cleanup.policy"].value, configs["cleanup.policy"].source) == (
        "compact",
        "TOPIC",
    )
    assert configs["retention.ms"].source in ("DEFAULT", "BROKER_DEFAULT")
    assert configs["retention.ms"].value == "604800000"

    admin.alter_configs("tuned", set_configs={"retention.ms": "5"}, validate_only=True)
    assert admin.describe_configs("tuned")["retention.ms"].source != "TOPIC"

    with pytest.raises(InvalidConfigError, match=r"no\.such\.option"):
        admin.alter_configs("tuned", set_configs={"no.such.option": "1"})
    with pytest.raises(InvalidConfigError, match=r"min\.insync\.replicas"):
        admin.alter_configs("tuned", set_configs={"min.insync.replicas": "0"})

    admin.create_partitions({"tuned": 5})
    (described,) = admin.describe_topics(["tuned"])
    assert len(described.partitions) == 5
    assert all(len(p.replicas) == 2 for p in described.partitions)
    with pytest.raises(InvalidPartitionsError, match="tuned"):
        admin.create_partitions({"tuned": 3})
    with pytest.raises(InvalidPartitionsError, match="tuned"):
        admin.create_partitions({"tuned": 5})
    admin.delete_topics(["tuned"])


@pytest.mark.parametrize(
    ("topic", "error", "match"),
    [
        (NewTopic("bad/name", 1, 1), InvalidTopicError, "illegal characters"),
        (NewTopic("y" * 250, 1, 1), InvalidTopicError, "249"),
        (NewTopic(".", 1, 1), InvalidTopicError, "'.'"),
        (NewTopic("rf4", 1, 4), InvalidReplicationFactorError, "live brokers"),
        (NewTopic("cfg", 1, 1, topic_configs={"bogus": "1"}), InvalidConfigError, "bogus"),
        (
            NewTopic("cfg", 1, 1, topic_configs={"retention.ms": "-5"}),
            InvalidConfigError,
            "retention.ms",
        ),
        (NewTopic("nine", replica_assignment={0: [1, 9]}), InvalidReplicaAssignmentError, "9"),
        (NewTopic("dup", replica_assignment={0: [1, 1]}), InvalidReplicaAssignmentError, "twice"),
    ],
    ids=[
        "slash",
        "250-chars",
        "dot",
        "rf-above-live",
        "unknown-config",
        "config-out-of-range",
        "unknown-broker",
        "broker-twice",
    ],
)
def test_create_rejections(
    admin: Admin, topic: NewTopic, error: type[BrokerResponseError], match: str
) -> None:
    with pytest.raises(error, match=match):
        admin.create_topics([topic])
    assert topic.name not in admin.list_topics()


def test_duplicate_and_unknown_topics(admin: Admin) -> None:
    admin.create_topics([NewTopic("once", 1, 1)])
    with pytest.raises(TopicAlreadyExistsError, match="once"):
        admin.create_topics([NewTopic("once", 1, 1)])
    admin.delete_topics(["once"])
    for call in (
        lambda: admin.delete_topics(["once"]),
        lambda: admin.describe_topics(["once"]),
        lambda: admin.describe_configs("once"),
        lambda: admin.alter_configs("once", set_configs={"retention.ms": "1"}),
        lambda: admin.create_partitions({"once": 2}),
    ):
        with pytest.raises(UnknownTopicOrPartitionError, match="once"):
            call()


def test_elect_leaders_not_needed(admin: Admin) -> None:
    admin.create_topics([NewTopic("calm", 3, 2)])
    wanted = [TopicPartition("calm", p) for p in range(3)]
    assert admin.elect_leaders("preferred", wanted) == dict.fromkeys(wanted, "ELECTION_NOT_NEEDED")
    assert admin.elect_leaders("preferred", [TopicPartition("calm", 7)]) == {
        TopicPartition("calm", 7): "UNKNOWN_TOPIC_OR_PARTITION"
    }
    admin.delete_topics(["calm"])


def test_reassignment_cancel(cluster: LocalCluster, admin: Admin) -> None:
    admin.create_topics([NewTopic("shifting", replica_assignment={0: [1, 2]})])
    tp = TopicPartition("shifting", 0)
    # Node 3, the replica being added, is paused so that it cannot catch up: otherwise the
    # reassignment of this empty partition may complete before the cancel arrives.
    cluster.signal("storage-3", signal.SIGSTOP)
    try:
        admin.alter_partition_reassignments({tp: [3, 2]})
        assert admin.list_partition_reassignments() == {
            tp: {"replicas": (3, 2, 1), "adding": (3,), "removing": (1,)}
        }
        admin.alter_partition_reassignments({tp: None})  # cancel: the original replicas return
        assert admin.list_partition_reassignments() == {}
    finally:
        cluster.signal("storage-3", signal.SIGCONT)
    (described,) = admin.describe_topics(["shifting"])
    partition = described.partitions[0]
    # The original replica *set* and leader come back. Their order does not: the controller
    # rebuilds the original as (target + removing) minus adding = [2, 1], as Kafka does.
    assert sorted(partition.replicas) == [1, 2] and partition.leader == 1, partition
    admin.delete_topics(["shifting"])


def test_describe_cluster_lists_every_controller(admin: Admin) -> None:
    described = wait_until(
        lambda: (d := admin.describe_cluster()).controllers and len(d.controllers) == 2 and d,
        30,
        "both controllers registered",
    )
    assert [c.node_id for c in described.controllers] == [1, 2]
    assert described.controller is not None
    assert described.controller.address in {c.address for c in described.controllers}


def _sizes(admin: Admin, topic: str) -> dict[int, dict[int, int]]:
    """node id -> partition -> replica size of ``topic``."""
    found = admin.describe_log_dirs([topic])
    assert all(not b.error for b in found), found
    return {b.node_id: {tp.partition: r.size_bytes for tp, _, r in b.replicas()} for b in found}


def test_describe_log_dirs_sizes_grow_on_every_replica(cluster: LocalCluster, admin: Admin) -> None:
    admin.create_topics([NewTopic("sized", 2, 3)])
    cluster.wait_hosted("sized", 0)
    empty = wait_until(
        lambda: (s := _sizes(admin, "sized")) and all(len(p) == 2 for p in s.values()) and s,
        30,
        "every node to hold both partitions",
    )
    assert sorted(empty) == [1, 2, 3]
    assert all(size == 0 for node in empty.values() for size in node.values()), empty
    found = admin.describe_log_dirs(["sized"])
    for node in found:
        (log_dir,) = node.log_dirs
        assert log_dir.path == str(cluster.spec.data_dir / f"storage-{node.node_id}")
        assert log_dir.total_bytes >= log_dir.usable_bytes > 0
        assert node.address == cluster.storage_address(node.node_id)
    result = cluster.produce("sized", 1, [b"x" * 1000] * 10)
    assert result.error_code == 0, result

    def replicated() -> dict[int, dict[int, int]] | None:
        sizes = _sizes(admin, "sized")
        one = {node[1] for node in sizes.values()}
        return sizes if len(one) == 1 and one.pop() > 0 else None

    sizes = wait_until(replicated, 30, "partition 1's batch on all three replicas")
    assert all(node[0] == 0 and node[1] > 10_000 for node in sizes.values()), sizes
    everything = admin.describe_log_dirs()  # no topic filter: the internal topics too
    assert any(tp.topic == "sized" for b in everything for tp, _, _ in b.replicas())
    (unknown,) = admin.describe_log_dirs(["sized"], broker_ids=[99])
    assert unknown.node_id == 99 and unknown.error == "BROKER_NOT_AVAILABLE"
    assert unknown.log_dirs == ()


def test_unreachable_gateway() -> None:
    with (
        Admin(f"127.0.0.1:{free_port()}", request_timeout_ms=5000) as nobody,
        pytest.raises(NetworkExceptionError),
    ):
        nobody.list_topics()
