"""Typed values in the Confluent wire format, with a schema registry.

::

    from strom import Producer, Consumer
    from strom.serde import SchemaRegistryClient, AvroSerializer, AvroDeserializer

    registry = SchemaRegistryClient("http://127.0.0.1:8081")
    serialize = AvroSerializer(registry, schema_text, topic="users")
    with Producer("127.0.0.1:9092", value_serializer=serialize) as producer:
        producer.send("users", {"name": "ada", "age": 36})
    with Consumer("users", bootstrap_servers=..., value_deserializer=AvroDeserializer(registry)):
        ...

A framed value is the magic byte 0, the schema id (4 bytes, big-endian), then the encoded
value (``wire``). The subject a schema is registered under comes from a name strategy
(``naming``: topic, record, topic-record). Serializers register their schema on first use
(``auto_register=True``) or look it up (``False``), and cache the id; deserializers fetch the
writer's schema by id once and cache it. Avro needs ``fastavro`` (``pip install strom[avro]``),
JSON Schema validation needs ``jsonschema``; Protobuf messages are generated classes (the
``protobuf`` package every Strom client has). See docs/schema-registry.md.
"""

from strom.serde.avro import AvroDeserializer, AvroSerializer
from strom.serde.json_schema import JsonDeserializer, JsonSerializer
from strom.serde.naming import (
    SubjectNameStrategy,
    record_name_strategy,
    topic_name_strategy,
    topic_record_name_strategy,
)
from strom.serde.protobuf import ProtobufDeserializer, ProtobufSerializer
from strom.serde.registry_client import (
    RegisteredSchema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from strom.serde.wire import MAGIC_BYTE, SerializationError, frame, split_frame

__all__ = [
    "MAGIC_BYTE",
    "AvroDeserializer",
    "AvroSerializer",
    "JsonDeserializer",
    "JsonSerializer",
    "ProtobufDeserializer",
    "ProtobufSerializer",
    "RegisteredSchema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SerializationError",
    "SubjectNameStrategy",
    "frame",
    "record_name_strategy",
    "split_frame",
    "topic_name_strategy",
    "topic_record_name_strategy",
]
