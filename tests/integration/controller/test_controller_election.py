"""Controller election with real etcd and real controller processes: one active, standbys
naming it, kill -9 failover within 2x the lease TTL, fencing of a paused controller."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from controller_testkit import TTL_MS, Cluster, wait_until

from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import controller_pb2 as pb

pytestmark = pytest.mark.integration


def _create(controller, name: str, timeout: float = 10) -> pb.CreateTopicResult:
    response = controller.stub.CreateTopics(
        pb.CreateTopicsRequest(
            topics=[pb.NewTopic(name=name, num_partitions=1, replication_factor=1)]
        ),
        timeout=timeout,
    )
    return response.topics[0]


def test_one_active_controller_standbys_name_it(cluster: Cluster) -> None:
    first = cluster.start_controller(1)
    second = cluster.start_controller(2)
    cluster.register_broker(1)
    active = cluster.active()
    standby = second if active is first else first

    leader = cluster.get_json("/controller/leader")
    assert leader["id"] == active.controller_id
    assert f"{leader['host']}:{leader['port']}" == active.address
    assert cluster.get_json("/controller/epoch") == {"epoch": leader["epoch"]}
    assert cluster.get_json("/cluster/id")["cluster_id"]

    # The standby refuses admin RPCs with a retriable NOT_CONTROLLER naming the active one.
    refused = _create(standby, "orders")
    assert refused.error_code == common_pb2.NOT_CONTROLLER
    assert f"active controller is {active.controller_id} at {active.address}" in (
        refused.error_message
    )
    assert cluster.get_json("/topics/orders") is None

    [auto] = standby.metadata("auto", auto_create=True).topics
    assert auto.error_code == common_pb2.NOT_CONTROLLER
    with pytest.raises(grpc.RpcError) as failure:
        standby.stub.ListPartitionReassignments(pb.ListPartitionReassignmentsRequest(), timeout=5)
    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
    assert ("strom-error-code", "41") in failure.value.trailing_metadata()
    assert f"active controller is {active.controller_id}" in failure.value.details()

    created = _create(active, "orders")
    assert created.error_code == common_pb2.NONE, created.error_message

    # The standby serves Metadata from its watch-fed cache, naming the active controller.
    def standby_sees_topic() -> bool:
        return [t.name for t in standby.metadata().topics] == ["orders"]

    wait_until(standby_sees_topic, 5, "the standby's cache to show the topic")
    view = standby.metadata()
    assert view.controller.node_id == active.controller_id
    assert f"{view.controller.host}:{view.controller.port}" == active.address
    assert view.cluster_id == cluster.get_json("/cluster/id")["cluster_id"]


def test_kill9_failover_within_twice_the_lease_ttl(cluster: Cluster) -> None:
    controllers = [cluster.start_controller(i) for i in (1, 2, 3)]
    cluster.register_broker(1)
    active = cluster.active()
    epoch_before = cluster.get_json("/controller/epoch")["epoch"]
    survivors = [c for c in controllers if c is not active]

    killed_at = time.monotonic()
    active.signal(signal.SIGKILL)

    def new_active() -> int | None:
        ids = {c.active_id() for c in survivors}
        if len(ids) == 1 and None not in ids and active.controller_id not in ids:
            return ids.pop()
        return None

    new_id = wait_until(new_active, 4 * TTL_MS / 1000, "a standby to take over")
    elapsed = time.monotonic() - killed_at
    print(f"kill -9 failover took {elapsed:.2f} s (lease TTL {TTL_MS / 1000:.1f} s)")
    assert elapsed < 2 * TTL_MS / 1000
    assert cluster.get_json("/controller/epoch")["epoch"] == epoch_before + 1
    new_active_controller = next(c for c in survivors if c.controller_id == new_id)
    assert _create(new_active_controller, "after-failover").error_code == common_pb2.NONE


def test_graceful_shutdown_hands_over_at_once(cluster: Cluster) -> None:
    controllers = [cluster.start_controller(i) for i in (1, 2)]
    active = cluster.active()
    other = next(c for c in controllers if c is not active)
    stopped_at = time.monotonic()
    assert active.process.stop(10) == 0
    wait_until(lambda: other.active_id() == other.controller_id, TTL_MS / 1000, "a handover")
    assert time.monotonic() - stopped_at < TTL_MS / 1000


def test_paused_controller_cannot_write_after_resuming(cluster: Cluster) -> None:
    controllers = [cluster.start_controller(i) for i in (1, 2)]
    cluster.register_broker(1)
    paused = cluster.active()
    other = next(c for c in controllers if c is not paused)

    paused.signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: other.active_id() == other.controller_id, 4 * TTL_MS / 1000, "a takeover"
        )
        with ThreadPoolExecutor(1) as pool:
            # Sent while the old controller is stopped: it handles it right after SIGCONT,
            # still believing it is active until its lease check or the fenced write says not.
            pending = pool.submit(_create, paused, "from-the-past", 15)
            time.sleep(0.3)
            paused.signal(signal.SIGCONT)
            result = pending.result()
    finally:
        paused.signal(signal.SIGCONT)

    assert result.error_code == common_pb2.NOT_CONTROLLER, result
    assert f"active controller is {other.controller_id}" in result.error_message
    assert cluster.get_json("/topics/from-the-past") is None
    wait_until(lambda: paused.active_id() == other.controller_id, 5, "the old one to follow")
    assert "no longer the active controller" in paused.log_text()
    # The resumed controller keeps refusing; the new one keeps working.
    assert _create(paused, "still-refused").error_code == common_pb2.NOT_CONTROLLER
    assert _create(other, "accepted").error_code == common_pb2.NONE
