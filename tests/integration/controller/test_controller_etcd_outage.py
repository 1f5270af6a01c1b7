"""Lost etcd connectivity is survived: the controller steps down, logs the outage, keeps
running, and becomes active again once etcd is back."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import etcd3
import pytest
from controller_testkit import Cluster, wait_until

from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import controller_pb2 as pb
from strom_server.etcd.process import EtcdProcess

pytestmark = pytest.mark.integration


def test_controller_survives_an_etcd_restart(tmp_path: Path, free_port: Callable[[], int]) -> None:
    ports = (free_port(), free_port())
    etcd = EtcdProcess(tmp_path / "etcd", client_port=ports[0], peer_port=ports[1])
    etcd.start()
    cluster = Cluster(etcd, "/outage", tmp_path, free_port, etcd3.client(etcd.host, etcd.port))
    try:
        controller = cluster.start_controller(1)
        cluster.active()
        etcd.stop()
        time.sleep(3)
        assert controller.process.exit_code() is None  # still running
        # Not active without etcd: admin RPCs are refused, Metadata names no controller.
        assert controller.active_id() is None
        refused = controller.stub.CreateTopics(
            pb.CreateTopicsRequest(topics=[pb.NewTopic(name="t", num_partitions=1,
                                                       replication_factor=1)]), timeout=15,
        ).topics[0]  # fmt: skip
        assert refused.error_code in (common_pb2.NOT_CONTROLLER, common_pb2.REQUEST_TIMED_OUT)

        etcd.start()
        wait_until(lambda: controller.active_id() == 1, 20, "the controller to be active again")
        text = controller.log_text()
        assert "etcd unreachable" in text and "etcd reachable again" in text
        cluster.register_broker(1)
        wait_until(lambda: len(controller.metadata().brokers) == 1, 5, "the broker")
        created = controller.stub.CreateTopics(
            pb.CreateTopicsRequest(topics=[pb.NewTopic(name="t", num_partitions=1,
                                                       replication_factor=1)]), timeout=10,
        ).topics[0]  # fmt: skip
        assert created.error_code == common_pb2.NONE, created.error_message
    finally:
        cluster.stop()
        etcd.stop()


def test_an_unreachable_endpoint_in_the_list_is_skipped(
    cluster: Cluster, free_port: Callable[[], int]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    controller = cluster.start_controller(1, etcd_endpoints=f"{dead},{cluster.etcd.endpoint}")
    cluster.active()
    cluster.register_broker(1)
    wait_until(lambda: len(controller.metadata().brokers) == 1, 5, "the broker")
    created = controller.stub.CreateTopics(
        pb.CreateTopicsRequest(topics=[pb.NewTopic(name="t", num_partitions=1,
                                                   replication_factor=1)]), timeout=10,
    ).topics[0]  # fmt: skip
    assert created.error_code == common_pb2.NONE, created.error_message
