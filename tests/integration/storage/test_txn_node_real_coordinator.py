"""The storage node with the real transaction coordinator (issue 20, node layer): etcd, two
controllers, three storage nodes, the gateway and a coordinator as real processes.

The transaction's control calls go through the gateway (InitProducerId, AddPartitionsToTxn,
EndTxn), its data straight to the partition leaders, which verify the first write to each
partition with the coordinator they find through etcd; the coordinator then writes the markers
to the leaders, and read_committed fetches see the outcome."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from strom_testkit import wait_until

from strom import NewTopic
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    gateway_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
    transaction_pb2,
)
from strom.records import BatchBuilder, walk_batches

pytestmark = pytest.mark.integration

TOPIC = "txn-node-real"
TID = "node-real-writer"
#: Answers after which a control call is sent again.
RETRY = {
    common_pb2.COORDINATOR_NOT_AVAILABLE,
    common_pb2.NOT_COORDINATOR,
    common_pb2.COORDINATOR_LOAD_IN_PROGRESS,
    common_pb2.CONCURRENT_TRANSACTIONS,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("txn-node-real"),
        coordinators=1,
        coordinator_flags=(
            "--offsets.topic.num.partitions", "1",
            "--transaction.state.log.num.partitions", "1",
        ),
    )  # fmt: skip


def retried(send: Callable[[], Any], what: str) -> Any:
    """``send()`` again while it answers a retriable coordinator error (or fails with gRPC
    UNAVAILABLE); the last answer."""
    deadline = time.monotonic() + 60
    while True:
        try:
            response = send()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
        else:
            codes = {response.error_code, *(r.error_code for r in getattr(response, "results", ()))}
            if not codes & RETRY or time.monotonic() > deadline:
                assert response.error_code == common_pb2.NONE, f"{what}: {response}"
                return response
        time.sleep(0.2)


def gateway(cluster: LocalCluster) -> gateway_pb2_grpc.GatewayStub:
    return gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.gateway))


def leader_of(cluster: LocalCluster, partition: int) -> int:
    return cluster.describe(TOPIC).partitions[partition].leader


def call(cluster: LocalCluster, node_id: int, method: str, request: Any) -> Any:
    with grpc.insecure_channel(cluster.storage_address(node_id)) as channel:
        return getattr(storage_pb2_grpc.StorageNodeStub(channel), method)(request, timeout=30)


def produce(
    cluster: LocalCluster, partition: int, pid: int, epoch: int, values: list[str], *, seq: int = 0
) -> storage_pb2.ProducePartitionResult:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    for value in values:
        builder.append(int(time.time() * 1000), None, value.encode())
    request = storage_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        transactional_id=TID,
        partitions=[
            storage_pb2.ProducePartitionData(
                topic=TOPIC, partition=partition, records=builder.build()
            )
        ],
    )
    (result,) = call(cluster, leader_of(cluster, partition), "Produce", request).partitions
    return result


def read_committed(cluster: LocalCluster, partition: int) -> storage_pb2.FetchPartitionResult:
    request = storage_pb2.FetchRequest(
        replica_id=-1,
        max_bytes=1 << 20,
        isolation_level=common_pb2.READ_COMMITTED,
        partitions=[
            storage_pb2.FetchPartition(
                topic=TOPIC, partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
            )
        ],
    )
    (result,) = call(cluster, leader_of(cluster, partition), "Fetch", request).partitions
    assert result.error_code == common_pb2.NONE, result.error_message
    return result


def stable(cluster: LocalCluster, partition: int) -> storage_pb2.FetchPartitionResult:
    """The read_committed view once the coordinator's marker made the partition stable."""
    return wait_until(
        lambda: (
            (r := read_committed(cluster, partition)).last_stable_offset == r.high_watermark and r
        ),
        30,
        f"partition {partition}: the coordinator's marker",
    )


def test_verification_and_markers_with_the_transaction_coordinator(cluster: LocalCluster) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 3, topic_configs={"min.insync.replicas": "2"})])
    wait_until(
        lambda: all(p.leader >= 0 and len(p.isr) == 3 for p in cluster.describe(TOPIC).partitions),
        30,
        "leaders and full ISRs",
    )
    for p in (0, 1):
        cluster.wait_hosted(TOPIC, p)
    stub = gateway(cluster)
    init = retried(
        lambda: stub.InitProducerId(
            controller_pb2.InitProducerIdRequest(
                transactional_id=TID, transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1,
            ),
            timeout=30,
        ),
        "InitProducerId",
    )  # fmt: skip
    pid, epoch = init.producer_id, init.producer_epoch

    def add(partition: int, at_epoch: int) -> None:
        retried(
            lambda: stub.AddPartitionsToTxn(
                transaction_pb2.AddPartitionsToTxnRequest(
                    transactional_id=TID, producer_id=pid, producer_epoch=at_epoch,
                    partitions=[common_pb2.TopicPartition(topic=TOPIC, partition=partition)],
                ),
                timeout=30,
            ),
            "AddPartitionsToTxn",
        )  # fmt: skip

    def end(committed: bool, at_epoch: int) -> int:
        response = retried(
            lambda: stub.EndTxn(
                transaction_pb2.EndTxnRequest(
                    transactional_id=TID, producer_id=pid, producer_epoch=at_epoch,
                    committed=committed,
                ),
                timeout=30,
            ),
            "EndTxn",
        )  # fmt: skip
        assert response.producer_id == pid
        return int(response.producer_epoch)

    # Transaction 1 holds partition 0 only: the leader of partition 1 refuses a write there.
    add(0, epoch)
    first = produce(cluster, 0, pid, epoch, ["a1", "a2"])
    assert (first.error_code, first.base_offset) == (common_pb2.NONE, 0), first.error_message
    refused = produce(cluster, 1, pid, epoch, ["b1"])
    assert refused.error_code == common_pb2.INVALID_TXN_STATE, refused.error_message
    open_view = read_committed(cluster, 0)
    assert (open_view.last_stable_offset, open_view.high_watermark) == (0, 2)
    assert open_view.records == b""

    next_epoch = end(True, epoch)
    assert next_epoch == epoch + 1
    committed = stable(cluster, 0)
    batches = [h for _, h in walk_batches(committed.records)]
    assert [(h.base_offset, h.is_control) for h in batches] == [(0, False), (2, True)]
    assert list(committed.aborted_transactions) == []
    # A zombie write of the ended epoch is refused (by the coordinator the leader asks: only it
    # knows whether the producer keeps its epoch across transactions).
    late = produce(cluster, 0, pid, epoch, ["zombie"], seq=2)
    assert late.error_code == common_pb2.PRODUCER_FENCED, late.error_message

    # Transaction 2 writes partition 1 and aborts.
    add(1, next_epoch)
    second = produce(cluster, 1, pid, next_epoch, ["c1"])
    assert (second.error_code, second.base_offset) == (common_pb2.NONE, 0), second.error_message
    end(False, next_epoch)
    aborted = stable(cluster, 1)
    assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(pid, 0)]
    (producer,) = (
        call(
            cluster,
            leader_of(cluster, 1),
            "DescribeProducers",
            transaction_pb2.DescribeProducersRequest(
                partitions=[common_pb2.TopicPartition(topic=TOPIC, partition=1)]
            ),
        )
        .partitions[0]
        .active_producers
    )
    assert (producer.producer_id, producer.current_txn_start_offset) == (pid, -1)
