"""Avro values in the Confluent wire format, encoded and decoded by ``fastavro``.

``AvroSerializer`` keeps the parsed schema and, per topic, the 5-byte header of its schema
id: after the first value of a topic a call is one ``schemaless_writer`` into a buffer
holding the header. ``AvroDeserializer`` parses each writer schema once (by id) and decodes
with it, resolved against the reader schema when one is given (Avro's schema evolution).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from io import BytesIO
from typing import Any

from strom.errors import ConfigurationError
from strom.serde.naming import SubjectNameStrategy, topic_name_strategy
from strom.serde.registry_client import RegisteredSchema, SchemaReference, SchemaRegistryClient
from strom.serde.wire import HEADER, MAGIC_BYTE, SerializationError, header

__all__ = ["AvroDeserializer", "AvroSerializer"]


def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError:
        raise ConfigurationError(
            "Avro serialization needs fastavro: pip install 'strom[avro]'"
        ) from None
    return fastavro


def _parse(registry: SchemaRegistryClient, found: RegisteredSchema) -> Any:
    """``found`` parsed by fastavro, its references resolved through the registry."""
    fastavro = _fastavro()
    named: dict[str, Any] = {}
    for _name, ref in registry.referenced_schemas(found):
        fastavro.parse_schema(json.loads(ref.schema), named_schemas=named)
    try:
        return fastavro.parse_schema(json.loads(found.schema), named_schemas=named)
    except (ValueError, TypeError, KeyError) as exc:
        raise SerializationError(f"schema {found.schema_id} is not valid Avro: {exc}") from None


class AvroSerializer:
    """``value -> bytes`` for a producer's ``value_serializer`` (or ``key_serializer`` with
    ``is_key=True``); ``topic`` is needed by the topic-based name strategies."""

    def __init__(
        self,
        registry: SchemaRegistryClient,
        schema: str | Mapping[str, Any],
        *,
        topic: str | None = None,
        is_key: bool = False,
        subject_name_strategy: SubjectNameStrategy = topic_name_strategy,
        auto_register: bool = True,
        use_latest_version: bool = False,
        references: tuple[SchemaReference, ...] = (),
        to_dict: Callable[[Any], Any] | None = None,
    ) -> None:
        self.registry = registry
        self.topic = topic
        self.is_key = is_key
        self.subject_name_strategy = subject_name_strategy
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self.references = references
        self.to_dict = to_dict
        self.schema = schema if isinstance(schema, str) else json.dumps(schema)
        self._writer = _fastavro().schemaless_writer
        self._parsed = _parse(registry, RegisteredSchema(0, self.schema, "AVRO", references))
        parsed = self._parsed
        self.record_name: str | None = parsed.get("name") if isinstance(parsed, dict) else None
        self._headers: dict[str | None, tuple[bytes, Any]] = {}
        #: The header and schema for ``self.topic``, once resolved (the hot path's one lookup).
        self._default: tuple[bytes, Any] | None = None

    def subject(self, topic: str | None) -> str:
        return self.subject_name_strategy(topic, self.record_name, self.is_key)

    def _resolve(self, topic: str | None) -> tuple[bytes, Any]:
        subject = self.subject(topic)
        if self.use_latest_version:
            latest = self.registry.version(subject, "latest")
            found = (header(latest.schema_id), _parse(self.registry, latest))
        elif self.auto_register:
            schema_id = self.registry.register(subject, self.schema, "AVRO", self.references)
            found = (header(schema_id), self._parsed)
        else:
            looked_up = self.registry.lookup(subject, self.schema, "AVRO", self.references)
            found = (header(looked_up.schema_id), self._parsed)
        self._headers[topic] = found
        if topic == self.topic:
            self._default = found
        return found

    def serialize(self, value: Any, topic: str | None = None) -> bytes | None:
        """The framed encoding of ``value`` for ``topic`` (None stays None: a tombstone)."""
        if value is None:
            return None
        topic = topic or self.topic
        prefix, parsed = self._headers.get(topic) or self._resolve(topic)
        if self.to_dict is not None:
            value = self.to_dict(value)
        out = BytesIO()
        out.write(prefix)
        try:
            self._writer(out, parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(f"value does not match the Avro schema: {exc}") from None
        return out.getvalue()

    def __call__(self, value: Any) -> bytes | None:
        """``serialize(value)`` for ``self.topic``, inlined: this is the per-record path."""
        if value is None:
            return None
        prefix, parsed = self._default or self._resolve(self.topic)
        if self.to_dict is not None:
            value = self.to_dict(value)
        out = BytesIO()
        out.write(prefix)
        try:
            self._writer(out, parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(f"value does not match the Avro schema: {exc}") from None
        return out.getvalue()


class AvroDeserializer:
    """``bytes -> value`` for a consumer's ``value_deserializer``: any framed Avro value, read
    with its writer's schema, resolved to ``reader_schema`` when given."""

    def __init__(
        self,
        registry: SchemaRegistryClient,
        reader_schema: str | Mapping[str, Any] | None = None,
        *,
        from_dict: Callable[[Any], Any] | None = None,
    ) -> None:
        self.registry = registry
        self.from_dict = from_dict
        fastavro = _fastavro()
        self._reader_fn = fastavro.schemaless_reader
        self._reader = None
        if reader_schema is not None:
            text = reader_schema if isinstance(reader_schema, str) else json.dumps(reader_schema)
            self._reader = fastavro.parse_schema(json.loads(text))
        self._writers: dict[int, Any] = {}

    def writer_schema(self, schema_id: int) -> Any:
        found = self._writers.get(schema_id)
        if found is None:
            registered = self.registry.schema(schema_id)
            if registered.schema_type != "AVRO":
                raise SerializationError(
                    f"schema {schema_id} is {registered.schema_type}, not Avro"
                )
            found = self._writers[schema_id] = _parse(self.registry, registered)
        return found

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            magic, schema_id = HEADER.unpack_from(data)
        except struct.error:
            magic = -1
        if magic != MAGIC_BYTE:
            raise SerializationError(
                "not a schema-registry framed value (expected magic byte 0 and a schema id)"
            )
        writer = self._writers.get(schema_id) or self.writer_schema(schema_id)
        stream = BytesIO(data)
        stream.seek(5)
        try:
            value = self._reader_fn(stream, writer, self._reader)
        except (ValueError, TypeError, EOFError, StopIteration, IndexError) as exc:
            raise SerializationError(
                f"value does not decode with schema {schema_id}: {exc}"
            ) from None
        return value if self.from_dict is None else self.from_dict(value)

    def __call__(self, data: bytes) -> Any:
        return self.deserialize(data)
