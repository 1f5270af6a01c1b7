"""valueFormat=avro without Spark or a registry: the options, and Avro types as Arrow/Spark
types (unsupported unions refused, naming the field)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from strom_spark.avro_values import arrow_type_of
from strom_spark.options import DEFAULT_REGISTRY_URL, parse_value_format


def test_value_format_options() -> None:
    assert parse_value_format({"subscribe": "t"}, sink=False) is None
    found = parse_value_format({"subscribe": "users", "valueFormat": "AVRO"}, sink=False)
    assert found is not None
    assert (found.registry_url, found.subject, found.version) == (
        DEFAULT_REGISTRY_URL, "users-value", "latest",
    )  # fmt: skip
    sink = parse_value_format(
        {"topic": "out", "valueFormat": "avro", "valueSchema": "{}"}, sink=True
    )
    assert sink is not None and (sink.subject, sink.register) == ("out-value", "{}")
    secured = parse_value_format(
        {"subscribe": "t", "valueFormat": "avro", "schemaRegistryUrl": "https://r:8081",
         "schemaRegistryUserInfo": "ann:pw:with:colons", "schemaRegistryCaFile": "ca.crt"},
        sink=False,
    )  # fmt: skip
    assert secured is not None
    assert (secured.user_info, secured.cafile) == ("ann:pw:with:colons", "ca.crt")
    for options, sink_side, message in [
        ({"valueFormat": "xml"}, False, "binary or avro"),
        ({"schemaRegistryUrl": "http://x"}, False, "only to valueFormat=avro"),
        ({"valueFormat": "avro", "subscribe": "a,b"}, False, "valueSubject is required"),
        ({"valueFormat": "avro", "subscribe": "a", "schemaRegistryUrl": "x"}, False, "http"),
        ({"valueFormat": "avro", "subscribe": "a", "valueSchemaVersion": "0"}, False, "version"),
        ({"valueFormat": "avro", "subscribe": "a", "valueSchema": "{}"}, False, "writes"),
        ({"valueFormat": "avro"}, True, "valueSubject is required"),
        (
            {"valueFormat": "avro", "subscribe": "a", "schemaRegistryUserInfo": "x"},
            False,
            "user:password",
        ),
        (
            {"valueFormat": "avro", "subscribe": "a", "schemaRegistryCaFile": "ca.crt"},
            False,
            "https",
        ),
        ({"schemaRegistryUserInfo": "u:p"}, False, "only to valueFormat=avro"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_value_format(options, sink=sink_side)


def test_avro_types_as_arrow_types() -> None:
    schema = {
        "type": "record",
        "name": "Outer",
        "namespace": "n",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": ["null", "string"]},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
            {"name": "other", "type": "Kind"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "int"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "amount",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
            },
            {
                "name": "inner",
                "type": {
                    "type": "record",
                    "name": "Inner",
                    "fields": [{"name": "x", "type": "float"}],
                },
            },
            {"name": "again", "type": "n.Inner"},
        ],
    }
    inner = pa.struct([("x", pa.float32())])
    assert arrow_type_of(schema) == pa.struct([
        ("id", pa.int64()), ("name", pa.string()), ("kind", pa.string()),
        ("other", pa.string()), ("tags", pa.list_(pa.string())),
        ("attrs", pa.map_(pa.string(), pa.int32())), ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")), ("amount", pa.decimal128(10, 2)),
        ("inner", inner), ("again", inner),
    ])  # fmt: skip
    bad = {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}
    with pytest.raises(ValueError, match=r"value\.u: the union"):
        arrow_type_of(bad)
