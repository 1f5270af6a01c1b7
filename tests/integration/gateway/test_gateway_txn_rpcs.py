"""The gateway's transaction RPCs on real processes: InitProducerId to the controller or the
transactional id's coordinator, AddPartitionsToTxn/EndTxn/DescribeTransactions to that
coordinator, ListTransactions from every coordinator, DescribeProducers from each partition's
leader, and a transactional Produce between them."""

from __future__ import annotations

import time

import pytest
from cluster_testkit import LocalCluster
from strom_testkit import wait_until
from txn_rpc_testkit import init_producer, settled

from strom import NewTopic
from strom.protocol.v1 import common_pb2, gateway_pb2_grpc, storage_pb2
from strom.protocol.v1 import transaction_pb2 as txn
from strom.records import BatchBuilder

pytestmark = pytest.mark.timeout(180)

E = common_pb2
TOPIC = "gw-txn"
TID = "gw-txn-app"


def producers(gateway: gateway_pb2_grpc.GatewayStub, *partitions: int) -> dict[int, object]:
    """{partition: error name, or {producer id: current_txn_start_offset}} from the leaders."""
    request = txn.DescribeProducersRequest(
        partitions=[E.TopicPartition(topic=TOPIC, partition=p) for p in partitions]
    )
    answer = gateway.DescribeProducers(request, timeout=30)
    return {
        r.partition: (
            E.ErrorCode.Name(r.error_code)
            if r.error_code
            else {p.producer_id: p.current_txn_start_offset for p in r.active_producers}
        )
        for r in answer.partitions
    }


def test_transaction_rpcs_reach_the_right_services(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub
) -> None:
    cluster.admin().create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=3)])
    # No transactional id: a fresh id from the controller, each time.
    first, second = init_producer(gateway, ""), init_producer(gateway, "")
    assert first.error_code == second.error_code == E.NONE
    assert first.producer_id != second.producer_id and first.producer_epoch == 0
    # A transactional id: its coordinator keeps the id and bumps the epoch.
    started = init_producer(gateway, TID)
    assert started.error_code == E.NONE, started
    again = init_producer(gateway, TID)
    assert (again.producer_id, again.producer_epoch) == (
        started.producer_id,
        started.producer_epoch + 1,
    )
    pid, epoch = again.producer_id, again.producer_epoch

    add = txn.AddPartitionsToTxnRequest(
        transactional_id=TID,
        producer_id=pid,
        producer_epoch=epoch,
        partitions=[E.TopicPartition(topic=TOPIC, partition=p) for p in (0, 1)],
    )
    added = settled(
        lambda: gateway.AddPartitionsToTxn(add, timeout=30),
        lambda a: {a.error_code} | {r.error_code for r in a.results},
    )
    assert added.error_code == E.NONE and [r.error_code for r in added.results] == [0, 0]

    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True
    )
    builder.append(int(time.time() * 1000), None, b"in a transaction")
    produce = storage_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        transactional_id=TID,
        partitions=[
            storage_pb2.ProducePartitionData(topic=TOPIC, partition=0, records=builder.build())
        ],
    )
    produced = settled(
        lambda: gateway.Produce(produce, timeout=30), lambda a: {p.error_code for p in a.partitions}
    )
    assert [p.error_code for p in produced.partitions] == [E.NONE], produced
    offset = produced.partitions[0].base_offset

    # DescribeProducers from each partition's leader: the open transaction on partition 0.
    found = producers(gateway, 0, 1, 9)
    assert found[0] == {pid: offset}
    assert found[1] == {}
    assert found[9] == "UNKNOWN_TOPIC_OR_PARTITION"

    described = gateway.DescribeTransactions(
        txn.DescribeTransactionsRequest(transactional_ids=[TID]), timeout=30
    )
    (state,) = described.transactions
    assert (state.error_code, state.transactional_id, state.state) == (E.NONE, TID, "Ongoing")
    assert sorted((p.topic, p.partition) for p in state.partitions) == [(TOPIC, 0), (TOPIC, 1)]
    assert state.coordinator_id == 1
    listed = gateway.ListTransactions(txn.ListTransactionsRequest(), timeout=30)
    assert listed.error_code == E.NONE and not listed.unreachable_coordinators
    assert (TID, pid, "Ongoing") in [
        (t.transactional_id, t.producer_id, t.state) for t in listed.transactions
    ]

    end = txn.EndTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=epoch)
    ended = settled(lambda: gateway.EndTxn(end, timeout=30), lambda a: {a.error_code})
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (E.NONE, pid, epoch + 1)
    # Once the abort marker is written, partition 0 has no open transaction any more.
    wait_until(lambda: producers(gateway, 0)[0] == {pid: -1}, 30, "the abort marker")
