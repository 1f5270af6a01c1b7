"""JSON Schema, checked against its meta-schema with the ``jsonschema`` package.

Compatibility is structural, the rules Confluent documents for the common cases: a reader
accepts what a writer produced when its types include the writer's (``integer`` within
``number``), it requires no property the writer did not, it keeps the properties of a closed
writer (``additionalProperties: false``) and its enums include the writer's values; objects,
arrays and ``$ref``-free subschemas are compared recursively. Conditional keywords (``oneOf``,
``if``...) are compared as a whole: a change to them is reported as incompatible.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from strom_registry.errors import InvalidSchemaError
from strom_registry.formats.base import ParsedSchema, ResolvedReference
from strom_registry.model import SchemaType

__all__ = ["JsonSchema", "parse_json_schema"]

_COMBINATORS = ("oneOf", "anyOf", "allOf", "not", "if", "then", "else", "$ref")


class JsonSchema(ParsedSchema):
    schema_type = SchemaType.JSON

    def __init__(self, canonical: str, document: Any) -> None:
        super().__init__(canonical)
        self.document = document

    def read_problems(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"cannot read {writer.schema_type} data with a JSON schema"]
        problems: list[str] = []
        _compare(self.document, writer.document, "#", problems)
        return problems


def _types(schema: Any) -> set[str] | None:
    """The set of JSON types a schema allows; None for any."""
    if schema is True or not isinstance(schema, dict) or "type" not in schema:
        return None
    found = schema["type"]
    return set(found) if isinstance(found, list) else {found}


def _compare(reader: Any, writer: Any, path: str, problems: list[str]) -> None:
    if reader is True or reader in ({}, writer):
        return
    if reader is False:
        problems.append(f"{path}: the reader accepts nothing")
        return
    if writer is True or writer == {}:
        problems.append(f"{path}: the writer allowed any value, the reader restricts it")
        return
    if writer is False or not isinstance(reader, dict) or not isinstance(writer, dict):
        return
    for keyword in _COMBINATORS:
        if reader.get(keyword) != writer.get(keyword):
            problems.append(f"{path}: '{keyword}' changed")
    reader_types, writer_types = _types(reader), _types(writer)
    if reader_types is not None:
        if writer_types is None:
            problems.append(
                f"{path}: the writer allowed any type, the reader {sorted(reader_types)}"
            )
        else:
            widened = reader_types | ({"integer"} if "number" in reader_types else set())
            missing = writer_types - widened
            if missing:
                problems.append(f"{path}: type {sorted(missing)} no longer allowed")
    if "enum" in reader:
        lost = [v for v in writer.get("enum", [None]) if v not in reader["enum"]]
        if "enum" not in writer or lost:
            problems.append(f"{path}: enum values {lost or 'any'} no longer allowed")
    _compare_object(reader, writer, path, problems)
    if "items" in reader and "items" in writer:
        _compare(reader["items"], writer["items"], f"{path}/items", problems)
    elif "items" in reader:
        _compare(reader["items"], True, f"{path}/items", problems)


def _compare_object(reader: dict[str, Any], writer: dict[str, Any], path: str,
                    problems: list[str]) -> None:  # fmt: skip
    added = set(reader.get("required", [])) - set(writer.get("required", []))
    if added:
        problems.append(f"{path}: required properties {sorted(added)} added")
    reader_props = reader.get("properties", {})
    writer_props = writer.get("properties", {})
    writer_closed = writer.get("additionalProperties") is False
    reader_extra = reader.get("additionalProperties", True)
    for name, writer_prop in writer_props.items():
        if name in reader_props:
            _compare(reader_props[name], writer_prop, f"{path}/properties/{name}", problems)
        elif reader_extra is False:
            problems.append(f"{path}: property '{name}' removed from a closed content model")
        elif isinstance(reader_extra, dict):
            _compare(reader_extra, writer_prop, f"{path}/properties/{name}", problems)
    for name, reader_prop in reader_props.items():
        if name not in writer_props and not writer_closed:
            extra = writer.get("additionalProperties", True)
            _compare(reader_prop, extra, f"{path}/properties/{name}", problems)


def _load(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSchemaError(f"Invalid JSON schema {what}: not JSON ({exc})") from None


def parse_json_schema(text: str, references: Sequence[ResolvedReference] = ()) -> JsonSchema:
    """Parse a JSON Schema document and check it against its meta-schema (draft 7 unless
    ``$schema`` names another)."""
    document = _load(text, "text")
    for ref in references:
        _load(ref.text, f"reference {ref.name!r}")
    if not isinstance(document, (dict, bool)):
        raise InvalidSchemaError("Invalid JSON schema: expected an object or a boolean")
    default = jsonschema.Draft7Validator
    validator = jsonschema.validators.validator_for(document, default=default)
    try:
        validator.check_schema(document)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidSchemaError(f"Invalid JSON schema: {exc.message}") from None
    canonical = json.dumps(document, separators=(",", ":"), sort_keys=True)
    return JsonSchema(canonical, document)
