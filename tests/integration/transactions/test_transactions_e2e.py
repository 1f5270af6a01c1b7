"""Transactions end to end on a real cluster (issue 20, item 6): atomic visibility across
leaders, aborts, fencing, the coordinator's timeout, kills of the coordinator and of a leader
while a commit is being completed, a consume-transform-produce worker killed mid-transaction,
and KIP-890's scenario (a late EndTxn, marker or write of transaction N arriving during N+1)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from cluster_testkit import LocalCluster, read_values
from strom_testkit import wait_until

from strom import Consumer, NewTopic, Producer, TopicPartition
from strom.errors import (
    InvalidProducerEpochError,
    ProducerFencedError,
    StromError,
    TransactionAbortableError,
)
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    coordinator_pb2,
    gateway_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
    transaction_pb2,
)
from strom.records import encode_batch

pytestmark = pytest.mark.integration

WORKER = Path(__file__).parents[2] / "chaos" / "chaos_txn_worker.py"


def make_topic(cluster: LocalCluster, name: str, partitions: int = 3) -> None:
    with cluster.admin() as admin:
        configs = {"min.insync.replicas": "2"}
        admin.create_topics([NewTopic(name, partitions, 3, topic_configs=configs)])

    def ready() -> bool:
        parts = cluster.describe(name).partitions
        return all(p.leader >= 0 and len(p.isr) == 3 for p in parts)

    wait_until(ready, 30, f"{name}: leaders and full ISRs")
    for p in range(partitions):
        cluster.wait_hosted(name, p)


def committed_values(cluster: LocalCluster, topic: str) -> list[str]:
    return read_values(cluster, topic, isolation_level="read_committed")


def uncommitted_values(cluster: LocalCluster, topic: str) -> list[str]:
    return read_values(cluster, topic, isolation_level="read_uncommitted")


def read_for(cluster: LocalCluster, topic: str, *, seconds: float) -> list[str]:
    """What a new read_committed reader of partition 0 returns within ``seconds`` (for a
    partition whose LSO is held by an open transaction, where ``read_values`` would wait)."""
    with Consumer(
        bootstrap_servers=cluster.gateway,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        enable_auto_commit=False,
    ) as reader:
        reader.assign([TopicPartition(topic, 0)])
        seen: list[str] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            seen += [r.value.decode() for rs in reader.poll(timeout_ms=200).values() for r in rs]
    return seen


def transactional(cluster: LocalCluster, txn_id: str, **options: object) -> Producer:
    producer = Producer(bootstrap_servers=cluster.gateway, transactional_id=txn_id, **options)  # type: ignore[arg-type]
    producer.init_transactions()
    return producer


def send_all(producer: Producer, topic: str, values: list[str], partitions: int = 3) -> None:
    for i, value in enumerate(values):
        producer.send(topic, value.encode(), partition=i % partitions)
    producer.flush()


def coordinator_of(cluster: LocalCluster, txn_id: str) -> str:
    with grpc.insecure_channel(cluster.gateway) as channel:
        response = gateway_pb2_grpc.GatewayStub(channel).FindCoordinator(
            coordinator_pb2.FindCoordinatorRequest(
                group_id=txn_id, key_type=coordinator_pb2.TRANSACTION
            ),
            timeout=20,
        )
    assert response.error_code == 0, response.error_message
    return f"coordinator-{response.coordinator.node_id}"


def describe_state(cluster: LocalCluster, txn_id: str) -> str:
    with grpc.insecure_channel(cluster.gateway) as channel:
        response = gateway_pb2_grpc.GatewayStub(channel).DescribeTransactions(
            transaction_pb2.DescribeTransactionsRequest(transactional_ids=[txn_id]), timeout=20
        )
    (described,) = response.transactions
    return described.state if described.error_code == 0 else ""


def test_commit_across_three_leaders_is_visible_whole(cluster: LocalCluster) -> None:
    make_topic(cluster, "whole")
    leaders = {p.leader for p in cluster.describe("whole").partitions}
    assert len(leaders) == 3, f"the partitions should have 3 different leaders, got {leaders}"
    values = [f"whole-{i}" for i in range(30)]
    with transactional(cluster, "t-whole") as producer:
        producer.begin_transaction()
        send_all(producer, "whole", values)
        assert sorted(uncommitted_values(cluster, "whole")) == sorted(values)
        # Not one record is visible to read_committed before the commit: the LSO holds.
        with Consumer(
            bootstrap_servers=cluster.gateway,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            enable_auto_commit=False,
        ) as reader:
            reader.assign([TopicPartition("whole", p) for p in range(3)])
            seen = []
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                seen += [r for rs in reader.poll(timeout_ms=200).values() for r in rs]
            assert seen == []
            producer.commit_transaction()
            got: list[str] = []
            deadline = time.monotonic() + 15
            while len(got) < len(values) and time.monotonic() < deadline:
                got += [r.value.decode() for rs in reader.poll(timeout_ms=200).values() for r in rs]
    assert sorted(got) == sorted(values)
    assert sorted(committed_values(cluster, "whole")) == sorted(values)


def test_abort_is_never_visible_to_read_committed(cluster: LocalCluster) -> None:
    make_topic(cluster, "aborts")
    with transactional(cluster, "t-abort") as producer:
        producer.begin_transaction()
        send_all(producer, "aborts", ["aborted-1", "aborted-2", "aborted-3"])
        producer.abort_transaction()
        producer.begin_transaction()
        send_all(producer, "aborts", ["kept-1", "kept-2", "kept-3"])
        producer.commit_transaction()
    assert sorted(committed_values(cluster, "aborts")) == ["kept-1", "kept-2", "kept-3"]
    assert sorted(uncommitted_values(cluster, "aborts")) == [
        "aborted-1", "aborted-2", "aborted-3", "kept-1", "kept-2", "kept-3",
    ]  # fmt: skip


def test_a_second_producer_with_the_same_id_fences_the_first(cluster: LocalCluster) -> None:
    make_topic(cluster, "fencing")
    old = transactional(cluster, "t-fence")
    try:
        old.begin_transaction()
        send_all(old, "fencing", ["old-open"])
        with transactional(cluster, "t-fence") as new:  # aborts old's open transaction
            with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
                old.send("fencing", b"old-late", partition=0).result(timeout=20)
                old.commit_transaction()
            new.begin_transaction()
            send_all(new, "fencing", ["new-1"])
            new.commit_transaction()
    finally:
        old.close(timeout=5)
    assert committed_values(cluster, "fencing") == ["new-1"]
    assert "old-late" not in uncommitted_values(cluster, "fencing")


def test_a_hung_transaction_is_aborted_at_its_timeout(cluster: LocalCluster) -> None:
    make_topic(cluster, "hung", partitions=1)
    hung = transactional(cluster, "t-hung", transaction_timeout_ms=2000)
    try:
        hung.begin_transaction()
        send_all(hung, "hung", ["hung-1", "hung-2"], partitions=1)
        with transactional(cluster, "t-after-hung") as other:
            other.begin_transaction()
            send_all(other, "hung", ["after-1"], partitions=1)
            other.commit_transaction()
        # The LSO is held by the hung transaction until the coordinator aborts it.
        wait_until(
            lambda: describe_state(cluster, "t-hung") == "CompleteAbort", 20, "timeout abort"
        )
        assert committed_values(cluster, "hung") == ["after-1"]
        with pytest.raises(TransactionAbortableError):
            hung.commit_transaction()
        hung.abort_transaction()
        hung.begin_transaction()
        send_all(hung, "hung", ["hung-retry"], partitions=1)
        hung.commit_transaction()
    finally:
        hung.close(timeout=5)
    assert committed_values(cluster, "hung") == ["after-1", "hung-retry"]


def test_coordinator_killed_after_prepare_commit_completes_it(cluster: LocalCluster) -> None:
    make_topic(cluster, "tc-kill")
    victim = coordinator_of(cluster, "t-tc-kill")
    leader = cluster.describe("tc-kill").partitions[0].leader
    values = [f"tc-kill-{i}" for i in range(9)]
    producer = transactional(cluster, "t-tc-kill")
    try:
        producer.begin_transaction()
        send_all(producer, "tc-kill", values)
        # Hold the markers: partition 0's leader is paused, so the coordinator is still in
        # PrepareCommit when it dies.
        cluster.signal(f"storage-{leader}", signal.SIGSTOP)
        try:
            producer.commit_transaction()  # answered once PrepareCommit is durable
            cluster.kill(victim)
        finally:
            cluster.signal(f"storage-{leader}", signal.SIGCONT)
    finally:
        producer.close(timeout=5)
    cluster.restart(victim)
    wait_until(
        lambda: describe_state(cluster, "t-tc-kill") == "CompleteCommit", 60, "commit completed"
    )
    assert sorted(committed_values(cluster, "tc-kill")) == sorted(values)


def test_leader_killed_during_marker_writes_completes_the_commit(cluster: LocalCluster) -> None:
    make_topic(cluster, "leader-kill")
    leader = cluster.describe("leader-kill").partitions[1].leader
    values = [f"leader-kill-{i}" for i in range(9)]
    with transactional(cluster, "t-leader-kill") as producer:
        producer.begin_transaction()
        send_all(producer, "leader-kill", values)
        producer.commit_transaction()
        cluster.kill(f"storage-{leader}")
    try:
        wait_until(
            lambda: describe_state(cluster, "t-leader-kill") == "CompleteCommit", 60, "commit"
        )
        assert sorted(committed_values(cluster, "leader-kill")) == sorted(values)
    finally:
        cluster.restart(f"storage-{leader}")


def test_consume_transform_produce_killed_mid_transaction_is_exactly_once(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    make_topic(cluster, "ctp-in")
    make_topic(cluster, "ctp-out")
    inputs = [f"in-{i}" for i in range(600)]
    with Producer(bootstrap_servers=cluster.gateway, acks="all") as plain:
        for i, value in enumerate(inputs):
            plain.send("ctp-in", value.encode(), partition=i % 3)
        plain.flush()

    def start(n: int) -> subprocess.Popen[bytes]:
        argv = [
            sys.executable, str(WORKER), cluster.gateway, "ctp-group", "ctp-in", "ctp-out",
            "t-ctp", str(tmp_path / f"worker-{n}.log"),
        ]  # fmt: skip
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    first = start(1)
    try:
        journal = tmp_path / "worker-1.log"
        wait_until(
            lambda: journal.exists() and journal.read_text().count("C ") >= 2, 60, "2 commits"
        )
        first.kill()  # mid-run: its next transaction is open or being committed
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    second = start(2)
    try:

        def caught_up() -> bool:
            with cluster.admin() as admin:
                offsets = admin.list_consumer_group_offsets("ctp-group")
            done = sum(o.offset for tp, o in offsets.items() if tp.topic == "ctp-in")
            return done >= len(inputs)

        wait_until(caught_up, 120, "the restarted worker to process every input")
    finally:
        second.send_signal(signal.SIGTERM)
        try:
            second.wait(30)
        except subprocess.TimeoutExpired:
            second.kill()
    outputs = [v.split(":", 2)[2] for v in committed_values(cluster, "ctp-out")]
    assert sorted(outputs) == sorted(inputs)  # every input exactly once


# -- KIP-890: a late request of transaction N must not land on N+1 ---------------------------


def _gateway(cluster: LocalCluster) -> gateway_pb2_grpc.GatewayStub:
    return gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.gateway))


def _add(gw: gateway_pb2_grpc.GatewayStub, txn_id: str, pid: int, epoch: int, topic: str) -> None:
    response = gw.AddPartitionsToTxn(
        transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
            partitions=[common_pb2.TopicPartition(topic=topic, partition=0)],
        ),
        timeout=20,
    )  # fmt: skip
    assert response.error_code == 0, response.error_message
    assert all(r.error_code == 0 for r in response.results), response


def _produce(
    cluster: LocalCluster, txn_id: str, topic: str, *, pid: int, epoch: int, seq: int, value: str
) -> storage_pb2.ProducePartitionResult:
    batch = encode_batch(
        [(int(time.time() * 1000), None, value.encode())],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True,
    )  # fmt: skip
    request = storage_pb2.ProduceRequest(
        acks=-1, timeout_ms=10000, transactional_id=txn_id,
        partitions=[storage_pb2.ProducePartitionData(topic=topic, partition=0, records=batch)],
    )  # fmt: skip
    leader = cluster.describe(topic).partitions[0].leader
    with grpc.insecure_channel(cluster.storage_address(leader)) as channel:
        (result,) = (
            storage_pb2_grpc.StorageNodeStub(channel).Produce(request, timeout=30).partitions
        )
    return result


def _end(
    gw: gateway_pb2_grpc.GatewayStub, txn_id: str, pid: int, epoch: int, *, commit: bool
) -> transaction_pb2.EndTxnResponse:
    return gw.EndTxn(
        transaction_pb2.EndTxnRequest(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit
        ),
        timeout=20,
    )


def _log_end(cluster: LocalCluster, topic: str) -> int:
    with cluster.admin() as admin:
        (info,) = admin.list_offsets({TopicPartition(topic, 0): "latest"}).values()
    return info.offset


def test_late_requests_of_the_previous_transaction_are_refused(cluster: LocalCluster) -> None:
    make_topic(cluster, "kip890", partitions=1)
    gw, txn_id = _gateway(cluster), "t-kip890"
    init = gw.InitProducerId(
        controller_pb2.InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=-1,
            producer_epoch=-1,
        ),
        timeout=20,
    )  # fmt: skip
    assert init.error_code == 0, init.error_message
    pid, epoch_n = init.producer_id, init.producer_epoch
    # Transaction N.
    _add(gw, txn_id, pid, epoch_n, "kip890")
    assert (
        _produce(cluster, txn_id, "kip890", pid=pid, epoch=epoch_n, seq=0, value="n").error_code
        == 0
    )
    ended = _end(gw, txn_id, pid, epoch_n, commit=True)
    assert ended.error_code == 0, ended.error_message
    assert (ended.producer_id, ended.producer_epoch) == (pid, epoch_n + 1)
    wait_until(lambda: describe_state(cluster, txn_id) == "CompleteCommit", 20, "N completed")
    # A retried commit of N (its answer was lost) is answered as it was, changing nothing.
    retried = _end(gw, txn_id, pid, epoch_n, commit=True)
    assert retried.error_code == 0, retried.error_message
    assert retried.producer_epoch == ended.producer_epoch
    # Transaction N+1 at the bumped epoch.
    epoch_next = ended.producer_epoch
    _add(gw, txn_id, pid, epoch_next, "kip890")
    first = _produce(cluster, txn_id, "kip890", pid=pid, epoch=epoch_next, seq=0, value="n+1")
    assert first.error_code == 0, first
    end_before = _log_end(cluster, "kip890")
    # A late commit or abort of N must not end N+1.
    for commit in (True, False):
        late = _end(gw, txn_id, pid, epoch_n, commit=commit)
        assert late.error_code in (common_pb2.INVALID_TXN_STATE, common_pb2.PRODUCER_FENCED), late
    assert describe_state(cluster, txn_id) == "Ongoing"
    # A late ABORT marker of N, straight to the leader, writes nothing.
    leader = cluster.describe("kip890").partitions[0].leader
    marker = transaction_pb2.WriteTxnMarker(
        producer_id=pid, producer_epoch=epoch_n, committed=False, coordinator_epoch=1 << 20,
        partitions=[common_pb2.TopicPartition(topic="kip890", partition=0)],
    )  # fmt: skip
    with grpc.insecure_channel(cluster.storage_address(leader)) as channel:
        answer = storage_pb2_grpc.StorageNodeStub(channel).WriteTxnMarkers(
            transaction_pb2.WriteTxnMarkersRequest(markers=[marker], timeout_ms=10000), timeout=20
        )
    (result,) = answer.markers
    assert [p.error_code for p in result.partitions] == [common_pb2.NONE]
    # A late write of N (its retry of a batch, say) is refused.
    late_write = _produce(cluster, txn_id, "kip890", pid=pid, epoch=epoch_n, seq=1, value="late-n")
    assert late_write.error_code in (
        common_pb2.INVALID_PRODUCER_EPOCH,
        common_pb2.INVALID_TXN_STATE,
    ), late_write
    assert _log_end(cluster, "kip890") == end_before  # nothing was written
    # N+1 is still open (read_committed stops at its first offset) and commits whole.
    assert read_for(cluster, "kip890", seconds=1.5) == ["n"]
    assert _end(gw, txn_id, pid, epoch_next, commit=True).error_code == 0
    wait_until(lambda: committed_values(cluster, "kip890") == ["n", "n+1"], 20, "N+1 visible")
    assert "late-n" not in uncommitted_values(cluster, "kip890")


def test_a_write_to_a_partition_not_added_is_refused(cluster: LocalCluster) -> None:
    make_topic(cluster, "not-added", partitions=1)
    gw, txn_id = _gateway(cluster), "t-not-added"
    init = gw.InitProducerId(
        controller_pb2.InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=-1,
            producer_epoch=-1,
        ),
        timeout=20,
    )  # fmt: skip
    result = _produce(
        cluster, txn_id, "not-added", pid=init.producer_id, epoch=init.producer_epoch, seq=0,
        value="x",
    )  # fmt: skip
    assert result.error_code == common_pb2.INVALID_TXN_STATE, result
    assert uncommitted_values(cluster, "not-added") == []


def test_send_outside_a_transaction_is_refused(cluster: LocalCluster) -> None:
    with transactional(cluster, "t-outside") as producer, pytest.raises(StromError):
        producer.send("whole", b"no transaction", partition=0)
