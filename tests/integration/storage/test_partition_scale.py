"""Thousands of partitions pushed to storage nodes at once must not cost them their etcd
sessions.

Three storage nodes with 3 s sessions (1 s keep-alive interval) get 1,200 RF-3 partitions
(3,600 replicas) in a burst of CreateTopics calls. Before the fix a node applied them on its
event loop (an O(n) scan per new log, fsyncs in line) and its keep-alive, sharing that loop,
starved: the controller saw the node leave and moved leaderships around. Now every node must
host every partition, every partition must take an acks=all write, and no session may have
lapsed: no leadership moved (every leader epoch still 0), no registration expired, no broker
left.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_testkit import STORAGE_NODES, LocalCluster, start_local_cluster

from strom import NewTopic, Producer

SESSION_MS = 3000
TOPICS = 120
PARTITIONS = 10
RF = 3
TOPICS_PER_CALL = 50
HOSTED_TIMEOUT_S = 240.0


@pytest.fixture(scope="module")
def scale_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("partition-scale"),
        coordinators=0,
        storage_flags=("--broker.session.timeout.ms", str(SESSION_MS)),
    )


def _hosted_everywhere(data_dir: Path, expected: int) -> bool:
    for node_id in range(1, STORAGE_NODES + 1):
        log_dir = data_dir / f"storage-{node_id}"
        if not log_dir.is_dir() or sum(1 for _ in log_dir.iterdir()) < expected:
            return False
    return True


def _log_text(data_dir: Path, prefix: str) -> str:
    return "".join(
        path.read_text(errors="replace") for path in sorted((data_dir / "logs").glob(prefix))
    )


def test_a_burst_of_partitions_keeps_every_session(scale_cluster: LocalCluster) -> None:
    names = [f"scale-{i:04d}" for i in range(TOPICS)]
    with scale_cluster.admin() as admin:
        for first in range(0, TOPICS, TOPICS_PER_CALL):
            batch = names[first : first + TOPICS_PER_CALL]
            admin.create_topics([NewTopic(n, PARTITIONS, RF) for n in batch])
        data_dir = scale_cluster.spec.data_dir
        deadline = time.monotonic() + HOSTED_TIMEOUT_S
        while not _hosted_everywhere(data_dir, TOPICS * PARTITIONS):
            assert time.monotonic() < deadline, "the nodes did not host every partition in time"
            time.sleep(0.2)

        with Producer(scale_cluster.gateway, acks="all", linger_ms=20) as producer:
            futures = [
                producer.send(name, value=b"x", partition=p)
                for name in names
                for p in range(PARTITIONS)
            ]
            producer.flush()
            for future in futures:
                future.result(timeout=60)

        described = admin.describe_topics(names)
    moved = [
        f"{t.name}-{p.partition}"
        for t in described
        for p in t.partitions
        if p.leader_epoch != 0 or len(p.isr) != RF
    ]
    assert moved == [], f"{len(moved)} partitions changed leader or ISR, e.g. {moved[:5]}"
    storage_logs = _log_text(data_dir, "storage-*.log")
    assert "registration lease expired" not in storage_logs
    assert '"broker left' not in _log_text(data_dir, "controller-*.log")
