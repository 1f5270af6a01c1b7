"""The transaction coordinator on real processes (etcd, controllers, three storage nodes, the
gateway, two coordinators), called on the coordinators' own ports: InitProducerId fences,
EndTxn writes markers after the data, a timed-out transaction is aborted by the coordinator,
and a coordinator killed after PrepareCommit is persisted (its markers held up by a dead
partition leader) is replaced by one that completes the commit.

The steps share one cluster (module scope); the failover test runs last."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc
import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from coordsvc_testkit import etcd
from strom_testkit import wait_until

from strom.cluster import channel_options
from strom.protocol.v1 import common_pb2, controller_pb2, storage_pb2, storage_pb2_grpc
from strom.protocol.v1 import coordinator_pb2 as cpb
from strom.protocol.v1 import transaction_pb2 as pb
from strom.protocol.v1.coordinator_pb2_grpc import GroupCoordinatorStub
from strom.protocol.v1.transaction_pb2_grpc import TransactionCoordinatorStub
from strom.records import BatchBuilder, decode_batches
from strom.records.control import ControlRecordType, decode_control_record
from strom.types import NewTopic
from strom_server.etcd.keys import ClusterKeys, decode_value

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

E = common_pb2
LEASE_S = 3
TXN_PARTITIONS = 6
FLAGS = (
    "--coordinator.session.timeout.ms", str(LEASE_S * 1000),
    "--offsets.topic.num.partitions", "4",
    "--transaction.state.log.num.partitions", str(TXN_PARTITIONS),
    # One replica each: stopping a data partition's leader never blocks the state writes of a
    # transactional id placed on another node.
    "--transaction.state.log.replication.factor", "1",
    "--transaction.abort.timed.out.transaction.cleanup.interval.ms", "200",
)  # fmt: skip
RETRY = {
    E.COORDINATOR_NOT_AVAILABLE,
    E.COORDINATOR_LOAD_IN_PROGRESS,
    E.NOT_COORDINATOR,
    E.CONCURRENT_TRANSACTIONS,
    E.UNKNOWN_TOPIC_OR_PARTITION,
    E.NOT_ENOUGH_REPLICAS,
    E.REQUEST_TIMED_OUT,
    E.NOT_LEADER_OR_FOLLOWER,
}
R = TypeVar("R")


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("txn"), coordinators=2, coordinator_flags=FLAGS
    )


def settled(call: Callable[[], R], code: Callable[[R], int], timeout_s: float = 60) -> R:
    """``call()`` again while it answers a retriable error (then the last answer)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer = call()
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        if code(answer) not in RETRY or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def tc(cluster: LocalCluster, tid: str) -> tuple[int, TransactionCoordinatorStub]:
    """(coordinator id, stub) of the transaction coordinator of ``tid``."""
    request = cpb.FindCoordinatorRequest(group_id=tid, key_type=cpb.TRANSACTION)

    def find() -> cpb.FindCoordinatorResponse | None:
        for coordinator in (1, 2):
            try:
                with grpc.insecure_channel(cluster.coordinator_address(coordinator)) as channel:
                    answer = GroupCoordinatorStub(channel).FindCoordinator(request, timeout=10)
            except grpc.RpcError:
                continue
            if answer.error_code == E.NONE:
                return answer
        return None

    node = wait_until(find, 60, f"the coordinator of {tid}").coordinator
    channel = grpc.insecure_channel(f"{node.host}:{node.port}")
    return node.node_id, TransactionCoordinatorStub(channel)


def init(stub: TransactionCoordinatorStub, tid: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    request = controller_pb2.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1
    )
    answer = settled(lambda: stub.InitProducerId(request, timeout=30), lambda a: a.error_code)
    assert answer.error_code == E.NONE, answer.error_message
    return answer.producer_id, answer.producer_epoch


def add(stub: TransactionCoordinatorStub, tid: str, pid: int, epoch: int, topic: str) -> int:
    request = pb.AddPartitionsToTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch,
        partitions=[E.TopicPartition(topic=topic, partition=0)],
    )  # fmt: skip
    answer = settled(lambda: stub.AddPartitionsToTxn(request, timeout=30), lambda a: a.error_code)
    return answer.error_code


def end(
    stub: TransactionCoordinatorStub, tid: str, pid: int, epoch: int, committed: bool
) -> pb.EndTxnResponse:
    request = pb.EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=committed
    )
    return settled(lambda: stub.EndTxn(request, timeout=30), lambda a: a.error_code)


def describe(stub: TransactionCoordinatorStub, tid: str) -> pb.DescribedTransaction:
    request = pb.DescribeTransactionsRequest(transactional_ids=[tid])
    answer = settled(
        lambda: stub.DescribeTransactions(request, timeout=30),
        lambda a: a.transactions[0].error_code,
    )
    return answer.transactions[0]


def create_topic(cluster: LocalCluster, name: str, replicas: list[int] | None = None) -> None:
    topic = (
        NewTopic(name, replica_assignment={0: replicas})
        if replicas
        else NewTopic(name, 1, 3, topic_configs={"min.insync.replicas": "2"})
    )
    with cluster.admin() as admin:
        admin.create_topics([topic])
    cluster.wait_hosted(name, 0)


def produce_txn(
    cluster: LocalCluster, topic: str, tid: str, producer: tuple[int, int], values: list[bytes]
) -> storage_pb2.ProducePartitionResult:
    pid, epoch = producer
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True
    )
    for value in values:
        builder.append(int(time.time() * 1000), None, value)
    request = storage_pb2.ProduceRequest(
        acks=-1, timeout_ms=10_000, transactional_id=tid,
        partitions=[storage_pb2.ProducePartitionData(
            topic=topic, partition=0, records=builder.build()
        )],
    )  # fmt: skip

    def call() -> storage_pb2.ProducePartitionResult:
        leader = cluster.describe(topic).partitions[0].leader
        with grpc.insecure_channel(cluster.storage_address(leader)) as channel:
            return (
                storage_pb2_grpc.StorageNodeStub(channel).Produce(request, timeout=30).partitions[0]
            )

    return settled(call, lambda r: r.error_code)


def batches(cluster: LocalCluster, topic: str) -> list[tuple[bool, int, int, list[object]]]:
    """(is control, producer id, producer epoch, records) of every batch below the HW."""
    leader = cluster.describe(topic).partitions[0].leader
    fetch = storage_pb2.FetchPartition(
        topic=topic, partition=0, fetch_offset=0, partition_max_bytes=8 << 20
    )
    request = storage_pb2.FetchRequest(replica_id=-1, max_bytes=8 << 20, partitions=[fetch])
    with grpc.insecure_channel(cluster.storage_address(leader), options=channel_options()) as ch:
        (result,) = storage_pb2_grpc.StorageNodeStub(ch).Fetch(request, timeout=30).partitions
    assert result.error_code == E.NONE, result.error_message
    found = []
    for batch in decode_batches(result.records):
        h = batch.header
        found.append((h.is_control, h.producer_id, h.producer_epoch, list(batch.records)))
    return found


def markers(cluster: LocalCluster, topic: str) -> list[tuple[int, int, int, int | None]]:
    """(offset index among batches, producer epoch, type, coordinator epoch) of each marker."""
    out = []
    for index, (control, _pid, epoch, records) in enumerate(batches(cluster, topic)):
        if control:
            record = records[0]
            decoded = decode_control_record(record.key, record.value)  # type: ignore[attr-defined]
            out.append((index, epoch, decoded.type, decoded.coordinator_epoch))
    return out


def owner_epoch(cluster: LocalCluster, partition: int) -> tuple[int, int]:
    """(coordinator id, epoch) of the owner of a __transaction_state partition."""
    value, _ = etcd(cluster).get(ClusterKeys("/strom").transaction_owner(partition))
    assert value is not None
    v = decode_value(value)
    return int(v["coordinator_id"]), int(v["epoch"])


def txn_partition(tid: str) -> int:
    from strom_coordinator.partitions.hosting import key_partition

    return key_partition(tid, TXN_PARTITIONS)


def test_init_producer_id_twice_fences_the_first(txn_cluster: LocalCluster) -> None:
    create_topic(txn_cluster, "fence-data")
    tid = "fence-app"
    _, stub = tc(txn_cluster, tid)
    with txn_cluster.admin() as admin:
        (topic,) = admin.describe_topics(["__transaction_state"])
        configs = admin.describe_configs("__transaction_state")
    assert len(topic.partitions) == TXN_PARTITIONS
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.insync.replicas"].value == "1"
    pid, epoch = init(stub, tid)
    assert epoch == 0
    assert add(stub, tid, pid, epoch, "fence-data") == E.NONE
    assert (
        produce_txn(txn_cluster, "fence-data", tid, (pid, epoch), [b"zombie"]).error_code == E.NONE
    )
    # The second incarnation aborts the open transaction and bumps the epoch twice.
    again, new_epoch = init(stub, tid)
    assert again == pid and new_epoch == epoch + 2
    assert add(stub, tid, pid, epoch, "fence-data") == E.PRODUCER_FENCED
    assert end(stub, tid, pid, epoch, True).error_code == E.PRODUCER_FENCED
    assert produce_txn(txn_cluster, "fence-data", tid, (pid, epoch), [b"late"]).error_code != E.NONE
    wait_until(lambda: [m[2] for m in markers(txn_cluster, "fence-data")] == [
        ControlRecordType.ABORT], 30, "the abort marker of the fenced transaction")  # fmt: skip
    request = controller_pb2.InitProducerIdRequest(
        transactional_id="__strom_mine", transaction_timeout_ms=1000, producer_id=-1,
        producer_epoch=-1,
    )  # fmt: skip
    assert stub.InitProducerId(request, timeout=10).error_code == E.INVALID_REQUEST
    request = controller_pb2.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=900_001, producer_id=-1, producer_epoch=-1
    )
    assert stub.InitProducerId(request, timeout=10).error_code == E.INVALID_TRANSACTION_TIMEOUT


def test_commit_writes_markers_after_the_data(txn_cluster: LocalCluster) -> None:
    create_topic(txn_cluster, "commit-data")
    tid = "commit-app"
    _, stub = tc(txn_cluster, tid)
    pid, epoch = init(stub, tid)
    assert add(stub, tid, pid, epoch, "commit-data") == E.NONE
    assert produce_txn(txn_cluster, "commit-data", tid, (pid, epoch), [b"a", b"b"]).error_code == 0
    answer = end(stub, tid, pid, epoch, True)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, pid, epoch + 1)
    # A retry gets the same answer.
    retry = end(stub, tid, pid, epoch, True)
    assert (retry.error_code, retry.producer_epoch) == (E.NONE, epoch + 1)
    assert end(stub, tid, pid, epoch, False).error_code == E.INVALID_TXN_STATE
    _, coordinator_epoch = owner_epoch(txn_cluster, txn_partition(tid))
    found = wait_until(lambda: markers(txn_cluster, "commit-data") or None, 30, "the marker")
    assert found == [(1, epoch, ControlRecordType.COMMIT, coordinator_epoch)]
    data = batches(txn_cluster, "commit-data")[0]
    assert (data[0], data[1], data[2]) == (False, pid, epoch)
    wait_until(lambda: describe(stub, tid).state == "CompleteCommit", 30, "CompleteCommit")
    described = describe(stub, tid)
    assert (described.producer_id, described.producer_epoch) == (pid, epoch + 1)


def test_a_timed_out_transaction_is_aborted_by_the_coordinator(txn_cluster: LocalCluster) -> None:
    create_topic(txn_cluster, "timeout-data")
    tid = "timeout-app"
    _, stub = tc(txn_cluster, tid)
    pid, epoch = init(stub, tid, timeout_ms=1000)
    assert add(stub, tid, pid, epoch, "timeout-data") == E.NONE
    assert produce_txn(txn_cluster, "timeout-data", tid, (pid, epoch), [b"slow"]).error_code == 0
    wait_until(lambda: describe(stub, tid).state == "CompleteAbort", 30, "the timeout abort")
    assert [m[1:3] for m in markers(txn_cluster, "timeout-data")] == [
        (epoch, ControlRecordType.ABORT)
    ]
    committed = end(stub, tid, pid, epoch, True)
    assert committed.error_code == E.TRANSACTION_ABORTABLE
    assert "timeout" in committed.error_message
    assert add(stub, tid, pid, epoch, "timeout-data") == E.TRANSACTION_ABORTABLE
    aborted = end(stub, tid, pid, epoch, False)
    assert (aborted.error_code, aborted.producer_epoch) == (E.NONE, epoch + 1)
    # The next transaction runs at the bumped epoch.
    assert add(stub, tid, pid, epoch + 1, "timeout-data") == E.NONE
    assert end(stub, tid, pid, epoch + 1, False).error_code == E.NONE


def group_stub(cluster: LocalCluster, group: str) -> GroupCoordinatorStub:
    request = cpb.FindCoordinatorRequest(group_id=group)

    def find() -> cpb.FindCoordinatorResponse | None:
        with grpc.insecure_channel(cluster.coordinator_address(1)) as channel:
            answer = GroupCoordinatorStub(channel).FindCoordinator(request, timeout=10)
        return answer if answer.error_code == E.NONE else None

    node = wait_until(find, 60, f"the coordinator of {group}").coordinator
    return GroupCoordinatorStub(grpc.insecure_channel(f"{node.host}:{node.port}"))


def test_offsets_added_to_a_transaction_are_committed_with_it(txn_cluster: LocalCluster) -> None:
    tid, group = "offsets-app", "offsets-group"
    groups = group_stub(txn_cluster, group)
    _, stub = tc(txn_cluster, tid)
    pid, epoch = init(stub, tid)
    request = pb.AddOffsetsToTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
    )
    answer = settled(lambda: stub.AddOffsetsToTxn(request, timeout=30), lambda a: a.error_code)
    assert answer.error_code == E.NONE, answer.error_message
    described = describe(stub, tid)
    assert list(described.group_ids) == [group]
    assert [tp.topic for tp in described.partitions] == ["__consumer_offsets"]
    commit = cpb.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
        generation_id=-1,
        partitions=[cpb.OffsetCommitPartition(topic="orders", partition=0, committed_offset=42)],
    )  # fmt: skip
    staged = settled(
        lambda: groups.TxnOffsetCommit(commit, timeout=30), lambda a: a.partitions[0].error_code
    )
    assert staged.partitions[0].error_code == E.NONE, staged.partitions[0].error_message
    fetch = cpb.OffsetFetchRequest(
        group_id=group, partitions=[E.TopicPartition(topic="orders", partition=0)],
        require_stable=True,
    )  # fmt: skip
    assert groups.OffsetFetch(fetch, timeout=30).partitions[0].error_code == (
        E.UNSTABLE_OFFSET_COMMIT
    )
    assert end(stub, tid, pid, epoch, True).error_code == E.NONE

    def committed() -> bool:
        (found,) = groups.OffsetFetch(fetch, timeout=30).partitions
        return found.error_code == E.NONE and found.committed_offset == 42

    wait_until(committed, 30, "the transaction's offset committed")
    wait_until(lambda: describe(stub, tid).state == "CompleteCommit", 30, "CompleteCommit")


def test_a_new_owner_completes_a_prepared_commit(txn_cluster: LocalCluster) -> None:
    with txn_cluster.admin() as admin:
        (state_topic,) = admin.describe_topics(["__transaction_state"])
    leaders = {p.partition: p.leader for p in state_topic.partitions}
    down = 3
    # A transactional id whose state lives on another node than the data partition.
    tid = next(f"failover-app-{i}" for i in range(1000)
               if leaders[txn_partition(f"failover-app-{i}")] != down)  # fmt: skip
    create_topic(txn_cluster, "failover-data", replicas=[down])
    owner, stub = tc(txn_cluster, tid)
    pid, epoch = init(stub, tid)
    assert add(stub, tid, pid, epoch, "failover-data") == E.NONE
    assert produce_txn(txn_cluster, "failover-data", tid, (pid, epoch), [b"x"]).error_code == 0
    _, old_coordinator_epoch = owner_epoch(txn_cluster, txn_partition(tid))

    txn_cluster.kill(f"storage-{down}")  # the markers cannot be written now
    answer = end(stub, tid, pid, epoch, True)
    assert (answer.error_code, answer.producer_epoch) == (E.NONE, epoch + 1)
    time.sleep(1)
    assert describe(stub, tid).state == "PrepareCommit"
    txn_cluster.kill(f"coordinator-{owner}")
    try:
        survivor = 3 - owner

        def moved() -> TransactionCoordinatorStub | None:
            found, new_stub = tc(txn_cluster, tid)
            return new_stub if found == survivor else None

        new_stub = wait_until(moved, 4 * LEASE_S + 30, "the survivor owning the id")
        wait_until(lambda: describe(new_stub, tid).state == "PrepareCommit", 30,
                   "the survivor loaded the prepared commit")  # fmt: skip
        txn_cluster.restart(f"storage-{down}")
        wait_until(lambda: describe(new_stub, tid).state == "CompleteCommit", 90,
                   "the survivor completed the commit")  # fmt: skip
        new_owner, new_coordinator_epoch = owner_epoch(txn_cluster, txn_partition(tid))
        assert new_owner == survivor and new_coordinator_epoch > old_coordinator_epoch
        (marker,) = markers(txn_cluster, "failover-data")
        assert marker == (1, epoch, ControlRecordType.COMMIT, new_coordinator_epoch)
        # The producer carries on at the answered epoch.
        assert add(new_stub, tid, pid, epoch + 1, "failover-data") == E.NONE
    finally:
        txn_cluster.restart(f"coordinator-{owner}")
