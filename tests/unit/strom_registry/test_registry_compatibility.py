"""The compatibility matrix per level, for Avro, JSON Schema and Protobuf (no network)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from strom_registry.compatibility import compatibility_problems
from strom_registry.errors import InvalidSchemaError
from strom_registry.formats import parse_schema
from strom_registry.model import COMPATIBILITY_LEVELS, SchemaType


def avro(*fields: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": list(fields)})


A = {"name": "a", "type": "int"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}
B_REQUIRED = {"name": "b", "type": "string"}
A_STRING = {"name": "a", "type": "string"}
A_LONG = {"name": "a", "type": "long"}

V1 = avro(A)
ADD_WITH_DEFAULT = avro(A, B_DEFAULT)
ADD_WITHOUT_DEFAULT = avro(A, B_REQUIRED)
CHANGE_TYPE = avro(A_STRING)
PROMOTE = avro(A_LONG)

# (previous, new) -> the levels (non-transitive) that accept the change.
MATRIX = {
    "add a field with a default": (V1, ADD_WITH_DEFAULT, {"BACKWARD", "FORWARD", "FULL"}),
    "add a field without a default": (V1, ADD_WITHOUT_DEFAULT, {"FORWARD"}),
    "remove a field with a default": (ADD_WITH_DEFAULT, V1, {"BACKWARD", "FORWARD", "FULL"}),
    "remove a field without a default": (ADD_WITHOUT_DEFAULT, V1, {"BACKWARD"}),
    "change a type": (V1, CHANGE_TYPE, set()),
    "promote int to long": (V1, PROMOTE, {"BACKWARD"}),
}


def check(level: str, previous: list[str], new: str) -> list[str]:
    parsed = [parse_schema(SchemaType.AVRO, text) for text in previous]
    return compatibility_problems(level, parse_schema(SchemaType.AVRO, new), parsed)


@pytest.mark.parametrize("level", COMPATIBILITY_LEVELS)
@pytest.mark.parametrize("change", sorted(MATRIX))
def test_avro_matrix(level: str, change: str) -> None:
    previous, new, accepted = MATRIX[change]
    base = level.removesuffix("_TRANSITIVE")
    expected_ok = level == "NONE" or base in accepted
    assert (not check(level, [previous], new)) == expected_ok


def test_transitive_levels_check_every_earlier_version() -> None:
    # v1 -> v2 drops b (which had no default) ... v3 adds b back as an int: compatible with v2
    # alone, not with v1 under BACKWARD_TRANSITIVE (v1's b is a string).
    v1 = avro(A, B_REQUIRED)
    v2 = avro(A)
    v3 = avro(A, {"name": "b", "type": "int", "default": 0})
    assert check("BACKWARD", [v1, v2], v3) == []
    problems = check("BACKWARD_TRANSITIVE", [v1, v2], v3)
    assert problems and "type" in problems[0]
    assert check("FORWARD", [v1, v2], v3) == []
    assert check("FULL_TRANSITIVE", [v1, v2], v3)


def test_avro_canonical_text_ignores_layout() -> None:
    spaced = '{ "type" : "record", "name": "R",\n "fields": [ {"type": "int", "name": "a"} ] }'
    assert (
        parse_schema(SchemaType.AVRO, spaced).canonical
        == parse_schema(SchemaType.AVRO, V1).canonical
    )


@pytest.mark.parametrize(
    ("schema_type", "text"),
    [
        (SchemaType.AVRO, "{not json"),
        (SchemaType.AVRO, '{"type": "record", "name": "X"}'),
        (SchemaType.AVRO, '{"type": "nosuchtype"}'),
        (SchemaType.JSON, '{"type": 12}'),
        (SchemaType.JSON, "[1, 2]"),
        (SchemaType.PROTOBUF, "message {"),
    ],
)
def test_invalid_schemas_are_rejected(schema_type: SchemaType, text: str) -> None:
    with pytest.raises(InvalidSchemaError) as caught:
        parse_schema(schema_type, text)
    assert (caught.value.status, caught.value.error_code) == (422, 42201)


def json_schema(
    properties: dict[str, object], required: Sequence[str] = (), closed: bool = True
) -> str:
    return json.dumps(
        {"type": "object", "properties": properties, "required": list(required),
         "additionalProperties": not closed}
    )  # fmt: skip


def json_check(level: str, old: str, new: str) -> list[str]:
    return compatibility_problems(
        level, parse_schema(SchemaType.JSON, new), [parse_schema(SchemaType.JSON, old)]
    )


def test_json_schema_rules() -> None:
    base = json_schema({"a": {"type": "integer"}}, ["a"])
    optional_b = json_schema({"a": {"type": "integer"}, "b": {"type": "string"}}, ["a"])
    required_b = json_schema({"a": {"type": "integer"}, "b": {"type": "string"}}, ["a", "b"])
    wider = json_schema({"a": {"type": "number"}}, ["a"])
    narrower_enum = json_schema({"a": {"type": "integer", "enum": [1]}}, ["a"])
    # Adding an optional property to a closed model: old data never has it.
    assert json_check("BACKWARD", base, optional_b) == []
    assert json_check("BACKWARD", base, required_b)  # new reader requires what old data lacks
    assert json_check("BACKWARD", base, wider) == []  # integer within number
    assert json_check("FORWARD", base, wider)  # old reader cannot take a non-integer number
    assert json_check("BACKWARD", base, narrower_enum)
    assert json_check("NONE", base, narrower_enum) == []


def proto(body: str, package: str = "p") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}'


def test_protobuf_rules() -> None:
    v1 = proto("message M { string a = 1; int32 b = 2; }")
    add_field = proto("message M { string a = 1; int32 b = 2; bool c = 3; }")
    remove_field = proto("message M { string a = 1; }")
    same_wire = proto("message M { bytes a = 1; int64 b = 2; }")
    change_type = proto("message M { double a = 1; int32 b = 2; }")
    rename_message = proto("message N { string a = 1; int32 b = 2; }")

    def problems(old: str, new: str, level: str = "FULL") -> list[str]:
        parsed = parse_schema(SchemaType.PROTOBUF, new)
        return compatibility_problems(level, parsed, [parse_schema(SchemaType.PROTOBUF, old)])

    assert problems(v1, add_field) == []
    assert problems(v1, remove_field) == []
    assert problems(v1, same_wire) == []
    assert any("type changed" in p for p in problems(v1, change_type))
    assert any("message 'M' removed" in p for p in problems(v1, rename_message, "BACKWARD"))
    assert any("package" in p for p in problems(v1, proto("message M { string a = 1; }", "q")))


def test_protobuf_descriptors_as_confluent_registers_them() -> None:
    import base64

    from google.protobuf import descriptor_pb2

    def encoded(field_type: int) -> str:
        proto = descriptor_pb2.FileDescriptorProto(name="m.proto", package="p", syntax="proto3")
        message = proto.message_type.add(name="M")
        message.field.add(name="a", number=1, type=field_type, label=1)
        return base64.b64encode(proto.SerializeToString()).decode()

    kinds = descriptor_pb2.FieldDescriptorProto
    v1 = parse_schema(SchemaType.PROTOBUF, encoded(kinds.TYPE_STRING))
    assert v1.canonical == encoded(kinds.TYPE_STRING)
    same_wire = parse_schema(SchemaType.PROTOBUF, encoded(kinds.TYPE_BYTES))
    changed = parse_schema(SchemaType.PROTOBUF, encoded(kinds.TYPE_DOUBLE))
    assert compatibility_problems("FULL", same_wire, [v1]) == []
    assert any("type changed" in p for p in compatibility_problems("BACKWARD", changed, [v1]))
