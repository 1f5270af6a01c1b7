"""Network partitions (partitions.py, partition_chaos.py): the leader lease under a real
partition, a short run of both workloads under the partition nemesis in every test run, and a
long one in ``make chaos`` (marked slow). Runs print the seed and both tables; every count
must be 0."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from chaos_harness import SESSION_MS, seed_from_env
from cluster_testkit import wait_until
from partition_chaos import partition_chaos_run, start_partition_chaos_cluster
from partitions import ProxiedCluster

from strom import NewTopic
from strom.protocol.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from strom.records import encode_batch

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path("/proc/net/tcp").exists(),
        reason="the partition proxy tells processes apart through Linux's /proc",
    ),
]


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedCluster]:
    yield from start_partition_chaos_cluster(tmp_path_factory.mktemp("partitions"))


@dataclass
class Answer:
    value: str
    sent: float
    answered: float
    code: int  # ErrorCode, or -1: the RPC itself failed
    message: str


def _produce_to_node(
    cluster: ProxiedCluster, node_id: int, topic: str, answers: list[Answer], stop: threading.Event
) -> None:
    """acks=all writes of one record each, straight to ``node_id``, one after the other."""
    with grpc.insecure_channel(cluster.storage_address(node_id)) as channel:
        stub = storage_pb2_grpc.StorageNodeStub(channel)
        n = 0
        while not stop.is_set():
            value = f"v{n}"
            batch = encode_batch([(int(time.time() * 1000), None, value.encode())])
            data = storage_pb2.ProducePartitionData(topic=topic, partition=0, records=batch)
            request = storage_pb2.ProduceRequest(acks=-1, timeout_ms=1000, partitions=[data])
            sent = time.monotonic()
            try:
                (result,) = stub.Produce(request, timeout=5).partitions
                code, message = result.error_code, result.error_message
            except grpc.RpcError as exc:
                code, message = -1, str(exc.code())
            answers.append(Answer(value, sent, time.monotonic(), code, message))
            n += 1
            stop.wait(0.05)


def test_a_leader_cut_off_from_the_controller_stops_acknowledging_acks_all(
    partitioned: ProxiedCluster,
) -> None:
    """Leader 1 and its only follower 2 are cut off from etcd, the controllers and node 3,
    while producers still reach node 1: the follower keeps fetching, so the ISR stays whole in
    the leader's eyes and without a lease it would acknowledge acks=all writes for as long as
    the partition lasts. With the lease it refuses them (NOT_LEADER_OR_FOLLOWER) once its etcd
    session may have expired: nothing sent later than the cut plus the session timeout is
    acknowledged. After the heal no acknowledged write is missing."""
    cluster = partitioned
    topic = NewTopic(
        "lease", replica_assignment={0: [1, 2]}, topic_configs={"min.insync.replicas": "2"}
    )
    with cluster.admin() as admin:
        admin.create_topics([topic])
    cluster.wait_hosted("lease", 0)
    wait_until(lambda: cluster.describe("lease").partitions[0].isr == (1, 2), 60, "ISR [1, 2]")
    answers: list[Answer] = []
    stop = threading.Event()
    producer = threading.Thread(target=_produce_to_node, args=(cluster, 1, "lease", answers, stop))
    producer.start()
    try:
        wait_until(lambda: sum(a.code == 0 for a in answers) >= 5, 60, "acks before the cut")
        cluster.split(["storage-1", "storage-2"])
        cut = time.monotonic()  # every keep-alive etcd answered was sent before this
        wait_until(
            lambda: any(
                a.sent > cut and a.code == common_pb2.NOT_LEADER_OR_FOLLOWER for a in answers
            ),
            60,
            "the cut-off leader to refuse an acks=all write",
        )
        refused_at = time.monotonic()
        wait_until(lambda: answers[-1].sent > refused_at + 1, 30, "writes after the refusal")
        healed = time.monotonic()
        cluster.heal_network()
    finally:
        stop.set()
        producer.join(30)
    lease_end = cut + SESSION_MS / 1000
    during = [a for a in answers if cut < a.sent and a.answered < healed]
    late_acks = [a for a in during if a.sent > lease_end and a.code == 0]
    acked = [a for a in during if a.code == 0]
    refusals = [a for a in during if a.code == common_pb2.NOT_LEADER_OR_FOLLOWER]
    print(
        f"cut at 0: last ack answered at +{max((a.answered for a in acked), default=cut) - cut:.2f}"
        f" s, first lease refusal at +{refusals[0].answered - cut:.2f} s "
        f"(session {SESSION_MS / 1000:.0f} s); {len(acked)} acks and {len(refusals)} refusals"
        f" during the cut"
    )
    assert not late_acks, f"acknowledged after the lease ran out: {late_acks[:3]}"
    assert "etcd session" in refusals[0].message
    # Healed: the partition leads again and holds every acknowledged write.
    wait_until(lambda: cluster.describe("lease").partitions[0].isr in ((1, 2), (2, 1)), 60, "ISR")
    leader = cluster.describe("lease").partitions[0].leader
    _, records = cluster.replica_records(leader, "lease", 0)
    held = {(r.value or b"").decode() for r in records}
    lost = [a.value for a in answers if a.code == 0 and a.value not in held]
    assert not lost, f"acknowledged writes lost: {lost[:5]}"


def _run(cluster: ProxiedCluster, duration_s: float) -> None:
    seed = seed_from_env()
    run = partition_chaos_run(cluster, seed, duration_s)
    assert run.outcome.faults, "the nemesis injected no fault"
    assert run.outcome.acked, "no record was acknowledged"
    committed = [ids for ids, fate in run.txn_outcome.transactions.values() if fate == "committed"]
    assert committed, "no transaction committed"
    assert run.txn_outcome.input_acked, "the pipeline's input got no record"
    opened = run.proxy_stats["opened"]
    server_links = sum(n for link, n in opened.items() if not link.startswith("client"))
    assert server_links, "the proxy saw no connection between server processes"
    violations = {k: n for k, n in {**run.results, **run.txn_results}.items() if n}
    assert not violations, f"seed {seed}: {violations}"


@pytest.mark.timeout(600)
def test_partition_chaos_short(partitioned: ProxiedCluster) -> None:
    """Both workloads under partitions, about 20 s of faults (CI)."""
    _run(partitioned, float(os.environ.get("STROM_PARTITION_CHAOS_SHORT_SECONDS", "20")))


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_partition_chaos_long(partitioned: ProxiedCluster) -> None:
    """``make chaos``: 10 minutes unless STROM_CHAOS_SECONDS says otherwise."""
    _run(partitioned, float(os.environ.get("STROM_CHAOS_SECONDS", "600")))
