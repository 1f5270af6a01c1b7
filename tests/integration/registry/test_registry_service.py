"""The schema registry as Confluent's own client sees it: two instances over a real cluster,
values serialized with confluent-kafka's AvroSerializer round-tripping through a Strom topic,
Confluent's errors, and ids that survive a restart and a writer failover. Then strom.serde
against it: Avro and JSON values through a topic with a producer's serializer and a
consumer's deserializer, interchangeable with Confluent's; name strategies, auto-register off;
the ``strom schemas`` commands. (One module: one cluster.)"""

from __future__ import annotations

import json
import signal
import struct
import urllib.error
import urllib.request

import pytest
from registry_testkit import Registries, http
from strom_testkit import wait_until

from strom import Consumer, NewTopic, Producer, TopicPartition
from strom.cli.main import main as strom_main
from strom.serde import (
    AvroDeserializer,
    AvroSerializer,
    JsonDeserializer,
    JsonSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    SchemaRegistryClient,
    SchemaRegistryError,
    SerializationError,
    record_name_strategy,
)

pytestmark = pytest.mark.integration

schema_registry = pytest.importorskip("confluent_kafka.schema_registry")
avro_serde = pytest.importorskip("confluent_kafka.schema_registry.avro")
serialization = pytest.importorskip("confluent_kafka.serialization")

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
USER_V2 = {  # adds a field with a default: BACKWARD compatible
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": ""}],
}
USER_BROKEN = {  # changes a type: incompatible
    **USER_V1,
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "string"}],
}


def _client(url: str) -> schema_registry.SchemaRegistryClient:
    return schema_registry.SchemaRegistryClient({"url": url})


def test_avro_values_round_trip_through_a_strom_topic(registries: Registries) -> None:
    cluster = registries.cluster
    topic = "users"
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    # Register through one instance (forwarded to the writer if needed), read through the other.
    serializer = avro_serde.AvroSerializer(_client(registries.url("b")), json.dumps(USER_V1))
    deserializer = avro_serde.AvroDeserializer(_client(registries.url("a")))
    context = serialization.SerializationContext(topic, serialization.MessageField.VALUE)
    users = [{"name": f"user-{i}", "age": 20 + i} for i in range(20)]
    framed = [serializer(u, context) for u in users]
    magic, schema_id = struct.unpack(">bI", framed[0][:5])
    assert magic == 0 and schema_id >= 1
    with Producer(cluster.gateway) as producer:
        for value in framed:
            producer.send(topic, value, partition=0)
        producer.flush()
    read: list[bytes] = []
    with Consumer(bootstrap_servers=cluster.gateway, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        wait_until(
            lambda: (
                read.extend(r.value for rs in consumer.poll(500).values() for r in rs)
                or len(read) >= len(users)
            ),
            30.0,
            "the framed values",
        )
    assert [deserializer(v, context) for v in read] == users

    client = _client(registries.url("a"))
    assert client.get_subjects() == [f"{topic}-value"]
    latest = client.get_latest_version(f"{topic}-value")
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    # A compatible evolution gets a new id and version 2; the same schema again changes nothing.
    v2 = schema_registry.Schema(json.dumps(USER_V2), "AVRO")
    v2_id = client.register_schema(f"{topic}-value", v2)
    assert v2_id > schema_id
    assert _client(registries.url("b")).register_schema(f"{topic}-value", v2) == v2_id
    assert client.get_versions(f"{topic}-value") == [1, 2]
    assert client.test_compatibility(f"{topic}-value", v2)


def test_confluent_errors(registries: Registries) -> None:
    url = registries.url("a")
    client = _client(url)
    subject = "errors-value"
    client.register_schema(subject, schema_registry.Schema(json.dumps(USER_V1), "AVRO"))

    def error(call: object) -> tuple[int, int]:
        with pytest.raises(schema_registry.error.SchemaRegistryError) as caught:
            call()  # type: ignore[operator]
        return caught.value.http_status_code, caught.value.error_code

    broken = schema_registry.Schema(json.dumps(USER_BROKEN), "AVRO")
    assert error(lambda: client.register_schema(subject, broken)) == (409, 409)
    assert error(lambda: client.get_latest_version("no-such-subject")) == (404, 40401)
    assert error(lambda: client.get_version(subject, 7)) == (404, 40402)
    assert error(lambda: client.get_schema(999_999)) == (404, 40403)
    bad = schema_registry.Schema('{"type": "record", "name": "X"}', "AVRO")
    assert error(lambda: client.register_schema(subject, bad)) == (422, 42201)
    assert error(lambda: client.set_compatibility(subject, "SIDEWAYS")) == (422, 42203)
    status, body = http("GET", f"{url}/subjects/{subject}/versions/zero")
    assert (status, body["error_code"]) == (422, 42202)
    status, body = http("POST", f"{url}/subjects/{subject}/versions", {"schema": "{not json"})
    assert (status, body["error_code"]) == (422, 42201)
    status, body = http("POST", f"{url}/subjects/bad%01name/versions", {"schema": '"string"'})
    assert (status, body["error_code"]) == (422, 42208)
    status, body = http("GET", f"{url}/schemas/ids/not-a-number")
    assert (status, body["error_code"]) == (404, 40403)
    # HTTP-level refusals answer Confluent's body too, the status as the error code.
    status, body = http("GET", f"{url}/no/such/route")
    assert (status, body["error_code"]) == (404, 404)
    status, body = http("PATCH", f"{url}/subjects")
    assert (status, body["error_code"]) == (405, 405)
    not_json = urllib.request.Request(f"{url}/subjects/{subject}", data=b"{oops", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(not_json, timeout=30)
    assert (refused.value.code, json.loads(refused.value.read())["error_code"]) == (400, 400)
    # Deleting: permanent needs a soft delete first (40405); a soft-deleted subject is gone.
    status, body = http("DELETE", f"{url}/subjects/{subject}?permanent=true")
    assert (status, body["error_code"]) == (404, 40405)
    assert client.delete_subject(subject) == [1]
    assert error(lambda: client.get_latest_version(subject)) == (404, 40401)
    assert client.delete_subject(subject, permanent=True) == [1]
    assert subject not in client.get_subjects(deleted=True)


ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
ORDER_V2 = {**ORDER, "fields": [*ORDER["fields"], {"name": "qty", "type": "int", "default": 1}]}


def _read(gateway: str, topic: str, count: int, deserializer: object) -> list[object]:
    found: list[object] = []
    with Consumer(
        bootstrap_servers=gateway, auto_offset_reset="earliest", value_deserializer=deserializer
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        wait_until(
            lambda: (
                found.extend(r.value for rs in consumer.poll(500).values() for r in rs)
                or len(found) >= count
            ),
            30.0,
            f"{count} records of {topic}",
        )
    return found


def test_avro_through_producer_and_consumer(registries: Registries) -> None:
    gateway = registries.cluster.gateway
    with registries.cluster.admin() as admin:
        admin.create_topics([NewTopic("orders", 1, 1), NewTopic("json-events", 1, 1)])
    registry = SchemaRegistryClient(registries.url("a"))
    orders = [{"id": i, "item": f"item-{i}"} for i in range(10)]
    with Producer(gateway, value_serializer=AvroSerializer(registry, ORDER, topic="orders")) as p:
        for order in orders:
            p.send("orders", order, partition=0)
        p.flush()
    # A later writer evolves the schema (BACKWARD compatible) on the same topic.
    v2 = AvroSerializer(registry, ORDER_V2, topic="orders")
    with Producer(gateway, value_serializer=v2) as p:
        p.send("orders", {"id": 99, "item": "new", "qty": 3}, partition=0)
        p.flush()
    # Read with the writers' schemas, then resolved to v2 (the old records get qty's default).
    read = _read(gateway, "orders", 11, AvroDeserializer(registry))
    assert read == [*orders, {"id": 99, "item": "new", "qty": 3}]
    as_v2 = _read(gateway, "orders", 11, AvroDeserializer(registry, ORDER_V2))
    assert as_v2[0] == {"id": 0, "item": "item-0", "qty": 1}
    assert registry.versions("orders-value") == [1, 2]
    # Confluent's deserializer reads what strom.serde wrote, and the other way round.
    context = serialization.SerializationContext("orders", serialization.MessageField.VALUE)
    theirs = avro_serde.AvroDeserializer(
        schema_registry.SchemaRegistryClient({"url": registries.url("b")})
    )
    ours = AvroSerializer(registry, ORDER, topic="orders")
    assert theirs(ours(orders[3]), context) == orders[3]
    their_writer = avro_serde.AvroSerializer(
        schema_registry.SchemaRegistryClient({"url": registries.url("b")}), json.dumps(ORDER)
    )
    assert AvroDeserializer(registry)(their_writer(orders[4], context)) == orders[4]

    # The record name strategy; auto-register off finds nothing for a new subject.
    by_record = AvroSerializer(registry, ORDER, subject_name_strategy=record_name_strategy)
    assert by_record({"id": 1, "item": "x"})[:1] == b"\x00"
    assert "shop.Order" in registry.subjects()
    unregistered = AvroSerializer(registry, ORDER, topic="elsewhere", auto_register=False)
    with pytest.raises(SchemaRegistryError) as caught:
        unregistered({"id": 1, "item": "x"})
    assert caught.value.error_code == 40401
    with pytest.raises(SerializationError):
        ours({"id": "not a long", "item": "x"})
    with pytest.raises(SerializationError):
        AvroDeserializer(registry)(b"plain bytes")

    # JSON Schema values.
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    serializer = JsonSerializer(registry, schema, topic="json-events")
    with Producer(gateway, value_serializer=serializer) as p:
        for n in range(3):
            p.send("json-events", {"n": n}, partition=0)
        p.flush()
    assert _read(gateway, "json-events", 3, JsonDeserializer(registry, validate=True)) == [
        {"n": 0}, {"n": 1}, {"n": 2},
    ]  # fmt: skip
    with pytest.raises(SerializationError):
        serializer({"n": "three"})
    assert registry.version("json-events-value").schema_type == "JSON"


def test_protobuf_interchangeable_with_confluent(registries: Registries) -> None:
    protobuf = pytest.importorskip("confluent_kafka.schema_registry.protobuf")
    from google.protobuf import timestamp_pb2

    url = registries.url("a")
    context = serialization.SerializationContext("stamps", serialization.MessageField.VALUE)
    theirs = protobuf.ProtobufSerializer(
        timestamp_pb2.Timestamp, schema_registry.SchemaRegistryClient({"url": url}),
        {"use.deprecated.format": False},
    )  # fmt: skip
    stamp = timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=5)
    assert ProtobufDeserializer(timestamp_pb2.Timestamp)(theirs(stamp, context)) == stamp
    ours = ProtobufSerializer(SchemaRegistryClient(url), timestamp_pb2.Timestamp, topic="stamps")
    back = protobuf.ProtobufDeserializer(timestamp_pb2.Timestamp, {"use.deprecated.format": False})
    assert back(ours(stamp), context) == stamp
    registry = SchemaRegistryClient(url)
    assert registry.version("stamps-value").schema_type == "PROTOBUF"
    assert registry.versions("stamps-value") == [1]  # both registered the same schema


def test_schemas_commands(
    registries: Registries, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--registry-url", registries.url("b")]
    path = tmp_path / "payment.avsc"  # type: ignore[operator]
    payment = {"type": "record", "name": "Payment", "fields": [{"name": "cents", "type": "long"}]}
    path.write_text(json.dumps(payment))

    def strom(*args: str) -> tuple[int, str]:
        code = strom_main(list(args))
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    code, out = strom("schemas", "register", "payments-value", "--schema", str(path), *url)
    assert code == 0 and "payments-value version 1" in out, out
    code, out = strom("schemas", "list", *url, "--json")
    assert code == 0 and any(s["subject"] == "payments-value" for s in json.loads(out))
    code, out = strom("schemas", "get", "payments-value", *url)
    assert code == 0 and '"Payment"' in out
    broken = json.dumps({**payment, "fields": [{"name": "cents", "type": "string"}]})
    code, out = strom("schemas", "check", "payments-value", "--schema-text", broken, *url)
    assert code == 1 and "incompatible" in out
    code, out = strom("schemas", "delete", "payments-value", *url)
    assert code == 0 and "version(s) 1" in out
    code, out = strom("schemas", "get", "payments-value", *url)
    assert code == 1 and "40401" in out


def test_ids_survive_restart_and_writer_failover(registries: Registries) -> None:
    first = registries.writer()
    other = "b" if first == "a" else "a"
    ids = {}
    for i in range(3):
        schema = {"type": "record", "name": f"Kept{i}", "fields": [{"name": "x", "type": "int"}]}
        status, body = http(
            "POST", f"{registries.url(other)}/subjects/kept-{i}/versions",
            {"schema": json.dumps(schema)},
        )  # fmt: skip
        assert status == 200, body
        ids[i] = body["id"]
    # Kill the writer: the other instance takes over and gives new, higher ids.
    registries.processes[first].send_signal(signal.SIGKILL)
    registries.processes[first].stop(10.0)
    assert registries.writer() == other
    url = registries.url(other)
    new = {"type": "record", "name": "AfterFailover", "fields": [{"name": "y", "type": "long"}]}
    status, body = http("POST", f"{url}/subjects/after/versions", {"schema": json.dumps(new)})
    assert status == 200, body
    assert body["id"] > max(ids.values())
    # The killed instance restarts, rebuilds from _schemas and serves the same ids.
    restarted = registries.start(first + "2")
    for i, schema_id in ids.items():
        status, body = http("GET", f"{restarted}/subjects/kept-{i}/versions/1")
        assert (status, body["id"]) == (200, schema_id)
    status, body = http("GET", f"{restarted}/subjects/after/versions/latest")
    assert status == 200 and json.loads(body["schema"])["name"] == "AfterFailover"
