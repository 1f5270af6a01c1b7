"""Schema formats: parse a schema text (with its resolved references) into a ``ParsedSchema``
that knows its canonical text and whether it can read data written with another version.

``parse_schema(schema_type, text, references)`` picks the format; each raises
``InvalidSchemaError`` naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from strom_registry.formats.base import ParsedSchema, ResolvedReference
from strom_registry.model import SchemaType

__all__ = ["ParsedSchema", "ResolvedReference", "parse_schema"]


def parse_schema(
    schema_type: SchemaType, text: str, references: Sequence[ResolvedReference] = ()
) -> ParsedSchema:
    """Parse ``text`` as ``schema_type``; ``references`` come dependencies first."""
    if schema_type is SchemaType.AVRO:
        from strom_registry.formats.avro import parse_avro

        return parse_avro(text, references)
    if schema_type is SchemaType.JSON:
        from strom_registry.formats.json_schema import parse_json_schema

        return parse_json_schema(text, references)
    from strom_registry.formats.protobuf import parse_protobuf

    return parse_protobuf(text, references)
