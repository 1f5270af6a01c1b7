"""Automatic preferred-leader rebalance through real controller processes (check interval 1 s):
leadership moved away by a broker's death goes back once the broker is in sync again, also
after a controller failover; with ``auto.leader.rebalance.enable=false`` it stays."""

from __future__ import annotations

import time

import pytest
from controller_testkit import Cluster, RunningController, wait_until

from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import controller_pb2 as pb

pytestmark = pytest.mark.integration

E = common_pb2
FAST = ("--leader.imbalance.check.interval.seconds", "1")


def _state(cluster: Cluster, topic: str = "b") -> dict:
    return cluster.get_json(f"/partitions/{topic}/0")


def _create(c: RunningController, name: str, replicas: list[int]) -> None:
    spec = pb.NewTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[pb.ReplicaAssignment(partition=0, broker_ids=replicas)],
    )  # fmt: skip
    [result] = c.stub.CreateTopics(pb.CreateTopicsRequest(topics=[spec]), timeout=5).topics
    assert result.error_code == E.NONE, result.error_message


def _rejoin_isr(c: RunningController, cluster: Cluster, broker: int, topic: str = "b") -> None:
    """The current leader reports ``broker`` caught up (AlterPartition, as a leader does)."""
    state = _state(cluster, topic)
    item = pb.AlterPartitionItem(
        topic=topic, partition=0, new_isr=[*state["isr"], broker],
        leader_epoch=state["leader_epoch"], partition_epoch=state["partition_epoch"],
    )  # fmt: skip
    request = pb.AlterPartitionRequest(broker_id=state["leader"], partitions=[item])
    assert c.stub.AlterPartition(request, timeout=5).partitions[0].error_code == E.NONE


def _fail_over_broker_1(c: RunningController, cluster: Cluster) -> None:
    """Broker 1 (the preferred leader) dies, leadership moves to 2, 1 returns and catches up."""
    cluster.kill_broker(1)
    wait_until(lambda: _state(cluster)["leader"] == 2, 5, "leader 2 after broker 1 died")
    assert 1 not in _state(cluster)["isr"]
    assert cluster.register_broker(1)
    wait_until(lambda: len(c.metadata().brokers) == 3, 5, "broker 1 back")
    assert _state(cluster)["leader"] == 2  # a returning broker moves nothing by itself
    _rejoin_isr(c, cluster, 1)


def _three_brokers(cluster: Cluster, c: RunningController) -> None:
    for broker in (1, 2, 3):
        cluster.register_broker(broker)
    wait_until(lambda: len(c.metadata().brokers) == 3, 5, "three brokers")


def test_leadership_returns_to_the_preferred_replica(cluster: Cluster) -> None:
    first = cluster.start_controller(1, *FAST)
    cluster.active()
    second = cluster.start_controller(2, *FAST)  # a standby: it never checks
    _three_brokers(cluster, first)
    _create(first, "b", [1, 2, 3])
    _fail_over_broker_1(first, cluster)
    wait_until(lambda: _state(cluster)["leader"] == 1, 10, "leadership back on broker 1")
    assert _state(cluster)["leader_epoch"] == 2  # one move away, one back
    assert "automatic preferred leader election" in first.log_text()
    assert "automatic preferred leader election" not in second.log_text()

    # The new active controller runs the check after a failover.
    first.process.stop(5)
    wait_until(lambda: second.active_id() == 2, 10, "controller 2 active")
    _fail_over_broker_1(second, cluster)
    wait_until(lambda: _state(cluster)["leader"] == 1, 10, "leadership back on broker 1 again")
    assert "automatic preferred leader election" in second.log_text()


def test_disabled_rebalance_leaves_leadership_where_it_is(cluster: Cluster) -> None:
    active = cluster.start_controller(1, *FAST, "--no-auto.leader.rebalance.enable")
    cluster.active()
    _three_brokers(cluster, active)
    _create(active, "b", [1, 2, 3])
    _fail_over_broker_1(active, cluster)
    assert 1 in _state(cluster)["isr"]
    time.sleep(3.5)  # three check intervals: nothing may happen, so there is nothing to poll
    assert _state(cluster)["leader"] == 2
    assert "automatic preferred leader election" not in active.log_text()
    # On demand still works.
    request = pb.ElectLeadersRequest(
        election_type=pb.PREFERRED, partitions=[common_pb2.TopicPartition(topic="b", partition=0)]
    )
    assert active.stub.ElectLeaders(request, timeout=5).partitions[0].error_code == E.NONE
    assert _state(cluster)["leader"] == 1
