"""Batch writes of the strom data source, read back exactly."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql.functions import lit
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)
from spark_testkit import new_topic, reader

pytestmark = pytest.mark.integration

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def by_value(row: tuple) -> tuple:  # type: ignore[type-arg]
    return row[0], row[2]


def writer(df, cluster, **options: str):  # type: ignore[no-untyped-def]
    builder = (
        df.write.format("strom").mode("append").option("strom.bootstrap.servers", cluster.gateway)
    )
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder


def test_write_string_columns_with_topic_column(spark, spark_cluster) -> None:
    first, second = new_topic(spark_cluster, 2), new_topic(spark_cluster, 1)
    rows = [(first if i % 3 else second, f"key-{i}", f"value-{i}") for i in range(60)]
    df = spark.createDataFrame(rows, "topic string, key string, value string").repartition(2)
    writer(df, spark_cluster).save()
    back = reader(spark, spark_cluster, subscribe=f"{first},{second}").collect()
    assert sorted((r.topic, bytes(r.key), bytes(r.value)) for r in back) == sorted(
        (t, k.encode(), v.encode()) for t, k, v in rows
    )
    # Keyed records land by the key's hash: the same key always in the same partition.
    by_key = {}
    for r in back:
        assert by_key.setdefault((r.topic, bytes(r.key)), r.partition) == r.partition


def test_write_binary_with_partition_and_headers(spark, spark_cluster) -> None:
    topic = new_topic(spark_cluster, 3)
    schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("partition", IntegerType()),
            StructField("headers", HEADERS),
            StructField("ignored", StringType()),
        ]
    )
    rows = [
        (None if i % 4 == 0 else b"k%d" % i, b"\x00\xff%d" % i, i % 3, [("n", b"%d" % i)], "x")
        for i in range(30)
    ]
    writer(spark.createDataFrame(rows, schema), spark_cluster, topic=topic).save()
    back = reader(spark, spark_cluster, subscribe=topic, includeHeaders="true").collect()
    got = sorted(
        (
            (
                r.partition,
                None if r.key is None else bytes(r.key),
                bytes(r.value),
                [(h.key, bytes(h.value)) for h in r.headers],
            )
            for r in back
        ),
        key=by_value,
    )
    assert got == sorted(((p, k, v, h) for k, v, p, h, _ in rows), key=by_value)
    for p in range(3):
        assert sorted(r.offset for r in back if r.partition == p) == list(range(10))


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("key string, topic string", "a column named value"),
        (
            "value int, topic string",
            "column value must be binary or string to write to strom, got int",
        ),
        ("value string", "a column named topic, or the option topic"),
        (
            "value string, topic string, partition long",
            "column partition must be int to write to strom, got bigint",
        ),
    ],
)
def test_schema_errors_before_any_write(spark, spark_cluster, ddl: str, message: str) -> None:
    topic = new_topic(spark_cluster, 1)
    samples = {"string": "x", "int": 1, "long": 1}
    row = tuple(samples[part.split()[1]] for part in ddl.split(","))
    df = spark.createDataFrame([row], ddl)
    if "topic" in df.columns:
        df = df.withColumn("topic", lit(topic))
    with pytest.raises((Py4JJavaError, PySparkException), match=message):
        writer(df, spark_cluster).save()
    assert reader(spark, spark_cluster, subscribe=topic).count() == 0
