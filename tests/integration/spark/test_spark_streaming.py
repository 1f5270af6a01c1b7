"""Streaming reads (and writes) of the strom data source: micro-batches capped by
maxOffsetsPerTrigger, new partitions, restart from the checkpoint, data loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from spark_testkit import fill, new_topic

from strom.types import TopicPartition

pytestmark = pytest.mark.integration


def run_available_now(spark, cluster, topic: str, out: Path, ckpt: Path, **options: str):  # type: ignore[no-untyped-def]
    """One availableNow run of topic -> parquet; returns the rows of each micro-batch."""
    stream = (
        spark.readStream.format("strom")
        .option("strom.bootstrap.servers", cluster.gateway)
        .option("subscribe", topic)
    )
    for name, value in options.items():
        stream = stream.option(name, value)
    query = (
        stream.load()
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    if query.exception() is not None:
        raise query.exception()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def stored(spark, out: Path) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    rows = spark.read.parquet(str(out)).select("partition", "offset").collect()
    return sorted((r.partition, r.offset) for r in rows)


def test_capped_micro_batches_new_partitions_and_restart(spark, spark_cluster, tmp_path) -> None:
    topic = new_topic(spark_cluster, 2)
    fill(spark_cluster, topic, {0: 15, 1: 5})
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    batches = run_available_now(
        spark, spark_cluster, topic, out, ckpt, startingOffsets="earliest", maxOffsetsPerTrigger="8"
    )
    assert batches == [8, 8, 4]
    assert stored(spark, out) == [(0, o) for o in range(15)] + [(1, o) for o in range(5)]

    # More records, and a new partition: the restart resumes from the checkpoint (its
    # startingOffsets is ignored) and picks the new partition up from its start.
    fill(spark_cluster, topic, {0: 2, 1: 3}, prefix="w")
    with spark_cluster.admin() as admin:
        admin.create_partitions({topic: 3})
    fill(spark_cluster, topic, {2: 4}, prefix="w")
    batches = run_available_now(
        spark, spark_cluster, topic, out, ckpt, startingOffsets="latest", maxOffsetsPerTrigger="100"
    )
    assert sum(batches) == 9
    assert stored(spark, out) == (
        [(0, o) for o in range(17)] + [(1, o) for o in range(8)] + [(2, o) for o in range(4)]
    )
    logs = [p for p in (ckpt / "offsets").iterdir() if p.name.isdigit()]
    last = max(logs, key=lambda p: int(p.name)).read_text().splitlines()[-1]
    assert json.loads(last) == {topic: {"0": 17, "1": 8, "2": 4}}


def test_streaming_data_loss(spark, spark_cluster, tmp_path) -> None:
    topic = new_topic(spark_cluster, 1)
    fill(spark_cluster, topic, {0: 10})
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    assert run_available_now(
        spark, spark_cluster, topic, out, ckpt, startingOffsets="earliest"
    ) == [10]
    fill(spark_cluster, topic, {0: 10}, prefix="w")
    with spark_cluster.admin() as admin:
        admin.delete_records({TopicPartition(topic, 0): 15})
    with pytest.raises((Py4JJavaError, PySparkException, Exception)) as failed:
        run_available_now(spark, spark_cluster, topic, out, ckpt)
    assert f"{topic}-0: records [10, 15) are no longer available" in str(failed.value)
    assert run_available_now(spark, spark_cluster, topic, out, ckpt, failOnDataLoss="false") == [5]
    assert stored(spark, out) == [(0, o) for o in range(10)] + [(0, o) for o in range(15, 20)]


def test_stream_to_stream_copy(spark, spark_cluster, tmp_path) -> None:
    source, sink = new_topic(spark_cluster, 2), new_topic(spark_cluster, 1)
    fill(spark_cluster, source, {0: 6, 1: 4})
    query = (
        spark.readStream.format("strom")
        .option("strom.bootstrap.servers", spark_cluster.gateway)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("strom")
        .option("strom.bootstrap.servers", spark_cluster.gateway)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copied = (
        spark.read.format("strom")
        .option("strom.bootstrap.servers", spark_cluster.gateway)
        .option("subscribe", sink)
        .load()
        .collect()
    )
    assert sorted(bytes(r.value) for r in copied) == sorted(
        [f"v-0-{i}".encode() for i in range(6)] + [f"v-1-{i}".encode() for i in range(4)]
    )
    assert sorted(r.offset for r in copied) == list(range(10))
