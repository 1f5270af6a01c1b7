"""valueFormat=avro: registry-framed Avro values read into a typed struct column (each record
decoded with its writer's schema, resolved to the subject's latest), and a struct column
written as framed Avro that strom.serde and the registry read back."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from cluster_testkit import LocalCluster
from pyspark.sql import SparkSession
from registry_testkit import Registries
from spark_testkit import new_topic, reader

from strom import Consumer, Producer, TopicPartition
from strom.serde import AvroDeserializer, AvroSerializer, SchemaRegistryClient

pytestmark = pytest.mark.integration

V1 = {
    "type": "record",
    "name": "Reading",
    "namespace": "sensors",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "celsius", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
V2 = {  # adds a nullable field with a default: older records read it as null
    **V1,
    "fields": [*V1["fields"], {"name": "site", "type": ["null", "string"], "default": None}],
}


@pytest.fixture(scope="module")
def registry_url(spark_cluster: LocalCluster) -> Iterator[str]:
    registries = Registries(spark_cluster)
    try:
        yield registries.start("spark-registry")
    finally:
        registries.stop_all()


def test_read_and_write_avro_values(
    spark: SparkSession, spark_cluster: LocalCluster, registry_url: str
) -> None:
    topic = new_topic(spark_cluster, 2)
    registry = SchemaRegistryClient(registry_url)
    old = AvroSerializer(registry, V1, topic=topic)
    new = AvroSerializer(registry, V2, topic=topic)
    with Producer(spark_cluster.gateway) as producer:
        for i in range(6):
            value = {"sensor": f"s{i}", "celsius": i / 2, "tags": ["a"] * (i % 3)}
            if i >= 3:
                value["site"] = "north"
            producer.send(topic, (new if i >= 3 else old)(value), partition=i % 2)
        producer.flush()

    df = reader(spark, spark_cluster, subscribe=topic, valueFormat="avro",
                schemaRegistryUrl=registry_url)  # fmt: skip
    assert df.schema["value"].dataType.simpleString() == (
        "struct<sensor:string,celsius:double,tags:array<string>,site:string>"
    )
    rows = sorted(df.select("value.*").collect(), key=lambda r: r.sensor)
    assert [(r.sensor, r.celsius, r.tags, r.site) for r in rows] == [
        (f"s{i}", i / 2, ["a"] * (i % 3), "north" if i >= 3 else None) for i in range(6)
    ]

    # Write the struct column back as framed Avro under another subject.
    out = new_topic(spark_cluster, 1)
    (
        df.select("value")
        .write.mode("append")
        .format("strom")
        .option("strom.bootstrap.servers", spark_cluster.gateway)
        .option("topic", out)
        .option("valueFormat", "avro")
        .option("schemaRegistryUrl", registry_url)
        .option("valueSchema", json.dumps(V2))
        .save()
    )
    assert registry.versions(f"{out}-value") == [1]
    decoded = []
    with Consumer(bootstrap_servers=spark_cluster.gateway, auto_offset_reset="earliest",
                  value_deserializer=AvroDeserializer(registry)) as consumer:  # fmt: skip
        consumer.assign([TopicPartition(out, 0)])
        while len(decoded) < 6:
            batch = consumer.poll(2000)
            assert batch, f"only {len(decoded)} of 6 records written"
            decoded += [r.value for rs in batch.values() for r in rs]
    assert sorted(v["sensor"] for v in decoded) == [f"s{i}" for i in range(6)]

    # A subject that does not exist fails the query at planning, naming it.
    with pytest.raises(Exception, match="40401"):
        reader(spark, spark_cluster, subscribe=topic, valueFormat="avro",
               schemaRegistryUrl=registry_url, valueSubject="nope").collect()  # fmt: skip
