"""Shared pieces of the Spark connector's integration tests: one local Spark session and one
Strom cluster for the whole folder, and helpers to fill topics."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from pyspark.sql import DataFrame, SparkSession

import strom_spark
from strom import Consumer, NewTopic, Producer
from strom.types import TopicPartition


def new_spark_session(app: str, warehouse: Path) -> SparkSession:
    """``local[4,2]`` (4 task slots; a failed task is tried again once, as on a cluster) whose
    Python workers run this interpreter (where strom_spark is installed)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[4,2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=WARN")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    strom_spark.register(spark)
    return spark


# The session-scoped Spark session and cluster below serve every module of this folder; they
# are released once its last module is done, not at the end of the whole run.
_CLOSERS: list[Callable[[], object]] = []


def _close_all() -> None:
    while _CLOSERS:
        _CLOSERS.pop()()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    session = new_spark_session("strom-spark-tests", tmp_path_factory.mktemp("warehouse"))
    _CLOSERS.append(session.stop)
    yield session
    _close_all()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One Strom cluster for every Spark test (starting one per module costs more than Spark)."""
    running = start_local_cluster(tmp_path_factory.mktemp("spark-cluster"))
    cluster = next(running)
    _CLOSERS.append(running.close)  # stops every process (the generator's finally)
    yield cluster
    _close_all()


@pytest.fixture(scope="module", autouse=True)
def release_after_folder(request: pytest.FixtureRequest) -> Iterator[None]:
    """After this folder's last module: stop Spark and the cluster."""
    yield
    items = request.session.items
    folder = Path(request.module.__file__).parent
    mine = [i for i, item in enumerate(items) if item.module is request.module]
    if mine and not any(Path(item.path).parent == folder for item in items[max(mine) + 1 :]):
        _close_all()


def new_topic(cluster: LocalCluster, partitions: int, *, rf: int = 1, **configs: str) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, partitions, rf, topic_configs=configs)])
    return name


def fill(
    cluster: LocalCluster,
    topic: str,
    per_partition: dict[int, int],
    *,
    prefix: str = "v",
    headers: bool = False,
    timestamp_ms: int | None = None,
) -> None:
    """Write ``count`` records to each partition: value ``{prefix}-{partition}-{i}``, key
    ``k{i}``, and with ``headers`` one header ``h`` = ``i`` per record."""
    with Producer(cluster.gateway, linger_ms=2) as producer:
        for partition, count in per_partition.items():
            for i in range(count):
                producer.send(
                    topic,
                    f"{prefix}-{partition}-{i}".encode(),
                    f"k{i}".encode(),
                    [("h", str(i).encode())] if headers else None,
                    partition,
                    timestamp_ms,
                )
        producer.flush()


def reader(spark: SparkSession, cluster: LocalCluster, **options: str) -> DataFrame:
    builder = spark.read.format("strom").option("strom.bootstrap.servers", cluster.gateway)
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder.load()


def topic_values(cluster: LocalCluster, topic: str, *, read_committed: bool = True) -> list[bytes]:
    """Every value in ``topic`` as a plain consumer reads it, without Spark (cheaper than a
    Spark read), up to the partitions' ends as of now: the last stable offsets under
    read_committed, the high watermarks otherwise."""
    level = "read_committed" if read_committed else "read_uncommitted"
    with cluster.admin() as admin:
        described = admin.describe_topics([topic])[0].partitions
        parts = [TopicPartition(topic, p) for p in range(len(described))]
        ends = {tp: o.offset for tp, o in admin.list_offsets(
            dict.fromkeys(parts, "latest"), isolation_level=level).items()}  # fmt: skip
    consumer = Consumer(
        bootstrap_servers=cluster.gateway, isolation_level=level, enable_auto_commit=False
    )
    try:
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        values: list[bytes] = []
        deadline = time.monotonic() + 120
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            assert time.monotonic() < deadline, f"{topic}: not read to {ends} in 120 s"
            for tp, records in consumer.poll(500).items():
                values.extend(r.value for r in records if r.offset < ends[tp])
        return values
    finally:
        consumer.close()
