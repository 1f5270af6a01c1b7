"""Batch reads of the strom data source with real local Spark against a real cluster."""

from __future__ import annotations

import json

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from spark_testkit import fill, new_topic, reader

from strom.types import TopicPartition

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000


def offsets(df) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_earliest_to_latest_reads_every_record_once(spark, spark_cluster) -> None:
    topic = new_topic(spark_cluster, 3)
    fill(spark_cluster, topic, {0: 5, 1: 7, 2: 0})
    df = reader(spark, spark_cluster, subscribe=topic)
    rows = df.collect()
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    got = sorted((r.partition, r.offset, bytes(r.value), bytes(r.key)) for r in rows)
    want = sorted(
        [(0, i, f"v-0-{i}".encode(), f"k{i}".encode()) for i in range(5)]
        + [(1, i, f"v-1-{i}".encode(), f"k{i}".encode()) for i in range(7)]
    )
    assert got == want
    assert {(r.topic, r.timestampType) for r in rows} == {(topic, 0)}
    # One task per non-empty partition; more with minPartitions or maxRecordsPerPartition.
    assert df.rdd.getNumPartitions() == 2
    assert (
        reader(spark, spark_cluster, subscribe=topic, minPartitions="6").rdd.getNumPartitions() == 6
    )
    split = reader(spark, spark_cluster, subscribe=topic, maxRecordsPerPartition="2")
    assert split.rdd.getNumPartitions() == 3 + 4
    assert offsets(split) == offsets(df)
    per_task = split.rdd.mapPartitions(lambda rows: [sorted(r.offset for r in rows)]).collect()
    assert all(len(t) <= 2 and t == list(range(t[0], t[-1] + 1)) for t in per_task)


def test_json_offsets_with_earliest_and_latest_markers(spark, spark_cluster) -> None:
    topic = new_topic(spark_cluster, 3)
    fill(spark_cluster, topic, {0: 10, 1: 10, 2: 10})
    df = reader(
        spark,
        spark_cluster,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 3, "1": -2, "2": 9}}),
        endingOffsets=json.dumps({topic: {"0": 5, "1": 2, "2": -1}}),
    )
    assert offsets(df) == [(0, 3), (0, 4), (1, 0), (1, 1), (2, 9)]
    # Unlisted partitions start at earliest and end at latest; assign picks partitions.
    df = reader(
        spark,
        spark_cluster,
        assign=json.dumps({topic: [0, 2]}),
        startingOffsets=json.dumps({topic: {"2": 8}}),
        endingOffsets=json.dumps({topic: {"0": 2}}),
    )
    assert offsets(df) == [(0, 0), (0, 1), (2, 8), (2, 9)]


def test_timestamp_bounds(spark, spark_cluster) -> None:
    topic = new_topic(spark_cluster, 2)
    for i in range(10):
        fill(spark_cluster, topic, {0: 1, 1: 1}, prefix=f"r{i}", timestamp_ms=BASE_TS + i * 1000)
    df = reader(
        spark,
        spark_cluster,
        subscribe=topic,
        startingTimestamp=str(BASE_TS + 3000),
        endingTimestamp=str(BASE_TS + 6500),
    )
    assert offsets(df) == [(p, o) for p in (0, 1) for o in (3, 4, 5, 6)]
    assert {r.timestamp.timestamp() for r in df.collect()} == {
        (BASE_TS + i * 1000) / 1000 for i in (3, 4, 5, 6)
    }
    by_partition = reader(
        spark,
        spark_cluster,
        subscribe=topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 8000, "1": BASE_TS}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"1": BASE_TS + 2000}}),
    )
    assert offsets(by_partition) == [(0, 8), (0, 9), (1, 0), (1, 1)]
    # No record at or after the timestamp: an error by default, the end with "latest".
    with pytest.raises((Py4JJavaError, PySparkException), match="no record at or after"):
        reader(
            spark, spark_cluster, subscribe=topic, startingTimestamp=str(BASE_TS + 99_000)
        ).count()
    empty = reader(
        spark,
        spark_cluster,
        subscribe=topic,
        startingTimestamp=str(BASE_TS + 99_000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert empty.count() == 0


def test_headers_and_pattern_subscription(spark, spark_cluster) -> None:
    topic = new_topic(spark_cluster, 2)
    fill(spark_cluster, topic, {0: 3, 1: 2}, headers=True)
    df = reader(spark, spark_cluster, subscribePattern=topic[:6] + ".*", includeHeaders="true")
    rows = [r for r in df.collect() if r.topic == topic]
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    assert sorted(
        (r.partition, r.offset, [(h.key, bytes(h.value)) for h in r.headers]) for r in rows
    ) == [
        (0, 0, [("h", b"0")]),
        (0, 1, [("h", b"1")]),
        (0, 2, [("h", b"2")]),
        (1, 0, [("h", b"0")]),
        (1, 1, [("h", b"1")]),
    ]


def test_data_loss_after_retention(spark, spark_cluster) -> None:
    topic = new_topic(spark_cluster, 1)
    fill(spark_cluster, topic, {0: 10})
    with spark_cluster.admin() as admin:
        admin.delete_records({TopicPartition(topic, 0): 4})
    start = json.dumps({topic: {"0": 1}})
    with pytest.raises((Py4JJavaError, PySparkException)) as failed:
        reader(spark, spark_cluster, subscribe=topic, startingOffsets=start).count()
    assert f"{topic}-0: records [1, 4) are no longer available" in str(failed.value)
    assert "failOnDataLoss=false" in str(failed.value)
    df = reader(
        spark, spark_cluster, subscribe=topic, startingOffsets=start, failOnDataLoss="false"
    )
    assert offsets(df) == [(0, o) for o in range(4, 10)]
    # earliest means the log start now: no loss.
    assert offsets(reader(spark, spark_cluster, subscribe=topic)) == [(0, o) for o in range(4, 10)]


def test_option_errors_are_clear(spark, spark_cluster) -> None:
    with pytest.raises((Py4JJavaError, PySparkException), match="exactly one of the options"):
        reader(spark, spark_cluster, subscribe="a", assign='{"a": [0]}').count()
    with pytest.raises((Py4JJavaError, PySparkException), match="not allowed for a batch"):
        reader(spark, spark_cluster, subscribe="a", startingOffsets="latest").count()
    with pytest.raises((Py4JJavaError, PySparkException), match="unknown topic"):
        reader(spark, spark_cluster, subscribe="no-such-topic").count()
