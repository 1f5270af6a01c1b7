"""The Spark source's read_committed on a real cluster, without a Spark session: the driver's
offset resolution (``ClusterView``, what batch and streaming ranges end at) and a task's read
(``read_range``), on a partition holding a committed, an aborted and an open transaction."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from strom_testkit import wait_until

from strom import NewTopic, Producer, TopicPartition

pytest.importorskip("pyspark")

from strom_spark.fetch import read_range
from strom_spark.offsets import ClusterView
from strom_spark.options import parse_source_options
from strom_spark.planning import OffsetRange

pytestmark = pytest.mark.integration

TOPIC = "spark-txn"
TP = TopicPartition(TOPIC, 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("txn-spark"),
        coordinator_flags=("--transaction.state.log.num.partitions", "3"),
    )


@pytest.fixture(scope="module")
def open_producer(cluster: LocalCluster) -> Iterator[Producer]:
    """The partition: committed c0 c1 | COMMIT | aborted a0 | ABORT | open o0 (left open)."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
    wait_until(lambda: cluster.describe(TOPIC).partitions[0].leader >= 0, 30, "a leader")
    cluster.wait_hosted(TOPIC, 0)
    producer = Producer(cluster.gateway, transactional_id="t-spark")
    producer.init_transactions()
    for values, commit in ((["c0", "c1"], True), (["a0"], False)):
        producer.begin_transaction()
        for value in values:
            producer.send(TOPIC, value.encode(), partition=0)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.begin_transaction()
    producer.send(TOPIC, b"o0", partition=0)
    producer.flush()
    yield producer
    producer.close(timeout=5)


def read(cluster: LocalCluster, level: str | None) -> tuple[int, list[str]]:
    raw = {"strom.bootstrap.servers": cluster.gateway, "assign": f'{{"{TOPIC}": [0]}}'}
    if level is not None:
        raw["kafka.isolation.level"] = level
    options = parse_source_options(raw, streaming=False)
    view = ClusterView(options)
    try:
        end = view.latest([TP])[TP]
    finally:
        view.close()
    batches = read_range(options, OffsetRange(TOPIC, 0, 0, end))
    return end, [v.decode() for b in batches for v in b.column("value").to_pylist()]


def test_read_committed_ends_at_the_lso_and_drops_the_aborted(
    cluster: LocalCluster, open_producer: Producer
) -> None:
    # c0(0) c1(1) COMMIT(2) a0(3) ABORT(4) o0(5, open): the LSO is 5.
    assert read(cluster, "read_committed") == (5, ["c0", "c1"])


def test_read_uncommitted_reads_to_the_high_watermark(
    cluster: LocalCluster, open_producer: Producer
) -> None:
    assert read(cluster, None) == (6, ["c0", "c1", "a0", "o0"])
