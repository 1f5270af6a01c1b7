"""Raw gRPC helpers for the coordinator process tests: FindCoordinator, OffsetCommit and
OffsetFetch straight to a coordinator, and the ownership keys read from etcd."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import etcd3
import grpc
import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from strom_testkit import wait_until

from strom.protocol.v1 import common_pb2, coordinator_pb2
from strom.protocol.v1.coordinator_pb2_grpc import GroupCoordinatorStub

OFFSETS = "__consumer_offsets"
PARTITIONS = 8
LEASE_S = 3
COORDINATOR_FLAGS = (
    "--coordinator.session.timeout.ms", str(LEASE_S * 1000),
    "--offsets.topic.num.partitions", str(PARTITIONS),
    "--offsets.topic.replication.factor", "5",  # capped by the 3 storage nodes
    "--group-initial-rebalance-delay-ms", "0",
    "--group-min-session-timeout-ms", "500",
)  # fmt: skip
NONE = common_pb2.NONE
NOT_COORDINATOR = common_pb2.NOT_COORDINATOR
LOAD_IN_PROGRESS = common_pb2.COORDINATOR_LOAD_IN_PROGRESS
#: Answers that mean "ask again shortly" (the partition is being loaded).
_RETRY = {common_pb2.COORDINATOR_LOAD_IN_PROGRESS, common_pb2.COORDINATOR_NOT_AVAILABLE}
_RETRY_S = 30.0


@pytest.fixture(scope="module")
def coordinated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster with two coordinators, a 3 s lease and 8 offsets partitions (RF 5 asked)."""
    yield from start_local_cluster(
        tmp_path_factory.mktemp("coordinated"),
        coordinators=2,
        coordinator_flags=COORDINATOR_FLAGS,
    )


def stub(address: str) -> tuple[grpc.Channel, GroupCoordinatorStub]:
    channel = grpc.insecure_channel(address)
    return channel, GroupCoordinatorStub(channel)


def find(address: str, group: str) -> coordinator_pb2.FindCoordinatorResponse:
    channel, coordinator = stub(address)
    with channel:
        return coordinator.FindCoordinator(
            coordinator_pb2.FindCoordinatorRequest(group_id=group), timeout=10
        )


def find_coordinator(address: str, group: str, timeout_s: float = 30.0) -> tuple[int, str]:
    """(coordinator id, host:port) once ``address`` names the group's coordinator."""

    def found() -> tuple[int, str] | None:
        try:
            response = find(address, group)
        except grpc.RpcError:
            return None
        if response.error_code != NONE:
            return None
        node = response.coordinator
        return node.node_id, f"{node.host}:{node.port}"

    return wait_until(found, timeout_s, f"FindCoordinator({group}) at {address}")


def commit(
    address: str, group: str, offsets: dict[tuple[str, int], int], *, retry: bool = True
) -> dict[int, int]:
    """Commit as a group without members (generation -1); {partition: error code}. Asks
    again while the group's partition is loading (unless not ``retry``)."""
    request = coordinator_pb2.OffsetCommitRequest(group_id=group, generation_id=-1)
    for (topic, partition), offset in offsets.items():
        request.partitions.add(topic=topic, partition=partition, committed_offset=offset)
    deadline = time.monotonic() + _RETRY_S
    channel, coordinator = stub(address)
    with channel:
        while True:
            response = coordinator.OffsetCommit(request, timeout=20)
            codes = {r.partition: r.error_code for r in response.partitions}
            if not (retry and set(codes.values()) & _RETRY) or time.monotonic() > deadline:
                return codes
            time.sleep(0.1)


def fetch(
    address: str, group: str, topic: str, partitions: list[int]
) -> tuple[int, dict[int, int]]:
    """(group error code, {partition: committed offset or -1}); asks again while loading."""
    request = coordinator_pb2.OffsetFetchRequest(group_id=group)
    for partition in partitions:
        request.partitions.add(topic=topic, partition=partition)
    deadline = time.monotonic() + _RETRY_S
    channel, coordinator = stub(address)
    with channel:
        while True:
            response = coordinator.OffsetFetch(request, timeout=20)
            if response.error_code not in _RETRY or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    offsets = {p.partition: p.committed_offset for p in response.partitions}
    return response.error_code, offsets


def etcd(cluster: LocalCluster) -> etcd3.Etcd3Client:
    return etcd3.client(cluster.spec.host, cluster.spec.etcd_client_port)


def owners(cluster: LocalCluster) -> dict[int, int]:
    """{offsets partition: owning coordinator id} from the ownership keys."""
    client = etcd(cluster)
    try:
        found = {}
        for value, meta in client.get_prefix("/strom/coordinators/owners/"):
            partition = int(meta.key.decode().rsplit("/", 1)[1])
            found[partition] = int(json.loads(value)["coordinator_id"])
        return found
    finally:
        client.close()


def live_coordinators(cluster: LocalCluster) -> set[int]:
    client = etcd(cluster)
    try:
        return {int(json.loads(v)["id"]) for v, _ in client.get_prefix("/strom/coordinators/ids/")}
    finally:
        client.close()
