"""A storage node in a cluster: leased registration in etcd and partitions from metadata.

The metadata keys are written here exactly as the controller writes them
(strom_server.etcd.keys), so the node is tested against the contract, not a controller.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import etcd3
import pytest
from storage_testkit import STORAGE, RunningNode
from strom_testkit import wait_until

from strom.protocol.v1 import common_pb2, storage_pb2
from strom.records import encode_batch
from strom_server.etcd.keys import ClusterKeys, decode_value, encode_value
from strom_server.etcd.process import EtcdProcess

pytestmark = pytest.mark.integration

KEYS = ClusterKeys("/strom-test")


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    with EtcdProcess(tmp_path / "etcd" / "data") as process:
        yield process


@pytest.fixture
def client(etcd: EtcdProcess) -> Iterator[etcd3.Etcd3Client]:
    c = etcd3.client(etcd.host, etcd.port)
    yield c
    c.close()


def _cluster_flags(etcd: EtcdProcess, node_id: int) -> tuple[str, ...]:
    return (
        "--etcd-endpoints",
        etcd.endpoint,
        "--etcd-prefix",
        KEYS.prefix,
        "--node-id",
        str(node_id),
        "--broker.session.timeout.ms",
        "2000",
    )


def _produce(node: RunningNode, topic: str, partition: int) -> storage_pb2.ProducePartitionResult:
    request = storage_pb2.ProduceRequest(
        acks=1,
        partitions=[
            storage_pb2.ProducePartitionData(
                topic=topic, partition=partition, records=encode_batch([(1, None, b"v", None)])
            )
        ],
    )
    return node.stub.Produce(request, timeout=10).partitions[0]


def test_registration_is_leased_and_removed_on_shutdown(
    start_node: Callable[..., RunningNode], etcd: EtcdProcess, client: etcd3.Etcd3Client
) -> None:
    node = start_node(*_cluster_flags(etcd, 7), "--rack", "r1")
    value, meta = client.get(KEYS.broker(7))
    assert value is not None
    registration = decode_value(value)
    assert registration == {
        "id": 7,
        "host": "127.0.0.1",
        "port": int(node.address.rsplit(":", 1)[1]),
        "rack": "r1",
    }
    assert meta.lease_id  # tied to the node's lease: gone when the node dies
    assert node.process.stop(10) == 0
    assert client.get(KEYS.broker(7))[0] is None  # revoked at shutdown, not left to expire


def test_a_second_node_with_the_same_id_is_refused(
    start_node: Callable[..., RunningNode],
    etcd: EtcdProcess,
    tmp_path: Path,
    free_port: Callable[[], int],
) -> None:
    start_node(*_cluster_flags(etcd, 3))
    second = subprocess.run(
        [
            STORAGE,
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--log-dirs",
            str(tmp_path / "dup"),
            *_cluster_flags(etcd, 3),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode != 0
    assert "node id 3 is already registered" in second.stderr


def test_a_restart_after_kill_9_takes_its_registration_back(
    start_node: Callable[..., RunningNode],
    etcd: EtcdProcess,
    client: etcd3.Etcd3Client,
) -> None:
    node = start_node(*_cluster_flags(etcd, 4))
    first_epoch = client.get(KEYS.broker(4))[1].create_revision
    assert node.process.popen is not None
    node.process.popen.kill()
    node.process.popen.wait(10)
    port = int(node.address.rsplit(":", 1)[1])
    again = start_node(*_cluster_flags(etcd, 4), data_dir=node.data_dir, port=port)
    value, meta = client.get(KEYS.broker(4))
    assert decode_value(value)["port"] == port
    assert meta.create_revision > first_epoch  # a new broker epoch: the controller sees a restart
    assert again.process.exit_code() is None


def test_partitions_follow_the_controller_metadata(
    start_node: Callable[..., RunningNode],
    etcd: EtcdProcess,
    client: etcd3.Etcd3Client,
) -> None:
    node = start_node(*_cluster_flags(etcd, 1))
    client.put(KEYS.broker_config, encode_value({"retention.ms": "3600000"}))
    client.put(
        KEYS.topic("orders"),
        encode_value(
            {
                "topic_id": "t1",
                "partitions": {"0": [1, 2], "1": [2, 1], "2": [2, 3]},
                "configs": {"segment.bytes": "1048576"},
            }
        ),
    )
    client.put(
        KEYS.partition("orders", 0),
        encode_value({"leader": 1, "leader_epoch": 4, "isr": [1, 2], "partition_epoch": 1}),
    )
    client.put(
        KEYS.partition("orders", 1),
        encode_value({"leader": 2, "leader_epoch": 1, "isr": [2, 1], "partition_epoch": 1}),
    )

    wait_until((node.data_dir / "orders-1").is_dir)
    assert (node.data_dir / "orders-0").is_dir()
    assert not (node.data_dir / "orders-2").exists()  # not a replica here
    leader = _produce(node, "orders", 0)
    assert leader.error_code == common_pb2.NONE
    follower = _produce(node, "orders", 1)
    assert follower.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER
    fetched = node.stub.Fetch(
        storage_pb2.FetchRequest(
            replica_id=-1,
            partitions=[
                storage_pb2.FetchPartition(
                    topic="orders", partition=0, fetch_offset=0, current_leader_epoch=3
                )
            ],
        ),
        timeout=10,
    ).partitions[0]
    assert fetched.error_code == common_pb2.FENCED_LEADER_EPOCH

    # Leadership moves here: the node leads partition 1 with the new epoch.
    client.put(
        KEYS.partition("orders", 1),
        encode_value({"leader": 1, "leader_epoch": 2, "isr": [1], "partition_epoch": 2}),
    )
    wait_until(lambda: _produce(node, "orders", 1).error_code == common_pb2.NONE)

    # Topic deleted: its logs go.
    client.delete(KEYS.topic("orders"))
    client.delete_prefix(KEYS.partitions_of("orders"))
    wait_until(lambda: not (node.data_dir / "orders-0").exists())
    assert _produce(node, "orders", 0).error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION


def test_topics_flag_is_refused_in_cluster_mode(
    etcd: EtcdProcess, tmp_path: Path, free_port: Callable[[], int]
) -> None:
    result = subprocess.run(
        [
            STORAGE,
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--log-dirs",
            str(tmp_path / "n"),
            *_cluster_flags(etcd, 9),
            "--topics",
            "a:1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "--topics is for standalone nodes" in result.stderr


def test_the_node_survives_an_etcd_outage_and_registers_again(
    start_node: Callable[..., RunningNode], tmp_path: Path
) -> None:
    data = tmp_path / "etcd-outage" / "data"
    first = EtcdProcess(data).start()
    client_port, peer_port = first.port, first.peer_port
    second: EtcdProcess | None = None
    try:
        client = etcd3.client(first.host, client_port)
        client.put(KEYS.topic("kept"), encode_value({"topic_id": "k", "partitions": {"0": [6]}}))
        client.put(KEYS.partition("kept", 0), encode_value({"leader": 6, "leader_epoch": 1}))
        client.close()
        node = start_node(*_cluster_flags(first, 6))
        wait_until(lambda: _produce(node, "kept", 0).error_code == common_pb2.NONE)

        first.stop()  # etcd gone for longer than the node's 2 s lease
        time.sleep(4)
        assert node.process.exit_code() is None  # no crash
        assert _produce(node, "kept", 0).error_code == common_pb2.NONE  # still serving

        second = EtcdProcess(data, client_port=client_port, peer_port=peer_port).start()
        client = etcd3.client(second.host, client_port)
        wait_until(lambda: client.get(KEYS.broker(6))[0] is not None, 30)
        client.close()
        assert node.process.exit_code() is None
        assert "etcd unreachable" in node.process.log_path.read_text()
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_node_keeps_trying_to_register_while_its_id_is_taken(
    start_node: Callable[..., RunningNode], etcd: EtcdProcess, client: etcd3.Etcd3Client
) -> None:
    """Its lease gone while another registration holds its id (what a partition can leave
    behind): the node's registering again fails, and it must keep trying until the id is
    free, not give up (its keep-alive used to die of the refusal, leaving it unregistered and,
    with the leader lease, refusing every acks=all write for good)."""
    node = start_node(*_cluster_flags(etcd, 8))
    _, meta = client.get(KEYS.broker(8))
    impostor = client.lease(60)
    client.put(KEYS.broker(8), encode_value({"id": 8, "host": "10.0.0.8", "port": 1}), impostor)
    client.revoke_lease(meta.lease_id)  # the key now lives on the impostor's lease
    wait_until(
        lambda: "registration lease expired" in node.process.log_path.read_text(),
        30,
        "the node to find its id taken",
    )
    impostor.revoke()
    port = int(node.address.rsplit(":", 1)[1])

    def registered_again() -> bool:
        value, _ = client.get(KEYS.broker(8))
        return value is not None and decode_value(value)["port"] == port

    wait_until(registered_again, 30, "the node's own registration back")
    assert node.process.exit_code() is None
