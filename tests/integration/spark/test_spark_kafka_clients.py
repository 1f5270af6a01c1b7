"""Records crossing between Kafka's own client (confluent-kafka, through the gateway's Kafka
listener) and the Spark connector, in both directions: librdkafka's lz4- and snappy-compressed
batches with keys and headers read by the Spark source, a librdkafka transaction aborted and
one committed read by a read_committed Spark reader, and rows written by the Spark sink read
by a librdkafka consumer."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType
from spark_testkit import new_topic, reader

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
#: librdkafka settings for a test on a loaded machine.
LIBRDKAFKA = {"topic.metadata.refresh.interval.ms": 2000, "socket.timeout.ms": 30000}


def kafka_address(cluster) -> str:  # type: ignore[no-untyped-def]
    return f"{cluster.spec.host}:{cluster.spec.kafka_port}"


def _delivered(failures: list[Any]):  # type: ignore[no-untyped-def]
    return lambda err, _msg: failures.append(err) if err else None


@pytest.mark.parametrize("codec", ["lz4", "snappy"])
def test_spark_reads_what_librdkafka_wrote(spark, spark_cluster, codec: str) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(spark_cluster, 2)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka_address(spark_cluster), "enable.idempotence": True,
         "compression.type": codec, "linger.ms": 5, **LIBRDKAFKA}
    )  # fmt: skip
    failures: list[Any] = []
    for i in range(300):
        producer.produce(
            topic, value=b"v%d" % i, key=b"k%d" % i, partition=i % 2,
            headers=[("n", str(i).encode()), ("src", b"librdkafka")],
            on_delivery=_delivered(failures),
        )  # fmt: skip
    assert producer.flush(60) == 0 and failures == []
    rows = reader(spark, spark_cluster, subscribe=topic, includeHeaders="true").collect()
    got = sorted(
        (r.partition, bytes(r.key), bytes(r.value), [(h.key, bytes(h.value)) for h in r.headers])
        for r in rows
    )
    assert got == sorted(
        (i % 2, b"k%d" % i, b"v%d" % i, [("n", str(i).encode()), ("src", b"librdkafka")])
        for i in range(300)
    )
    # Offsets are dense per partition, in the order librdkafka sent.
    for partition in (0, 1):
        values = [bytes(r.value) for r in sorted(rows, key=lambda r: r.offset)
                  if r.partition == partition]  # fmt: skip
        assert values == [b"v%d" % i for i in range(partition, 300, 2)]


def test_read_committed_spark_skips_a_librdkafka_abort(spark, spark_cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(spark_cluster, 1)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka_address(spark_cluster),
         "transactional.id": f"librdkafka-{uuid.uuid4().hex[:6]}", **LIBRDKAFKA}
    )  # fmt: skip
    producer.init_transactions(60)
    for outcome in ("aborted", "committed"):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, value=f"{outcome}-{i}".encode())
        producer.flush(60)
        if outcome == "aborted":
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
    committed = reader(
        spark, spark_cluster, subscribe=topic, **{"kafka.isolation.level": "read_committed"}
    ).collect()
    assert sorted(bytes(r.value) for r in committed) == sorted(
        f"committed-{i}".encode() for i in range(50)
    )
    everything = reader(spark, spark_cluster, subscribe=topic).collect()
    assert len(everything) == 100  # read_uncommitted: the aborted records too (not the markers)


def test_librdkafka_reads_what_spark_wrote(spark, spark_cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(spark_cluster, 2)
    schema = StructType(
        [StructField("key", BinaryType()), StructField("value", BinaryType()),
         StructField("headers", HEADERS)]
    )  # fmt: skip
    rows = [(b"k%d" % i, b"v%d" % i, [("n", str(i).encode())]) for i in range(200)]
    (
        spark.createDataFrame(rows, schema)
        .write.format("strom")
        .mode("append")
        .option("strom.bootstrap.servers", spark_cluster.gateway)
        .option("topic", topic)
        .save()
    )
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka_address(spark_cluster), "group.id": f"g-{topic}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False, **LIBRDKAFKA}
    )  # fmt: skip
    got: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = []
    try:
        consumer.subscribe([topic])
        for _ in range(120):
            if len(got) >= len(rows):
                break
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                got.append((message.key(), message.value(), list(message.headers() or [])))
    finally:
        consumer.close()
    assert sorted(got) == sorted(rows)
