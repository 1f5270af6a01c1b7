"""Schema-registry framed Avro values as typed Spark columns (``valueFormat=avro``).

Reading: on the driver, the subject's schema (its latest version unless ``valueSchemaVersion``
names one) becomes the reader schema and the ``value`` column's type (a struct); in each task
every value is decoded with its writer's schema (fetched by id from the registry once per
process) and resolved to the reader schema, as Avro's schema evolution defines, then built into
one Arrow column. Writing: each row's ``value`` struct is encoded with the subject's schema (the
registered ``valueSchema`` when given, else the latest version) and framed with its id.

Avro to Spark: record -> struct, string/enum/uuid -> string, bytes/fixed -> binary,
int -> int, long -> long, float -> float, double -> double, boolean -> boolean,
array -> array, map -> map<string, ...>, a union of null and one type -> that type (nullable),
date -> date, timestamp-millis/-micros -> timestamp, decimal -> decimal. Other unions have no
Spark type: the query fails at planning, naming the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from strom.serde import AvroSerializer, SchemaRegistryClient, SerializationError
from strom.serde.avro import AvroDeserializer

__all__ = [
    "AvroValueFormat",
    "arrow_type_of",
    "decode_values",
    "encode_values",
    "resolve_value_format",
]

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class AvroValueFormat:
    """What tasks need, resolved on the driver: the registry, the subject, its schema."""

    registry_url: str
    subject: str
    schema: str
    schema_id: int
    #: HTTP Basic ``user:password`` and the CA file of a secured registry.
    user_info: str | None = None
    cafile: str | None = None

    def registry(self) -> SchemaRegistryClient:
        """A client of the registry (its credentials included)."""
        return registry_client(self.registry_url, self.user_info, self.cafile)

    @property
    def value_type(self) -> pa.DataType:
        return arrow_type_of(json.loads(self.schema))


def registry_client(
    url: str, user_info: str | None = None, cafile: str | None = None
) -> SchemaRegistryClient:
    return SchemaRegistryClient(url, basic_auth_user_info=user_info, ssl_cafile=cafile)


def resolve_value_format(registry_url: str, subject: str, *, version: str = "latest",
                         register: str | None = None, user_info: str | None = None,
                         cafile: str | None = None) -> AvroValueFormat:  # fmt: skip
    """The subject's schema (``register``: register this one first and use it)."""
    registry = registry_client(registry_url, user_info, cafile)
    try:
        if register is not None:
            schema_id = registry.register(subject, register)
            found = registry.schema(schema_id)
        else:
            found = registry.version(subject, version)
    finally:
        registry.close()
    if found.schema_type != "AVRO":
        raise ValueError(f"subject {subject!r} holds a {found.schema_type} schema, not Avro")
    if found.references:
        raise ValueError(f"subject {subject!r}: schemas with references are not supported here")
    value_format = AvroValueFormat(
        registry_url, subject, found.schema, found.schema_id, user_info, cafile
    )
    value_format.value_type  # noqa: B018 - fails now, on the driver, for a type Spark lacks
    return value_format


def arrow_type_of(
    schema: Any, names: dict[str, Any] | None = None, where: str = "value", namespace: str = ""
) -> pa.DataType:
    """The Arrow type (and so the Spark type) of an Avro schema's JSON; ``namespace`` is the
    enclosing one (named types inherit it)."""
    names = {} if names is None else names
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        for candidate in (schema, f"{namespace}.{schema}" if namespace else schema):
            if candidate in names:
                return names[candidate]
        raise ValueError(f"{where}: unknown Avro type {schema!r}")
    if isinstance(schema, list):
        others = [s for s in schema if s != "null"]
        if len(others) != 1:
            raise ValueError(
                f"{where}: the union {json.dumps(schema)} has no Spark type (only a union of "
                "null and one type does)"
            )
        return arrow_type_of(others[0], names, where, namespace)
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "date" and kind == "int":
        return pa.date32()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return _TIMESTAMP
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    if kind in ("record", "error"):
        fullname = _fullname(schema, namespace)
        inner = fullname.rpartition(".")[0]
        fields = [
            pa.field(f["name"], arrow_type_of(f["type"], names, f"{where}.{f['name']}", inner))
            for f in schema["fields"]
        ]
        found = names[fullname] = pa.struct(fields)
        return found
    if kind in ("enum", "fixed"):
        found = names[_fullname(schema, namespace)] = pa.string() if kind == "enum" else pa.binary()
        return found
    if kind == "array":
        return pa.list_(arrow_type_of(schema["items"], names, f"{where}[]", namespace))
    if kind == "map":
        return pa.map_(
            pa.string(), arrow_type_of(schema["values"], names, f"{where}{{}}", namespace)
        )
    return arrow_type_of(kind, names, where, namespace)


def _fullname(schema: dict[str, Any], namespace: str) -> str:
    name = str(schema["name"])
    if "." in name:
        return name
    space = schema.get("namespace", namespace)
    return f"{space}.{name}" if space else name


# --- in the tasks ------------------------------------------------------------------------

# Per format (the registry's credentials included: a task never uses another job's).
_DECODERS: dict[AvroValueFormat, AvroDeserializer] = {}
_ENCODERS: dict[AvroValueFormat, AvroSerializer] = {}


def _decoder(value_format: AvroValueFormat) -> AvroDeserializer:
    found = _DECODERS.get(value_format)
    if found is None:
        found = _DECODERS[value_format] = AvroDeserializer(
            value_format.registry(), value_format.schema
        )
    return found


def decode_values(batch: pa.RecordBatch, value_format: AvroValueFormat) -> pa.RecordBatch:
    """``batch`` with its binary ``value`` column decoded into the reader schema's struct."""
    decode = _decoder(value_format)
    index = batch.schema.get_field_index("value")
    raw = batch.column(index).to_pylist()
    try:
        values = [None if v is None else decode(v) for v in raw]
    except SerializationError as exc:
        raise ValueError(f"valueFormat=avro: {exc}") from None
    column = pa.array(values, value_format.value_type)
    schema = batch.schema.set(index, pa.field("value", value_format.value_type))
    arrays = [column if i == index else batch.column(i) for i in range(batch.num_columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _encoder(value_format: AvroValueFormat) -> AvroSerializer:
    found = _ENCODERS.get(value_format)
    if found is None:
        subject = value_format.subject
        found = _ENCODERS[value_format] = AvroSerializer(
            value_format.registry(), value_format.schema,
            subject_name_strategy=lambda _topic, _record, _is_key: subject, auto_register=False,
        )  # fmt: skip
    return found


def encode_values(batch: pa.RecordBatch, value_format: AvroValueFormat) -> pa.RecordBatch:
    """``batch`` with its struct ``value`` column encoded as framed Avro (binary)."""
    encode = _encoder(value_format)
    index = batch.schema.get_field_index("value")
    try:
        values = [None if v is None else encode(v) for v in batch.column(index).to_pylist()]
    except SerializationError as exc:
        raise ValueError(
            f"valueFormat=avro: a value does not match subject {value_format.subject!r}'s "
            f"schema {value_format.schema_id}: {exc}"
        ) from None
    schema = batch.schema.set(index, pa.field("value", pa.binary()))
    arrays = [
        pa.array(values, pa.binary()) if i == index else batch.column(i)
        for i in range(batch.num_columns)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
