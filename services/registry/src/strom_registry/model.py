"""The registry's value types: schema types, references, registered versions, levels, modes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "COMPATIBILITY_LEVELS",
    "DEFAULT_COMPATIBILITY",
    "DEFAULT_MODE",
    "MODES",
    "Schema",
    "SchemaReference",
    "SchemaType",
    "SubjectVersion",
]


class SchemaType(StrEnum):
    """Confluent's ``schemaType`` values (absent in a request means AVRO)."""

    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


#: Confluent's compatibility levels; BACKWARD is the default.
COMPATIBILITY_LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
DEFAULT_COMPATIBILITY = "BACKWARD"
#: Confluent's modes: READONLY refuses writes, IMPORT accepts given ids and versions.
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True)
class SchemaReference:
    """A named reference from one schema to a version of another subject."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema as stored: its type, canonical text and references (its identity)."""

    schema_type: SchemaType
    text: str
    references: tuple[SchemaReference, ...] = ()


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject: the global schema id it names, soft-deleted or not."""

    subject: str
    version: int
    schema_id: int
    deleted: bool = False
