"""Broker liveness, leader moves, ISR changes, elections, reassignment and producer ids through
a real controller process; storage nodes are stood in for by their etcd registrations."""

from __future__ import annotations

import pytest
from controller_testkit import Cluster, RunningController, wait_until

from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import controller_pb2 as pb

pytestmark = pytest.mark.integration

E = common_pb2


def _state(cluster: Cluster, topic: str, partition: int = 0) -> dict:
    return cluster.get_json(f"/partitions/{topic}/{partition}")


def _create_placed(c: RunningController, name: str, *assignments: list[int]) -> None:
    spec = pb.NewTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[pb.ReplicaAssignment(partition=i, broker_ids=a)
                     for i, a in enumerate(assignments)],
    )  # fmt: skip
    [result] = c.stub.CreateTopics(pb.CreateTopicsRequest(topics=[spec]), timeout=5).topics
    assert result.error_code == E.NONE, result.error_message


def _alter_isr(c: RunningController, cluster: Cluster, broker: int, topic: str, isr: list[int],
               *, leader_epoch: int | None = None, partition_epoch: int | None = None,
               broker_epoch: int = 0) -> pb.AlterPartitionResult:  # fmt: skip
    state = _state(cluster, topic)
    item = pb.AlterPartitionItem(
        topic=topic, partition=0, new_isr=isr,
        leader_epoch=state["leader_epoch"] if leader_epoch is None else leader_epoch,
        partition_epoch=state["partition_epoch"] if partition_epoch is None else partition_epoch,
    )  # fmt: skip
    request = pb.AlterPartitionRequest(broker_id=broker, broker_epoch=broker_epoch,
                                       partitions=[item])  # fmt: skip
    return c.stub.AlterPartition(request, timeout=5).partitions[0]


def _elect(c: RunningController, kind: int, topic: str) -> pb.PartitionResult:
    request = pb.ElectLeadersRequest(
        election_type=kind, partitions=[common_pb2.TopicPartition(topic=topic, partition=0)]
    )
    return c.stub.ElectLeaders(request, timeout=5).partitions[0]


@pytest.fixture
def active(cluster: Cluster) -> RunningController:
    controller = cluster.start_controller(1)
    cluster.active()
    return controller


def test_registrations_are_seen_and_duplicates_refused(
    cluster: Cluster, active: RunningController
) -> None:
    assert cluster.register_broker(1, rack="r1", port=7001)
    assert cluster.register_broker(2, rack="r2", port=7002)
    assert not cluster.register_broker(1, rack="elsewhere")  # the id is in use

    def brokers() -> list[tuple[int, str, int, str]]:
        return [(b.node_id, b.host, b.port, b.rack) for b in active.metadata().brokers]

    wait_until(lambda: len(brokers()) == 2, 5, "two brokers")
    assert brokers() == [(1, "127.0.0.1", 7001, "r1"), (2, "127.0.0.1", 7002, "r2")]
    cluster.kill_broker(2)
    wait_until(lambda: [b[0] for b in brokers()] == [1], 5, "broker 2 to leave")
    assert "broker left" in active.log_text() and "broker registered" in active.log_text()
    assert cluster.register_broker(2, rack="r2")  # returning after its lease went


def test_leadership_follows_broker_liveness(cluster: Cluster, active: RunningController) -> None:
    for broker in (1, 2, 3):
        cluster.register_broker(broker)
    wait_until(lambda: len(active.metadata().brokers) == 3, 5, "three brokers")
    _create_placed(active, "t", [1, 2, 3])
    assert _state(cluster, "t") == {"leader": 1, "leader_epoch": 0, "isr": [1, 2, 3],
                                    "partition_epoch": 0}  # fmt: skip

    cluster.kill_broker(1)  # the leader leaves: the next ISR member leads, epoch bumped
    wait_until(lambda: _state(cluster, "t")["leader"] == 2, 5, "leader 2")
    assert _state(cluster, "t") == {"leader": 2, "leader_epoch": 1, "isr": [2, 3],
                                    "partition_epoch": 1}  # fmt: skip
    cluster.kill_broker(3)  # a follower leaves: ISR shrinks, leader stays
    wait_until(lambda: _state(cluster, "t")["isr"] == [2], 5, "ISR [2]")
    assert _state(cluster, "t")["leader_epoch"] == 1
    cluster.kill_broker(2)  # the last ISR member leaves: no leader, ISR keeps it
    wait_until(lambda: _state(cluster, "t")["leader"] == -1, 5, "no leader")
    assert _state(cluster, "t")["isr"] == [2]
    [p] = active.metadata("t").topics[0].partitions
    assert (p.leader_id, p.error_code) == (-1, E.LEADER_NOT_AVAILABLE)
    assert sorted(p.offline_replicas) == [1, 2, 3]

    cluster.register_broker(1)  # not in the ISR: cannot lead (unclean election is off)
    cluster.register_broker(2)  # the last ISR member returns and leads again
    wait_until(lambda: _state(cluster, "t")["leader"] == 2, 5, "leader 2 again")
    assert _state(cluster, "t")["leader_epoch"] == 3

    # Broker 1 is back but leads only after it is in sync and a preferred election runs.
    refused = _elect(active, pb.PREFERRED, "t")
    assert refused.error_code == E.PREFERRED_LEADER_NOT_AVAILABLE
    assert _alter_isr(active, cluster, 2, "t", [2, 1]).error_code == E.NONE
    assert _state(cluster, "t")["isr"] == [2, 1]
    assert _elect(active, pb.PREFERRED, "t").error_code == E.NONE
    assert _state(cluster, "t")["leader"] == 1 and _state(cluster, "t")["leader_epoch"] == 4
    assert _elect(active, pb.PREFERRED, "t").error_code == E.ELECTION_NOT_NEEDED
    assert _elect(active, pb.UNCLEAN, "t").error_code == E.ELECTION_NOT_NEEDED


def test_unclean_leader_election_when_the_topic_allows_it(
    cluster: Cluster, active: RunningController
) -> None:
    for broker in (1, 2):
        cluster.register_broker(broker)
    wait_until(lambda: len(active.metadata().brokers) == 2, 5, "two brokers")
    _create_placed(active, "u", [1, 2])
    op = pb.AlterConfigOp(name="unclean.leader.election.enable", value="true")
    resource = pb.AlterConfigsResource(type=pb.RESOURCE_TOPIC, name="u", ops=[op])
    request = pb.IncrementalAlterConfigsRequest(resources=[resource])
    assert active.stub.IncrementalAlterConfigs(request, timeout=5).results[0].error_code == E.NONE
    assert _alter_isr(active, cluster, 1, "u", [1]).error_code == E.NONE  # 2 falls behind
    cluster.kill_broker(1)
    wait_until(lambda: _state(cluster, "u")["leader"] == 2, 5, "unclean leader 2")
    assert _state(cluster, "u")["isr"] == [2]
    assert "unclean leader election" in active.log_text()


def test_alter_partition_refuses_stale_requests(
    cluster: Cluster, active: RunningController
) -> None:
    for broker in (1, 2):
        cluster.register_broker(broker)
    wait_until(lambda: len(active.metadata().brokers) == 2, 5, "two brokers")
    _create_placed(active, "isr", [1, 2])
    cases = [
        ({"broker": 2, "isr": [2]}, E.NOT_LEADER_OR_FOLLOWER),
        ({"broker": 1, "isr": [1], "leader_epoch": -1}, E.FENCED_LEADER_EPOCH),
        ({"broker": 1, "isr": [1], "leader_epoch": 5}, E.UNKNOWN_LEADER_EPOCH),
        ({"broker": 1, "isr": [1], "partition_epoch": 7}, E.INVALID_REQUEST),
        ({"broker": 1, "isr": [2]}, E.INVALID_REQUEST),  # without the leader
        ({"broker": 1, "isr": [1, 9]}, E.INVALID_REQUEST),  # not a replica
        ({"broker": 1, "isr": [1], "broker_epoch": 1}, E.INVALID_REQUEST),  # stale broker epoch
        ({"broker": 7, "isr": [7]}, E.NOT_LEADER_OR_FOLLOWER),  # not registered
    ]
    for case, code in cases:
        args = dict(case)
        broker, isr = args.pop("broker"), args.pop("isr")
        assert _alter_isr(active, cluster, broker, "isr", isr, **args).error_code == code, case
    assert _state(cluster, "isr")["isr"] == [1, 2]
    shrunk = _alter_isr(active, cluster, 1, "isr", [1])
    assert shrunk.error_code == E.NONE
    assert (list(shrunk.isr), shrunk.partition_epoch, shrunk.leader_epoch) == ([1], 1, 0)
    missing = active.stub.AlterPartition(pb.AlterPartitionRequest(broker_id=1, partitions=[
        pb.AlterPartitionItem(topic="nope", partition=0)]), timeout=5).partitions[0]  # fmt: skip
    assert missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_reassignment_moves_and_raises_replication(
    cluster: Cluster, active: RunningController
) -> None:
    for broker in (1, 2, 3):
        cluster.register_broker(broker)
    wait_until(lambda: len(active.metadata().brokers) == 3, 5, "three brokers")
    _create_placed(active, "r", [1])

    def reassign(target: list[int], throttle: int = 0, topic: str = "r") -> pb.PartitionResult:
        request = pb.AlterPartitionReassignmentsRequest(
            reassignments=[pb.PartitionReassignment(topic=topic, partition=0, replicas=target)],
            throttle_bytes_per_sec=throttle,
        )
        return active.stub.AlterPartitionReassignments(request, timeout=5).partitions[0]

    def ongoing() -> list[tuple[list[int], list[int], list[int]]]:
        listed = active.stub.ListPartitionReassignments(
            pb.ListPartitionReassignmentsRequest(), timeout=5
        )
        return [(list(r.replicas), list(r.adding_replicas), list(r.removing_replicas))
                for r in listed.reassignments]  # fmt: skip

    # Raise the replication factor 1 -> 2 (a reassignment to a longer target), throttled.
    assert reassign([1, 2], throttle=1_000_000).error_code == E.NONE
    assert ongoing() == [([1, 2], [2], [])]
    assert cluster.get_json("/reassignments/r/0") == {
        "target": [1, 2], "adding": [2], "removing": [], "throttle_bytes_per_sec": 1_000_000
    }  # fmt: skip
    assert reassign([3]).error_code == E.REASSIGNMENT_IN_PROGRESS
    # The leader reports broker 2 in sync: the reassignment completes.
    assert _alter_isr(active, cluster, 1, "r", [1, 2]).error_code == E.NONE
    wait_until(lambda: ongoing() == [], 5, "the reassignment to complete")
    assert cluster.get_json("/topics/r")["partitions"]["0"] == [1, 2]
    assert cluster.get_json("/reassignments/r/0") is None

    # Move away from the leader: completes at once (2 is in sync), leadership moves to 2.
    assert reassign([2]).error_code == E.NONE
    wait_until(lambda: cluster.get_json("/topics/r")["partitions"]["0"] == [2], 5, "move")
    state = _state(cluster, "r")
    assert (state["leader"], state["isr"]) == (2, [2])

    # Cancel restores the original replicas.
    assert reassign([3]).error_code == E.NONE
    assert cluster.get_json("/topics/r")["partitions"]["0"] == [3, 2]
    assert reassign([]).error_code == E.NONE
    assert cluster.get_json("/topics/r")["partitions"]["0"] == [2]
    assert ongoing() == []
    assert reassign([]).error_code == E.NO_REASSIGNMENT_IN_PROGRESS
    assert reassign([2, 2]).error_code == E.INVALID_REPLICA_ASSIGNMENT
    assert reassign([8]).error_code == E.INVALID_REPLICA_ASSIGNMENT
    assert reassign([1], topic="nope").error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_producer_ids_are_unique_across_failover(cluster: Cluster) -> None:
    first = cluster.start_controller(1)
    cluster.active()
    ids = [first.stub.InitProducerId(pb.InitProducerIdRequest(producer_id=-1), timeout=5)
           for _ in range(3)]  # fmt: skip
    assert [r.error_code for r in ids] == [E.NONE] * 3
    assert [r.producer_id for r in ids] == [0, 1, 2] and ids[0].producer_epoch == 0
    assert cluster.get_json("/producer_ids/next_block") == {"next": 1000}
    bumped = first.stub.InitProducerId(
        pb.InitProducerIdRequest(producer_id=2, producer_epoch=0), timeout=5
    )
    assert (bumped.producer_id, bumped.producer_epoch) == (2, 1)
    second = cluster.start_controller(2)
    assert (
        second.stub.InitProducerId(pb.InitProducerIdRequest(producer_id=-1), timeout=5).error_code
        == E.NOT_CONTROLLER
    )
    first.process.stop(5)
    wait_until(lambda: second.active_id() == 2, 10, "controller 2 active")
    after = second.stub.InitProducerId(pb.InitProducerIdRequest(producer_id=-1), timeout=5)
    assert (after.error_code, after.producer_id) == (E.NONE, 1000)


def test_a_new_controller_repairs_what_changed_while_none_was_active(cluster: Cluster) -> None:
    for broker in (1, 2):
        cluster.register_broker(broker)
    first = cluster.start_controller(1)
    cluster.active()
    wait_until(lambda: len(first.metadata().brokers) == 2, 5, "two brokers")
    _create_placed(first, "gap", [1, 2])
    first.process.stop(5)
    cluster.kill_broker(1)  # no controller is running: nobody reacts yet
    assert _state(cluster, "gap")["leader"] == 1
    second = cluster.start_controller(2)
    wait_until(lambda: second.active_id() == 2, 10, "controller 2 active")
    assert _state(cluster, "gap") == {"leader": 2, "leader_epoch": 1, "isr": [2],
                                      "partition_epoch": 1}  # fmt: skip


def test_a_topic_larger_than_one_transaction(cluster: Cluster, active: RunningController) -> None:
    for broker in (1, 2, 3):
        cluster.register_broker(broker)
    wait_until(lambda: len(active.metadata().brokers) == 3, 5, "three brokers")
    request = pb.CreateTopicsRequest(
        topics=[pb.NewTopic(name="wide", num_partitions=250, replication_factor=2)]
    )
    [result] = active.stub.CreateTopics(request, timeout=10).topics
    assert result.error_code == E.NONE, result.error_message
    states = list(cluster.client.get_prefix(f"{cluster.prefix}/partitions/wide/"))
    assert len(states) == 250
    assert len(cluster.get_json("/topics/wide")["partitions"]) == 250
    deleted = active.stub.DeleteTopics(pb.DeleteTopicsRequest(names=["wide"]), timeout=5)
    assert deleted.topics[0].error_code == E.NONE
    assert list(cluster.client.get_prefix(f"{cluster.prefix}/partitions/wide/")) == []
