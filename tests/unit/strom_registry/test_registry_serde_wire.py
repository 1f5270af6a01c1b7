"""strom.serde without a registry: the wire format, the name strategies and the serializers'
checks of their input."""

from __future__ import annotations

import pytest

from strom.errors import ConfigurationError
from strom.serde import (
    AvroDeserializer,
    AvroSerializer,
    SchemaRegistryClient,
    SerializationError,
    frame,
    record_name_strategy,
    split_frame,
    topic_name_strategy,
    topic_record_name_strategy,
)


def test_frame_round_trip() -> None:
    framed = frame(258, b"payload")
    assert framed[:5] == b"\x00\x00\x00\x01\x02"
    schema_id, payload = split_frame(framed)
    assert (schema_id, bytes(payload)) == (258, b"payload")
    for bad in (b"", b"\x00\x00", b"\x01\x00\x00\x00\x01x"):
        with pytest.raises(SerializationError):
            split_frame(bad)


def test_name_strategies() -> None:
    assert topic_name_strategy("orders", "shop.Order", False) == "orders-value"
    assert topic_name_strategy("orders", None, True) == "orders-key"
    assert record_name_strategy(None, "shop.Order", False) == "shop.Order"
    assert topic_record_name_strategy("orders", "shop.Order", False) == "orders-shop.Order"
    with pytest.raises(ConfigurationError, match="topic"):
        topic_name_strategy(None, "shop.Order", False)
    with pytest.raises(ConfigurationError, match="named schema"):
        record_name_strategy("orders", None, False)


def test_clear_errors_before_any_request() -> None:
    with pytest.raises(ConfigurationError, match="expected http://host:port"):
        SchemaRegistryClient("ftp://somewhere")
    with pytest.raises(ConfigurationError, match="user:password"):
        SchemaRegistryClient("http://r:8081", basic_auth_user_info="no-colon")
    with pytest.raises(ConfigurationError, match="https"):
        SchemaRegistryClient("http://r:8081", ssl_cafile="ca.crt")
    hidden = SchemaRegistryClient("http://ann:secret@r:8081/base")
    assert hidden.url == "http://r:8081/base"  # credentials never in messages
    registry = SchemaRegistryClient("http://127.0.0.1:9")  # never contacted below
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    serializer = AvroSerializer(registry, schema)
    assert serializer(None) is None  # a tombstone stays one
    assert serializer.record_name == "R"
    with pytest.raises(ConfigurationError, match="needs the topic"):
        serializer({"a": 1})  # no topic for the topic name strategy
    with pytest.raises(SerializationError, match="magic byte"):
        AvroDeserializer(registry)(b"\x07not framed")
