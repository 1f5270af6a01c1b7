"""Replication between real storage nodes: followers copy their leader, the ISR shrinks and
grows, acks=all waits for it, a failed leader's successor holds every acknowledged record,
and an unclean election loses exactly the records its documentation says it may."""

from __future__ import annotations

import time

from cluster_testkit import LocalCluster, assert_ok, wait_until
from replication_testkit import LAG_MAX_MS, paused, replica_values

from strom import NewTopic
from strom.errors import (
    NotEnoughReplicasError,
    RequestTimedOutError,
)

NOT_ENOUGH_REPLICAS = NotEnoughReplicasError.code
REQUEST_TIMED_OUT = RequestTimedOutError.code


def create(cluster: LocalCluster, name: str, replicas: list[int], **configs: str) -> None:
    with cluster.admin() as admin:
        admin.create_topics(
            [NewTopic(name, replica_assignment={0: replicas}, topic_configs=configs)]
        )
    wait_until(lambda: sorted(cluster.describe(name).partitions[0].isr) == sorted(replicas),
               20, f"{name}-0 fully in sync")  # fmt: skip


def produce_ok(cluster: LocalCluster, topic: str, values: list[bytes], acks: int = -1) -> int:
    result = cluster.produce(topic, 0, values, acks=acks)
    assert result.error_code == 0, result.error_message
    return result.base_offset


def in_sync_copies(cluster: LocalCluster, topic: str, nodes: list[int]) -> list[bytes]:
    """Wait until every node's replica has the same high watermark; return its values."""

    def agreed() -> list[bytes] | None:
        copies = [replica_values(cluster, n, topic, 0) for n in nodes]
        return copies[0][1] if all(c == copies[0] for c in copies) else None

    return wait_until(agreed, 20, f"replicas {nodes} of {topic}-0 to agree")


def test_followers_hold_what_acks_all_acknowledged(cluster: LocalCluster) -> None:
    create(cluster, "copied", [1, 2, 3], **{"min.insync.replicas": "2"})
    sent = [f"r{i}".encode() for i in range(300)]
    for i in range(0, 300, 30):
        produce_ok(cluster, "copied", sent[i : i + 30])
    assert in_sync_copies(cluster, "copied", [1, 2, 3]) == sent


def test_a_paused_follower_leaves_the_isr_and_rejoins(cluster: LocalCluster) -> None:
    create(cluster, "lagging", [1, 2, 3], **{"min.insync.replicas": "2"})
    produce_ok(cluster, "lagging", [b"before"])
    with paused(cluster, "storage-3"):
        started = time.monotonic()
        produce_ok(cluster, "lagging", [b"while paused"], acks=1)
        wait_until(lambda: 3 not in cluster.describe("lagging").partitions[0].isr,
                   LAG_MAX_MS / 1000 + 4, "node 3 to leave the ISR")  # fmt: skip
        print(f"ISR shrank {time.monotonic() - started:.2f} s after the pause")
        table = assert_ok(cluster.strom("topics", "describe", "lagging")).stdout
        assert "Isr: 1,2" in table, table
        # two in sync still satisfy min.insync.replicas=2
        produce_ok(cluster, "lagging", [b"acked by two"])
    wait_until(lambda: 3 in cluster.describe("lagging").partitions[0].isr, 20,
               "node 3 back in the ISR")  # fmt: skip
    assert in_sync_copies(cluster, "lagging", [1, 2, 3]) == [
        b"before", b"while paused", b"acked by two"
    ]  # fmt: skip


def test_acks_all_times_out_then_is_refused_below_min_isr(cluster: LocalCluster) -> None:
    create(cluster, "strict", [1, 2, 3], **{"min.insync.replicas": "3"})
    with paused(cluster, "storage-2"):
        # still in the ISR, so the write waits for node 2 until the request's timeout
        late = cluster.produce("strict", 0, [b"late"], timeout_ms=300)
        assert late.error_code == REQUEST_TIMED_OUT, late
        assert "did not reach offset 0 within 300 ms" in late.error_message
        wait_until(lambda: 2 not in cluster.describe("strict").partitions[0].isr,
                   LAG_MAX_MS / 1000 + 4, "node 2 to leave the ISR")  # fmt: skip
        refused = cluster.produce("strict", 0, [b"refused"])
        assert refused.error_code == NOT_ENOUGH_REPLICAS, refused
        assert "smaller than min.insync.replicas=3" in refused.error_message
        assert cluster.produce("strict", 0, [b"acks=1"], acks=1).error_code == 0
    wait_until(lambda: 2 in cluster.describe("strict").partitions[0].isr, 20, "node 2 back")
    produce_ok(cluster, "strict", [b"all three"])
    # the timed-out write was on the leader and committed once node 2 caught up
    assert in_sync_copies(cluster, "strict", [1, 2, 3]) == [b"late", b"acks=1", b"all three"]


def test_a_killed_leaders_successor_holds_every_acknowledged_record(
    cluster: LocalCluster,
) -> None:
    create(cluster, "failing", [2, 3, 1], **{"min.insync.replicas": "2"})
    sent = [f"a{i}".encode() for i in range(200)]
    for i in range(0, 200, 20):
        produce_ok(cluster, "failing", sent[i : i + 20])
    before = cluster.describe("failing").partitions[0]
    assert before.leader == 2
    popen = cluster.processes["storage-2"].popen
    assert popen is not None
    popen.kill()
    popen.wait()
    try:
        moved = wait_until(lambda: (p := cluster.describe("failing").partitions[0]).leader
                           in (3, 1) and p, 20, "a new leader")  # fmt: skip
        assert moved.leader_epoch > before.leader_epoch
        more = [f"b{i}".encode() for i in range(50)]
        produce_ok(cluster, "failing", more)
        _, leader_copy = replica_values(cluster, moved.leader, "failing", 0)
        assert leader_copy == sent + more
    finally:
        cluster.restart("storage-2")
    # the old leader comes back as a follower, catches up and rejoins
    wait_until(lambda: 2 in cluster.describe("failing").partitions[0].isr, 30, "node 2 back")
    assert in_sync_copies(cluster, "failing", [1, 2, 3]) == sent + more


def test_an_unclean_election_loses_what_only_the_dead_leader_had(cluster: LocalCluster) -> None:
    """The documented loss window: with unclean.leader.election.enable=true, a replica outside
    the ISR may lead when no ISR member is alive; what only the old leader had is gone, and
    the old leader, back, truncates to the new leader's history (replicas never diverge)."""
    create(cluster, "unclean", [1, 3], **{"unclean.leader.election.enable": "true"})
    produce_ok(cluster, "unclean", [b"both have this"])
    in_sync_copies(cluster, "unclean", [1, 3])
    cluster.stop("storage-3")  # a clean stop: the controller drops it from the ISR at once
    try:
        wait_until(lambda: cluster.describe("unclean").partitions[0].isr == (1,), 20, "ISR {1}")
        produce_ok(cluster, "unclean", [b"only node 1 has this"])  # acked: ISR {1} >= min 1
        popen = cluster.processes["storage-1"].popen
        assert popen is not None
        popen.kill()
        popen.wait()
    finally:
        cluster.restart("storage-3")
    try:
        led = wait_until(lambda: (p := cluster.describe("unclean").partitions[0]).leader == 3
                         and p, 30, "node 3 to lead uncleanly")  # fmt: skip
        assert led.isr == (3,), led
        produce_ok(cluster, "unclean", [b"written after the election"])
    finally:
        cluster.restart("storage-1")
    wait_until(lambda: 1 in cluster.describe("unclean").partitions[0].isr, 30, "node 1 back")
    assert in_sync_copies(cluster, "unclean", [1, 3]) == [
        b"both have this", b"written after the election"
    ]  # fmt: skip
