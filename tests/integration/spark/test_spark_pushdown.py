"""Filter pushdown of batch reads with real local Spark against a real cluster."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from spark_testkit import fill, new_topic, reader

from strom import NewTopic

pytestmark = pytest.mark.integration

CONF = "spark.sql.python.filterPushdown.enabled"
COUNTS = {0: 5, 1: 6, 2: 7, 3: 3}


@pytest.fixture
def pushdown(spark: SparkSession) -> Iterator[None]:
    spark.conf.set(CONF, "true")
    try:
        yield
    finally:
        spark.conf.unset(CONF)


@pytest.fixture(scope="module")
def topic(spark_cluster) -> str:  # type: ignore[no-untyped-def]
    name = new_topic(spark_cluster, 4)
    fill(spark_cluster, name, COUNTS)
    return name


def rows(df: DataFrame) -> list[tuple[int, int, bytes]]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def want(topic: str, keep) -> list[tuple[int, int, bytes]]:  # type: ignore[no-untyped-def]
    return [
        (p, o, f"v-{p}-{o}".encode())
        for p, n in sorted(COUNTS.items())
        for o in range(n)
        if keep(p, o)
    ]


def tasks(df: DataFrame) -> int:
    return df.rdd.getNumPartitions()


def test_partition_filters_plan_only_matching_partitions(
    spark, spark_cluster, topic, pushdown
) -> None:  # type: ignore[no-untyped-def]
    df = reader(spark, spark_cluster, subscribe=topic)
    assert tasks(df) == 4
    one = df.where("partition = 1")
    assert rows(one) == want(topic, lambda p, o: p == 1)
    assert tasks(one) == 1
    some = df.where("partition IN (0, 2)")
    assert rows(some) == want(topic, lambda p, o: p in {0, 2})
    assert tasks(some) == 2
    high = df.where("partition >= 2 AND partition < 10")
    assert rows(high) == want(topic, lambda p, o: p >= 2)
    assert tasks(high) == 2
    low = df.where("partition <= 1 AND partition > 0")
    assert rows(low) == want(topic, lambda p, o: p == 1)
    assert tasks(low) == 1
    none = df.where("partition = 9")
    assert rows(none) == [] and none.count() == 0


def test_offset_filters_clamp_every_range(spark, spark_cluster, topic, pushdown) -> None:  # type: ignore[no-untyped-def]
    df = reader(spark, spark_cluster, subscribe=topic)
    mid = df.where("offset >= 2 AND offset < 4")
    assert rows(mid) == want(topic, lambda p, o: 2 <= o < 4)
    assert tasks(mid) == 4
    # Partition 3 holds offsets 0-2 only: its range becomes empty, so no task.
    tail = df.where("offset > 3")
    assert rows(tail) == want(topic, lambda p, o: o > 3)
    assert tasks(tail) == 3
    exact = df.where("offset = 4")
    assert rows(exact) == want(topic, lambda p, o: o == 4)
    head = df.where("offset <= 1")
    assert rows(head) == want(topic, lambda p, o: o <= 1)
    # Clamped before maxRecordsPerPartition cuts: [4, 5), [4, 6), [4, 7) in 1 + 2 + 3 tasks.
    cut = reader(spark, spark_cluster, subscribe=topic, maxRecordsPerPartition="1")
    cut = cut.where("offset >= 4")
    assert rows(cut) == want(topic, lambda p, o: o >= 4)
    assert tasks(cut) == 6
    # Within the startingOffsets/endingOffsets range, never beyond it.
    bounded = reader(
        spark,
        spark_cluster,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 1, "1": 3, "2": 1, "3": 1}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 4, "1": -1, "2": 2, "3": -1}}}}',
    ).where("offset >= 2")
    ends = {0: 4, 1: 6, 2: 2, 3: 3}
    assert rows(bounded) == want(topic, lambda p, o: max(2, 3 if p == 1 else 1) <= o < ends[p])
    assert tasks(bounded) == 3


def test_topic_filters_stay_within_the_subscription(spark, spark_cluster, pushdown) -> None:  # type: ignore[no-untyped-def]
    prefix = f"pd-{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"]
    with spark_cluster.admin() as admin:
        admin.create_topics([NewTopic(n, 2, 1) for n in names])
    for n in names:
        fill(spark_cluster, n, {0: 2, 1: 3}, prefix=n)
    df = reader(spark, spark_cluster, subscribePattern=f"{prefix}-.*")
    assert tasks(df) == 6

    def got(d: DataFrame) -> list[tuple[str, int, int]]:
        return sorted((r.topic, r.partition, r.offset) for r in d.collect())

    def of(*topics: str) -> list[tuple[str, int, int]]:
        return sorted((t, p, o) for t in topics for p, n in ((0, 2), (1, 3)) for o in range(n))

    b = df.where(f"topic = '{names[1]}'")
    assert got(b) == of(names[1])
    assert tasks(b) == 2
    # A topic outside the subscription is not read, whatever the filter says.
    other = new_topic(spark_cluster, 1)
    fill(spark_cluster, other, {0: 2})
    ac = df.where(f"topic IN ('{names[0]}', '{names[2]}', '{other}')")
    assert got(ac) == of(names[0], names[2])
    assert tasks(ac) == 4
    sub = reader(spark, spark_cluster, subscribe=f"{names[0]},{names[1]}")
    assert got(sub.where(f"topic = '{names[2]}'")) == []
    # Topic, partition and offset together.
    combo = df.where(f"topic = '{names[2]}' AND partition = 1 AND offset > 0")
    assert got(combo) == [(names[2], 1, 1), (names[2], 1, 2)]
    assert tasks(combo) == 1


def test_unsupported_filters_are_left_to_spark(spark, spark_cluster, topic, pushdown) -> None:  # type: ignore[no-untyped-def]
    df = reader(spark, spark_cluster, subscribe=topic)
    by_value = df.where("value = CAST('v-1-3' AS BINARY)")
    assert rows(by_value) == [(1, 3, b"v-1-3")]
    assert tasks(by_value) == 4
    assert rows(df.where("NOT partition = 1")) == want(topic, lambda p, o: p != 1)
    assert rows(df.where("partition = 1 OR offset = 0")) == want(
        topic, lambda p, o: p == 1 or o == 0
    )
    assert rows(df.where("offset IN (0, 4)")) == want(topic, lambda p, o: o in {0, 4})
    assert rows(df.where("timestamp > TIMESTAMP'1970-01-01 00:00:00'")) == want(
        topic, lambda p, o: True
    )
    # Pushed and unsupported filters together.
    mixed = df.where("partition = 2 AND key = CAST('k5' AS BINARY) AND offset >= 1")
    assert rows(mixed) == [(2, 5, b"v-2-5")]
    assert tasks(mixed) == 1


def test_without_the_conf_nothing_is_pushed(spark, spark_cluster, topic) -> None:  # type: ignore[no-untyped-def]
    assert spark.conf.get(CONF) == "false"
    df = reader(spark, spark_cluster, subscribe=topic).where("partition = 1 AND offset >= 2")
    assert rows(df) == want(topic, lambda p, o: p == 1 and o >= 2)
    assert tasks(df) == 4
