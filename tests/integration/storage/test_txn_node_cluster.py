"""Transactions on real storage nodes (issue 20, node layer): etcd, two controllers, three
storage nodes and a gateway as real processes, all over real gRPC.

A transaction's first write to a partition is verified by its leader with the transaction
coordinator it finds through etcd. The coordinators here are two tiny TransactionCoordinator
servicers in this process (FindCoordinator and AddPartitionsToTxn with verify_only answered
from an in-memory table, registered in etcd as coordinators are): a real gRPC hop, and one the
test can move (NOT_COORDINATOR) or remove. The test itself plays the coordinator's other part,
sending WriteTxnMarkers to the leaders, and checks read_committed Fetch and ListOffsets, the
markers' replication to the followers, and a leader failover that keeps the last stable offset
and the aborted transactions."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import etcd3
import grpc
import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from strom_testkit import free_port, wait_until

from strom import NewTopic
from strom.protocol.v1 import (
    common_pb2,
    coordinator_pb2,
    coordinator_pb2_grpc,
    gateway_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
    transaction_pb2,
    transaction_pb2_grpc,
)
from strom.records import BatchBuilder, BatchHeader, encode_batch, walk_batches
from strom_server.etcd.keys import ClusterKeys, encode_value

pytestmark = pytest.mark.integration

SESSION_MS = 4000
TID = "orders-writer"
PID = 4242
TOPIC = "txn-node"


@dataclass
class TxnTable:
    """What the tiny coordinators know: each (transactional id, producer id, epoch)'s ongoing
    partitions, and which coordinator owns every transactional id."""

    owner: int = 1
    ongoing: dict[tuple[str, int, int], set[tuple[str, int]]] = field(default_factory=dict)
    #: (coordinator id, transactional id, producer id, epoch, partitions) of each verify call
    calls: list[tuple[int, str, int, int, tuple[tuple[str, int], ...]]] = field(
        default_factory=list
    )
    addresses: dict[int, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class TinyCoordinator(
    coordinator_pb2_grpc.GroupCoordinatorServicer,
    transaction_pb2_grpc.TransactionCoordinatorServicer,
):
    """FindCoordinator (key_type TRANSACTION) and AddPartitionsToTxn(verify_only) from a table."""

    def __init__(self, coordinator_id: int, table: TxnTable) -> None:
        self.coordinator_id = coordinator_id
        self.table = table

    def FindCoordinator(self, request: Any, context: Any) -> Any:
        assert request.key_type == coordinator_pb2.TRANSACTION
        owner = self.table.owner
        if owner not in self.table.addresses:
            return coordinator_pb2.FindCoordinatorResponse(
                error_code=common_pb2.COORDINATOR_NOT_AVAILABLE, error_message="no owner"
            )
        host, _, port = self.table.addresses[owner].rpartition(":")
        return coordinator_pb2.FindCoordinatorResponse(
            coordinator=common_pb2.Node(node_id=owner, host=host, port=int(port))
        )

    def AddPartitionsToTxn(self, request: Any, context: Any) -> Any:
        keys = tuple((p.topic, p.partition) for p in request.partitions)
        with self.table.lock:
            self.table.calls.append(
                (self.coordinator_id, request.transactional_id, request.producer_id,
                 request.producer_epoch, keys)
            )  # fmt: skip
            owner = self.table.owner
            held = self.table.ongoing.get(
                (request.transactional_id, request.producer_id, request.producer_epoch), set()
            )
        response = transaction_pb2.AddPartitionsToTxnResponse()
        if not request.verify_only:
            response.error_code = common_pb2.INVALID_REQUEST
        elif owner != self.coordinator_id:
            response.error_code = common_pb2.NOT_COORDINATOR
        for topic, partition in keys:
            code = response.error_code
            if code == common_pb2.NONE and (topic, partition) not in held:
                code = common_pb2.INVALID_TXN_STATE
            response.results.add(topic=topic, partition=partition, error_code=code)
        return response


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("txn-node"),
        coordinators=0,
        storage_flags=("--broker.session.timeout.ms", str(SESSION_MS)),
    )


@pytest.fixture(scope="module")
def table(cluster: LocalCluster) -> Iterator[TxnTable]:
    """Two tiny coordinators, registered in etcd (ids 1 and 2) for the module's cluster."""
    table = TxnTable()
    keys = ClusterKeys()
    client = etcd3.client(cluster.spec.host, cluster.spec.etcd_client_port)
    servers = []
    try:
        for coordinator_id in (1, 2):
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            servicer = TinyCoordinator(coordinator_id, table)
            coordinator_pb2_grpc.add_GroupCoordinatorServicer_to_server(servicer, server)
            transaction_pb2_grpc.add_TransactionCoordinatorServicer_to_server(servicer, server)
            port = free_port()
            server.add_insecure_port(f"127.0.0.1:{port}")
            server.start()
            servers.append(server)
            table.addresses[coordinator_id] = f"127.0.0.1:{port}"
            client.put(
                keys.coordinator(coordinator_id),
                encode_value({"id": coordinator_id, "host": "127.0.0.1", "port": port}),
            )
        yield table
    finally:
        for coordinator_id in (1, 2):
            client.delete(keys.coordinator(coordinator_id))
        for server in servers:
            server.stop(0)
        client.close()


# -- helpers ----------------------------------------------------------------------------------


def make_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    with cluster.admin() as admin:
        admin.create_topics(
            [NewTopic(name, partitions, 3, topic_configs={"min.insync.replicas": "2"})]
        )
    wait_until(
        lambda: all(p.leader >= 0 and len(p.isr) == 3 for p in cluster.describe(name).partitions),
        30,
        f"{name}: leaders and full ISRs",
    )
    for p in range(partitions):
        cluster.wait_hosted(name, p)


def leader_of(cluster: LocalCluster, topic: str, partition: int) -> int:
    return cluster.describe(topic).partitions[partition].leader


def call(cluster: LocalCluster, node_id: int, method: str, request: Any) -> Any:
    """One StorageNode RPC on node ``node_id``."""
    with grpc.insecure_channel(cluster.storage_address(node_id)) as channel:
        return getattr(storage_pb2_grpc.StorageNodeStub(channel), method)(request, timeout=30)


def txn_batch(values: list[str], *, seq: int, epoch: int) -> bytes:
    builder = BatchBuilder(
        producer_id=PID, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    for value in values:
        builder.append(int(time.time() * 1000), None, value.encode())
    return builder.build()


def produce(
    cluster: LocalCluster, partition: int, records: bytes, transactional_id: str = TID,
    topic: str = TOPIC,
) -> storage_pb2.ProducePartitionResult:  # fmt: skip
    request = storage_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        transactional_id=transactional_id,
        partitions=[
            storage_pb2.ProducePartitionData(topic=topic, partition=partition, records=records)
        ],
    )
    (result,) = call(cluster, leader_of(cluster, topic, partition), "Produce", request).partitions
    return result


def write_markers(
    cluster: LocalCluster, partitions: list[int], *, epoch: int, committed: bool,
    coordinator_epoch: int = 0, topic: str = TOPIC,
) -> dict[int, int]:  # fmt: skip
    """WriteTxnMarkers to each partition's leader: error code per partition."""
    by_leader: dict[int, list[int]] = {}
    for p in partitions:
        by_leader.setdefault(leader_of(cluster, topic, p), []).append(p)
    codes = {}
    for leader, owned in by_leader.items():
        request = transaction_pb2.WriteTxnMarkersRequest(
            timeout_ms=10000,
            markers=[
                transaction_pb2.WriteTxnMarker(
                    producer_id=PID,
                    producer_epoch=epoch,
                    committed=committed,
                    coordinator_epoch=coordinator_epoch,
                    transactional_id=TID,
                    partitions=[common_pb2.TopicPartition(topic=topic, partition=p) for p in owned],
                )
            ],
        )
        (marker,) = call(cluster, leader, "WriteTxnMarkers", request).markers
        assert marker.producer_id == PID
        codes.update({r.partition: r.error_code for r in marker.partitions})
    return codes


def fetch(
    cluster: LocalCluster, partition: int, *, read_committed: bool, node_id: int | None = None,
    replica_id: int = -1,
) -> storage_pb2.FetchPartitionResult:  # fmt: skip
    node = leader_of(cluster, TOPIC, partition) if node_id is None else node_id
    isolation = common_pb2.READ_COMMITTED if read_committed else common_pb2.READ_UNCOMMITTED
    request = storage_pb2.FetchRequest(
        replica_id=replica_id,
        max_bytes=8 << 20,
        isolation_level=isolation,
        partitions=[
            storage_pb2.FetchPartition(
                topic=TOPIC, partition=partition, fetch_offset=0, partition_max_bytes=8 << 20
            )
        ],
    )
    (result,) = call(cluster, node, "Fetch", request).partitions
    return result


def replica_batches(cluster: LocalCluster, node_id: int, partition: int) -> list[tuple[int, bool]]:
    """(base offset, is control) of the batches node ``node_id``'s replica holds below its high
    watermark ([] while it cannot answer)."""
    try:
        result = fetch(cluster, partition, read_committed=False, node_id=node_id, replica_id=-2)
    except grpc.RpcError:
        return []
    return [(h.base_offset, h.is_control) for h in headers(result.records)]


def headers(records: bytes) -> list[BatchHeader]:
    return [header for _, header in walk_batches(records)]


def latest(cluster: LocalCluster, partition: int, *, read_committed: bool) -> int:
    isolation = common_pb2.READ_COMMITTED if read_committed else common_pb2.READ_UNCOMMITTED
    request = storage_pb2.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        partitions=[
            storage_pb2.ListOffsetsPartition(
                topic=TOPIC, partition=partition, spec=common_pb2.LATEST
            )
        ],
    )
    leader = leader_of(cluster, TOPIC, partition)
    (result,) = call(cluster, leader, "ListOffsets", request).partitions
    assert result.error_code == common_pb2.NONE, result.error_message
    return result.offset


def describe_producers(cluster: LocalCluster, node_id: int) -> Any:
    request = transaction_pb2.DescribeProducersRequest(
        partitions=[common_pb2.TopicPartition(topic=TOPIC, partition=0)]
    )
    (result,) = call(cluster, node_id, "DescribeProducers", request).partitions
    return result


def aborted(result: storage_pb2.FetchPartitionResult) -> list[tuple[int, int]]:
    return [(a.producer_id, a.first_offset) for a in result.aborted_transactions]


# -- tests ------------------------------------------------------------------------------------


def test_verification_markers_read_committed_replication_and_failover(
    cluster: LocalCluster, table: TxnTable
) -> None:
    make_topic(cluster, TOPIC, 2)
    for p in (0, 1):
        plain = encode_batch([(int(time.time() * 1000), None, b"plain")])
        assert produce(cluster, p, plain, transactional_id="").error_code == common_pb2.NONE

    # Transaction 1 (epoch 0) holds partition 0 only: partition 1 is refused, nothing written.
    table.ongoing[(TID, PID, 0)] = {(TOPIC, 0)}
    first = produce(cluster, 0, txn_batch(["a1", "a2"], seq=0, epoch=0))
    assert (first.error_code, first.base_offset) == (common_pb2.NONE, 1), first.error_message
    refused = produce(cluster, 1, txn_batch(["b1"], seq=0, epoch=0))
    assert refused.error_code == common_pb2.INVALID_TXN_STATE, refused.error_message
    no_id = produce(cluster, 1, txn_batch(["b1"], seq=0, epoch=0), transactional_id="")
    assert no_id.error_code == common_pb2.INVALID_TXN_STATE
    assert [c[1:] for c in table.calls] == [
        (TID, PID, 0, ((TOPIC, 0),)),
        (TID, PID, 0, ((TOPIC, 1),)),
    ]
    # The next write of the open transaction is not verified again.
    assert produce(cluster, 0, txn_batch(["a3"], seq=2, epoch=0)).error_code == common_pb2.NONE
    assert len(table.calls) == 2

    # Open: read_committed stops at the transaction's first offset; read_uncommitted does not.
    committed = fetch(cluster, 0, read_committed=True)
    assert (committed.last_stable_offset, committed.high_watermark) == (1, 4)
    assert [h.base_offset for h in headers(committed.records)] == [0]
    uncommitted = fetch(cluster, 0, read_committed=False)
    assert uncommitted.last_stable_offset == 1
    assert [h.base_offset for h in headers(uncommitted.records)] == [0, 1, 3]
    assert latest(cluster, 0, read_committed=True) == 1
    assert latest(cluster, 0, read_committed=False) == 4

    leader = leader_of(cluster, TOPIC, 0)
    described = describe_producers(cluster, leader)
    assert described.error_code == common_pb2.NONE
    (producer,) = described.active_producers
    assert (producer.producer_id, producer.current_txn_start_offset) == (PID, 1)
    follower = next(n for n in (1, 2, 3) if n != leader)
    assert describe_producers(cluster, follower).error_code == common_pb2.NOT_LEADER_OR_FOLLOWER

    # Abort it: the marker is written on partition 0, and ends epoch 0 on partition 1 too.
    assert write_markers(cluster, [0, 1], epoch=0, committed=False) == {0: 0, 1: 0}
    after = fetch(cluster, 0, read_committed=True)
    assert after.last_stable_offset == after.high_watermark == 5
    assert aborted(after) == [(PID, 1)]
    batches = headers(after.records)
    assert [h.base_offset for h in batches] == [0, 1, 3, 4]
    assert batches[-1].is_control and batches[-1].is_transactional
    assert aborted(fetch(cluster, 0, read_committed=False)) == []
    # A duplicate marker writes nothing.
    assert write_markers(cluster, [0], epoch=0, committed=False) == {0: 0}
    assert fetch(cluster, 0, read_committed=False).high_watermark == 5

    # Every replica holds the marker at the same offset.
    for node in (1, 2, 3):
        wait_until(
            lambda n=node: replica_batches(cluster, n, 0) == [(0, False), (1, False), (3, False),
                                                              (4, True)],
            20, f"node {node}: the abort marker replicated and committed",
        )  # fmt: skip

    # Transaction 2 (epoch 1) stays open on partition 0 while its leader dies.
    table.ongoing[(TID, PID, 1)] = {(TOPIC, 0)}
    second = produce(cluster, 0, txn_batch(["c1"], seq=0, epoch=1))
    assert (second.error_code, second.base_offset) == (common_pb2.NONE, 5), second.error_message
    old_leader = leader_of(cluster, TOPIC, 0)
    cluster.kill(f"storage-{old_leader}")
    try:
        wait_until(lambda: leader_of(cluster, TOPIC, 0) not in (-1, old_leader), 30, "a new leader")
        new_leader = leader_of(cluster, TOPIC, 0)

        def settled() -> bool:
            try:
                result = fetch(cluster, 0, read_committed=True)
            except grpc.RpcError:
                return False
            return result.error_code == common_pb2.NONE and result.high_watermark == 6

        wait_until(settled, 30, "the new leader's high watermark")
        kept = fetch(cluster, 0, read_committed=True)
        assert kept.last_stable_offset == 5  # the open transaction still holds it
        assert aborted(kept) == [(PID, 1)]
        assert latest(cluster, 0, read_committed=True) == 5
        (open_one,) = describe_producers(cluster, new_leader).active_producers
        assert (open_one.producer_epoch, open_one.current_txn_start_offset) == (1, 5)
        # The new leader ends transaction 2 (the coordinator moved: its epoch is 1 now).
        assert write_markers(cluster, [0], epoch=1, committed=True, coordinator_epoch=1) == {0: 0}
        done = fetch(cluster, 0, read_committed=True)
        assert done.last_stable_offset == done.high_watermark == 7
        assert aborted(done) == [(PID, 1)]
        assert [h.base_offset for h in headers(done.records)] == [0, 1, 3, 4, 5, 6]
        # A marker from the coordinator's previous epoch is fenced now.
        stale = write_markers(cluster, [0], epoch=2, committed=False, coordinator_epoch=0)
        assert stale == {0: common_pb2.TRANSACTION_COORDINATOR_FENCED}
    finally:
        cluster.restart(f"storage-{old_leader}")
    wait_until(
        lambda: replica_batches(cluster, old_leader, 0)[-2:] == [(5, False), (6, True)],
        30, "the restarted replica to hold the commit marker",
    )  # fmt: skip


def test_verification_follows_the_coordinator_and_reports_it_unavailable(
    cluster: LocalCluster, table: TxnTable
) -> None:
    topic = "txn-node-moves"
    make_topic(cluster, topic, 1)
    # Coordinator 1 owns the id: the leader finds it and keeps it.
    table.owner = 1
    table.ongoing[(TID, PID, 6)] = {(topic, 0)}
    calls = len(table.calls)
    result = produce(cluster, 0, txn_batch(["d1"], seq=0, epoch=6), topic=topic)
    assert result.error_code == common_pb2.NONE, result.error_message
    assert [c[0] for c in table.calls[calls:]] == [1]
    assert write_markers(cluster, [0], epoch=6, committed=True, topic=topic) == {0: 0}
    # The id moves to coordinator 2: coordinator 1 answers NOT_COORDINATOR, the leader finds
    # coordinator 2 and asks it.
    table.owner = 2
    table.ongoing[(TID, PID, 7)] = {(topic, 0)}
    calls = len(table.calls)
    result = produce(cluster, 0, txn_batch(["d2"], seq=0, epoch=7), topic=topic)
    assert result.error_code == common_pb2.NONE, result.error_message
    assert [c[0] for c in table.calls[calls:]] == [1, 2]
    assert write_markers(cluster, [0], epoch=7, committed=True, topic=topic) == {0: 0}

    # With no coordinator owning the id, then none registered at all, a first write is refused
    # with a retriable error.
    client = etcd3.client(cluster.spec.host, cluster.spec.etcd_client_port)
    keys = ClusterKeys()
    table.ongoing[(TID, PID, 8)] = {(topic, 0)}
    batch = txn_batch(["e1"], seq=0, epoch=8)
    try:
        table.owner = 0  # nobody: NOT_COORDINATOR, and FindCoordinator has no answer
        for coordinator_id in (1, 2):
            client.delete(keys.coordinator(coordinator_id))
        wait_until(
            lambda: produce(cluster, 0, batch, topic=topic).error_code
            == common_pb2.COORDINATOR_NOT_AVAILABLE,
            20, "COORDINATOR_NOT_AVAILABLE while no coordinator is registered",
        )  # fmt: skip
    finally:
        table.owner = 1
        for coordinator_id in (1, 2):
            host, _, port = table.addresses[coordinator_id].rpartition(":")
            client.put(
                keys.coordinator(coordinator_id),
                encode_value({"id": coordinator_id, "host": host, "port": int(port)}),
            )
        client.close()
    wait_until(
        lambda: produce(cluster, 0, batch, topic=topic).error_code == common_pb2.NONE,
        20, "the write accepted once the coordinators are back",
    )  # fmt: skip


def test_malformed_write_txn_markers_fail_whole(cluster: LocalCluster) -> None:
    somewhere = [common_pb2.TopicPartition(topic="x")]
    bad = [
        transaction_pb2.WriteTxnMarker(producer_id=-1, producer_epoch=0, partitions=somewhere),
        transaction_pb2.WriteTxnMarker(producer_id=1, producer_epoch=40000, partitions=somewhere),
        transaction_pb2.WriteTxnMarker(
            producer_id=1, producer_epoch=0, coordinator_epoch=-3, partitions=somewhere
        ),
        transaction_pb2.WriteTxnMarker(producer_id=1, producer_epoch=0),
    ]
    for marker in bad:
        with pytest.raises(grpc.RpcError) as caught:
            call(
                cluster,
                1,
                "WriteTxnMarkers",
                transaction_pb2.WriteTxnMarkersRequest(markers=[marker]),
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, marker
    with pytest.raises(grpc.RpcError) as caught:
        call(cluster, 1, "WriteTxnMarkers", transaction_pb2.WriteTxnMarkersRequest(timeout_ms=-1))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # A well-formed marker for a partition this node does not host answers per partition.
    request = transaction_pb2.WriteTxnMarkersRequest(
        markers=[
            transaction_pb2.WriteTxnMarker(
                producer_id=1, producer_epoch=0,
                partitions=[common_pb2.TopicPartition(topic="no-such-topic", partition=0)],
            )
        ]
    )  # fmt: skip
    (marker,) = call(cluster, 1, "WriteTxnMarkers", request).markers
    assert [r.error_code for r in marker.partitions] == [common_pb2.UNKNOWN_TOPIC_OR_PARTITION]


def test_the_gateway_forwards_the_transactional_id_to_every_leader(
    cluster: LocalCluster, table: TxnTable
) -> None:
    topic = "txn-node-gateway"
    make_topic(cluster, topic, 3)
    leaders = {leader_of(cluster, topic, p) for p in range(3)}
    assert len(leaders) > 1  # the request is split between leaders
    table.owner = 1
    stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.gateway))
    for epoch, send in ((20, "Produce"), (21, "ProduceStream")):
        table.ongoing[(TID, PID, epoch)] = {(topic, p) for p in range(3)}
        request = storage_pb2.ProduceRequest(
            acks=-1,
            timeout_ms=10000,
            transactional_id=TID,
            partitions=[
                storage_pb2.ProducePartitionData(
                    topic=topic, partition=p, records=txn_batch([f"g{p}"], seq=0, epoch=epoch)
                )
                for p in range(3)
            ],
        )
        if send == "Produce":
            response = stub.Produce(request, timeout=30)
        else:
            (response,) = list(stub.ProduceStream(iter([request]), timeout=30))
        assert [(r.partition, r.error_code) for r in response.partitions] == [
            (p, common_pb2.NONE) for p in range(3)
        ], f"{send}: {response}"
        assert write_markers(cluster, [0, 1, 2], epoch=epoch, committed=True, topic=topic) == {
            0: 0, 1: 0, 2: 0
        }  # fmt: skip
