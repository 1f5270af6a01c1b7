"""Avro schemas, parsed and checked with the Apache ``avro`` package.

Compatibility is Avro's schema resolution (the specification's reader/writer rules), as the
``avro`` package's ``ReaderWriterCompatibilityChecker`` implements it. The canonical text is
the parsed schema written back as compact JSON, with referenced named types by name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import avro.errors
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from avro.name import Names

from strom_registry.errors import InvalidSchemaError
from strom_registry.formats.base import ParsedSchema, ResolvedReference
from strom_registry.model import SchemaType

__all__ = ["AvroSchema", "parse_avro"]


class AvroSchema(ParsedSchema):
    schema_type = SchemaType.AVRO

    def __init__(self, canonical: str, parsed: avro.schema.Schema) -> None:
        super().__init__(canonical)
        self.parsed = parsed

    def read_problems(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"cannot read {writer.schema_type} data with an Avro schema"]
        result = ReaderWriterCompatibilityChecker().get_compatibility(self.parsed, writer.parsed)
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        kinds = ", ".join(sorted(kind.value for kind in result.incompatibilities))
        where = ", ".join(sorted(result.locations))
        what = "; ".join(sorted(str(m) for m in result.messages))
        return [f"{kinds or 'incompatible'} at {where or '/'}: {what}"]


def _load(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSchemaError(f"Invalid schema {what}: not JSON ({exc})") from None


def parse_avro(text: str, references: Sequence[ResolvedReference] = ()) -> AvroSchema:
    """Parse an Avro schema; ``references`` define named types it may use by name."""
    names = Names()
    for ref in references:
        try:
            avro.schema.make_avsc_object(_load(ref.text, f"reference {ref.name!r}"), names)
        except (avro.errors.AvroException, TypeError, ValueError) as exc:
            raise InvalidSchemaError(f"Invalid schema reference {ref.name!r}: {exc}") from None
    known = dict(names.names)
    try:
        parsed = avro.schema.make_avsc_object(_load(text, "text"), names)
    except (avro.errors.AvroException, TypeError, ValueError, AttributeError, KeyError) as exc:
        raise InvalidSchemaError(f"Invalid schema: {exc}") from None
    out = Names()
    out.names = dict(known)
    canonical = json.dumps(parsed.to_json(out), separators=(",", ":"))
    return AvroSchema(canonical, parsed)
