"""Protobuf schemas (``.proto`` text), parsed with ``proto-schema-parser``.

Compatibility follows protobuf's wire rules, as Confluent checks them: fields may be added
and removed (unknown fields are skipped), but a message or enum that the writer had must stay,
a field number must keep a wire-compatible type (the varint group int32, int64, uint32,
uint64, bool; sint32/sint64; fixed32/sfixed32; fixed64/sfixed64; string/bytes; the same
message or enum otherwise) and its repeated-ness, a field may not move into or out of a
oneof, and the package and syntax stay. The canonical text is the schema text with its
line endings normalized and surrounding blank space removed.

A schema may also be a base64-encoded ``FileDescriptorProto``, as Confluent's Python
serializer registers them; it is checked by the same rules (its canonical text is the base64
text as given).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from strom_registry.errors import InvalidSchemaError
from strom_registry.formats.base import ParsedSchema, ResolvedReference
from strom_registry.model import SchemaType

__all__ = ["ProtobufSchema", "parse_protobuf"]

_WIRE_GROUPS = (
    {"int32", "int64", "uint32", "uint64", "bool"},
    {"sint32", "sint64"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
    {"string", "bytes"},
)


@dataclass(frozen=True)
class _Field:
    name: str
    type: str
    repeated: bool
    oneof: str | None


class _Raising(ErrorListener):  # type: ignore[misc]
    def syntaxError(  # noqa: PLR0917 - antlr's signature
        self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any
    ) -> None:
        raise InvalidSchemaError(f"Invalid protobuf schema: line {line}:{column}: {msg}")


def _quiet(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raising())


class ProtobufSchema(ParsedSchema):
    schema_type = SchemaType.PROTOBUF

    def __init__(self, canonical: str, file: ast.File | None = None) -> None:
        super().__init__(canonical)
        self.package = ""
        self.syntax = "proto2"
        self.messages: dict[str, dict[int, _Field]] = {}
        self.enums: set[str] = set()
        if file is not None:
            packages = (e.name for e in file.file_elements if isinstance(e, ast.Package))
            self.package = next(packages, "")
            self.syntax = file.syntax or "proto2"
            self._collect(file.file_elements, "")

    @classmethod
    def from_descriptor(
        cls, canonical: str, proto: descriptor_pb2.FileDescriptorProto
    ) -> ProtobufSchema:
        found = cls(canonical)
        found.package = proto.package
        found.syntax = proto.syntax or "proto2"
        found._collect_descriptors(proto.message_type, proto.enum_type, "")
        return found

    def _collect_descriptors(
        self, messages: Sequence[Any], enums: Sequence[Any], prefix: str
    ) -> None:
        self.enums.update(prefix + e.name for e in enums)
        for message in messages:
            name = prefix + message.name
            oneofs = [o.name for o in message.oneof_decl]
            self.messages[name] = {f.number: _descriptor_field(f, oneofs) for f in message.field}
            self._collect_descriptors(message.nested_type, message.enum_type, name + ".")

    def _collect(self, elements: Sequence[Any], prefix: str) -> None:
        for element in elements:
            if isinstance(element, ast.Message):
                name = prefix + element.name
                self.messages[name] = dict(_fields(element.elements, None))
                self._collect(element.elements, name + ".")
            elif isinstance(element, ast.Enum):
                self.enums.add(prefix + element.name)

    def read_problems(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"cannot read {writer.schema_type} data with a protobuf schema"]
        problems = []
        if writer.package != self.package:
            problems.append(f"package changed from '{writer.package}' to '{self.package}'")
        if writer.syntax != self.syntax:
            problems.append(f"syntax changed from {writer.syntax} to {self.syntax}")
        problems += [f"enum '{e}' removed" for e in sorted(writer.enums - self.enums)]
        for message, writer_fields in writer.messages.items():
            reader_fields = self.messages.get(message)
            if reader_fields is None:
                problems.append(f"message '{message}' removed")
                continue
            for number, old in writer_fields.items():
                new = reader_fields.get(number)
                if new is not None:
                    problems += _field_problems(message, number, old, new)
        return problems


def _descriptor_field(field: Any, oneofs: list[str]) -> _Field:
    kind = field.type_name.rsplit(".", 1)[-1] if field.type_name else (
        descriptor_pb2.FieldDescriptorProto.Type.Name(field.type).lower().removeprefix("type_")
    )  # fmt: skip
    repeated = field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    oneof = oneofs[field.oneof_index] if field.HasField("oneof_index") else None
    return _Field(field.name, kind, repeated, oneof)


def _field_problems(message: str, number: int, old: _Field, new: _Field) -> list[str]:
    where = f"{message} field {number}"
    problems = []
    if old.type != new.type and not any(
        old.type in group and new.type in group for group in _WIRE_GROUPS
    ):
        problems.append(f"{where}: type changed from {old.type} to {new.type}")
    if old.repeated != new.repeated:
        problems.append(f"{where}: repeated changed")
    if (old.oneof is None) != (new.oneof is None):
        problems.append(f"{where}: moved {'into' if new.oneof else 'out of'} a oneof")
    return problems


def _fields(elements: Sequence[Any], oneof: str | None) -> Iterator[tuple[int, _Field]]:
    for element in elements:
        if isinstance(element, ast.Field):
            repeated = element.cardinality == ast.FieldCardinality.REPEATED
            yield element.number, _Field(element.name, element.type, repeated, oneof)
        elif isinstance(element, ast.MapField):
            kind = f"map<{element.key_type},{element.value_type}>"
            yield element.number, _Field(element.name, kind, True, oneof)
        elif isinstance(element, ast.OneOf):
            yield from _fields(element.elements, element.name)


def _parse(text: str) -> ast.File:
    try:
        return Parser(setup_lexer=_quiet, setup_parser=_quiet).parse(text)
    except InvalidSchemaError:
        raise
    except Exception as exc:  # the parser's own failures on odd input
        raise InvalidSchemaError(f"Invalid protobuf schema: {exc}") from None


def _descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """``text`` as a base64-encoded FileDescriptorProto, or None when it is not one."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return proto


def parse_protobuf(text: str, references: Sequence[ResolvedReference] = ()) -> ProtobufSchema:
    """Parse ``.proto`` text (or a base64 FileDescriptorProto); ``references`` are the
    imported files (checked to parse)."""
    for ref in references:
        if _descriptor(ref.text) is None:
            _parse(ref.text)
    descriptor = _descriptor(text)
    if descriptor is not None:
        return ProtobufSchema.from_descriptor(text.strip(), descriptor)
    canonical = "\n".join(line.rstrip() for line in text.strip().splitlines())
    return ProtobufSchema(canonical, _parse(text))
