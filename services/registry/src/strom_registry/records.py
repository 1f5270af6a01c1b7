"""The records of the ``_schemas`` topic: JSON keys and values, compacted by key.

=================================================  ==========================================
key                                                value (null: a tombstone)
=================================================  ==========================================
{"keytype":"SCHEMA","subject":s,"version":v,       {"subject","version","id","schema",
"magic":1}                                         "schemaType","references","deleted"}
{"keytype":"CONFIG","subject":s or null,"magic":0} {"compatibilityLevel": level}
{"keytype":"MODE","subject":s or null,"magic":0}   {"mode": mode}
{"keytype":"ID_WATERMARK","magic":0}               {"id": the highest id ever given}
=================================================  ==========================================

A soft delete rewrites a version with ``deleted: true``; a permanent delete is a tombstone
(and first raises the id watermark, so a compacted log still knows the highest id given).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from strom_registry.model import Schema, SchemaReference, SchemaType, SubjectVersion

__all__ = [
    "ConfigKey",
    "ModeKey",
    "Record",
    "SchemaKey",
    "WatermarkKey",
    "config_record",
    "decode_key",
    "mode_record",
    "schema_record",
    "schema_tombstone",
    "watermark_record",
]

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True)
class SchemaKey:
    subject: str
    version: int


@dataclass(frozen=True)
class ConfigKey:
    subject: str | None


@dataclass(frozen=True)
class ModeKey:
    subject: str | None


@dataclass(frozen=True)
class WatermarkKey:
    pass


Key = SchemaKey | ConfigKey | ModeKey | WatermarkKey


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_record(entry: SubjectVersion, schema: Schema) -> Record:
    value: dict[str, Any] = {
        "subject": entry.subject,
        "version": entry.version,
        "id": entry.schema_id,
        "schema": schema.text,
        "deleted": entry.deleted,
    }
    if schema.schema_type is not SchemaType.AVRO:
        value["schemaType"] = schema.schema_type.value
    if schema.references:
        value["references"] = [r.to_json() for r in schema.references]
    return _schema_key(entry.subject, entry.version), _dump(value)


def schema_tombstone(subject: str, version: int) -> Record:
    return _schema_key(subject, version), None


def config_record(subject: str | None, level: str | None) -> Record:
    key = _dump({"keytype": "CONFIG", "subject": subject, "magic": 0})
    return key, None if level is None else _dump({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> Record:
    key = _dump({"keytype": "MODE", "subject": subject, "magic": 0})
    return key, None if mode is None else _dump({"mode": mode})


def watermark_record(max_id: int) -> Record:
    return _dump({"keytype": "ID_WATERMARK", "magic": 0}), _dump({"id": max_id})


def decode_key(raw: bytes) -> Key | None:
    """The key, or None for a key of a kind this registry does not know (skipped)."""
    data = json.loads(raw)
    kind = data.get("keytype")
    if kind == "SCHEMA":
        return SchemaKey(str(data["subject"]), int(data["version"]))
    if kind == "CONFIG":
        return ConfigKey(data.get("subject"))
    if kind == "MODE":
        return ModeKey(data.get("subject"))
    if kind == "ID_WATERMARK":
        return WatermarkKey()
    return None


def decode_schema_value(raw: bytes) -> tuple[SubjectVersion, Schema]:
    data = json.loads(raw)
    references = tuple(
        SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
        for r in data.get("references") or ()
    )
    schema = Schema(SchemaType(data.get("schemaType") or "AVRO"), str(data["schema"]), references)
    entry = SubjectVersion(
        str(data["subject"]), int(data["version"]), int(data["id"]), bool(data.get("deleted"))
    )
    return entry, schema


def decode_value(raw: bytes) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value
