"""Protobuf messages in the Confluent wire format.

After the 5-byte header comes the message's index path in its file (Confluent's "message
indexes": zigzag varints, a count then the indexes; the first top-level message is the single
byte 0), then the serialized message. The schema registered is the message's file as a
base64-encoded ``FileDescriptorProto``, as Confluent's serializers register it; files it imports
are not registered as references (a message whose file imports others is refused unless they
are already registered and passed as ``references``).
"""

from __future__ import annotations

import base64
from typing import Any

from strom.errors import ConfigurationError
from strom.serde.naming import SubjectNameStrategy, topic_name_strategy
from strom.serde.registry_client import SchemaReference, SchemaRegistryClient
from strom.serde.wire import HEADER, MAGIC_BYTE, SerializationError, header

__all__ = ["ProtobufDeserializer", "ProtobufSerializer", "message_indexes"]


def _zigzag(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_zigzag(data: bytes, position: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if position >= len(data):
            raise SerializationError("truncated message indexes")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7


def message_indexes(descriptor: Any) -> list[int]:
    """The path of a message descriptor in its file: top-level index, then nested indexes."""
    path = []
    while descriptor.containing_type is not None:
        parent = descriptor.containing_type
        path.append(list(parent.nested_types).index(descriptor))
        descriptor = parent
    path.append(list(descriptor.file.message_types_by_name.values()).index(descriptor))
    return path[::-1]


def _encode_indexes(path: list[int]) -> bytes:
    if path == [0]:
        return b"\x00"
    return _zigzag(len(path)) + b"".join(_zigzag(i) for i in path)


class ProtobufSerializer:
    """``message -> bytes`` for messages of ``message_type`` (a generated protobuf class)."""

    def __init__(
        self,
        registry: SchemaRegistryClient,
        message_type: type,
        *,
        topic: str | None = None,
        is_key: bool = False,
        subject_name_strategy: SubjectNameStrategy = topic_name_strategy,
        auto_register: bool = True,
        references: tuple[SchemaReference, ...] = (),
    ) -> None:
        descriptor = getattr(message_type, "DESCRIPTOR", None)
        if descriptor is None or not hasattr(descriptor, "file"):
            raise ConfigurationError(f"{message_type!r} is not a generated protobuf message class")
        from google.protobuf import descriptor_pb2

        if descriptor.file.dependencies and not references:
            imports = ", ".join(d.name for d in descriptor.file.dependencies)
            raise ConfigurationError(
                f"{descriptor.file.name} imports {imports}: register them and pass references"
            )
        proto = descriptor_pb2.FileDescriptorProto()
        descriptor.file.CopyToProto(proto)
        self.schema = base64.standard_b64encode(proto.SerializeToString()).decode("ascii")
        self.registry = registry
        self.message_type = message_type
        self.record_name: str = descriptor.full_name
        self.topic, self.is_key = topic, is_key
        self.subject_name_strategy = subject_name_strategy
        self.auto_register = auto_register
        self.references = references
        self._indexes = _encode_indexes(message_indexes(descriptor))
        self._prefixes: dict[str | None, bytes] = {}

    def _prefix(self, topic: str | None) -> bytes:
        found = self._prefixes.get(topic)
        if found is None:
            subject = self.subject_name_strategy(topic, self.record_name, self.is_key)
            if self.auto_register:
                schema_id = self.registry.register(
                    subject, self.schema, "PROTOBUF", self.references
                )
            else:
                schema_id = self.registry.lookup(
                    subject, self.schema, "PROTOBUF", self.references
                ).schema_id
            found = self._prefixes[topic] = header(schema_id) + self._indexes
        return found

    def serialize(self, message: Any, topic: str | None = None) -> bytes | None:
        if message is None:
            return None
        if not isinstance(message, self.message_type):
            raise SerializationError(
                f"expected a {self.record_name} message, got {type(message).__name__}"
            )
        payload: bytes = message.SerializeToString()  # type: ignore[attr-defined]
        return self._prefix(topic or self.topic) + payload

    def __call__(self, message: Any) -> bytes | None:
        return self.serialize(message)


class ProtobufDeserializer:
    """``bytes -> message``: a framed protobuf value parsed as ``message_type`` (the message
    indexes are read past; the writer's schema is not needed to parse)."""

    def __init__(self, message_type: type) -> None:
        self.message_type = message_type

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 6 or data[0] != MAGIC_BYTE:
            raise SerializationError("not a schema-registry framed protobuf value")
        HEADER.unpack_from(data)
        count, position = _read_zigzag(data, 5)
        for _ in range(count):
            _, position = _read_zigzag(data, position)
        message = self.message_type()
        try:
            message.ParseFromString(data[position:])
        except Exception as exc:  # google.protobuf's DecodeError and friends
            raise SerializationError(
                f"value is not a {self.message_type.__name__}: {exc}"
            ) from None
        return message

    def __call__(self, data: bytes) -> Any:
        return self.deserialize(data)
