"""The writer's schema check, which runs on the driver before any task writes."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from strom_spark.options import parse_sink_options
from strom_spark.writer import check_sink_schema

WITH_TOPIC = parse_sink_options({"strom.bootstrap.servers": "g:1", "topic": "out"})
NO_TOPIC = parse_sink_options({"strom.bootstrap.servers": "g:1"})


def schema(**columns) -> StructType:  # type: ignore[no-untyped-def]
    return StructType([StructField(name, kind) for name, kind in columns.items()])


def headers(value_type) -> ArrayType:  # type: ignore[no-untyped-def]
    return ArrayType(
        StructType([StructField("key", StringType()), StructField("value", value_type)])
    )


def test_accepted_schemas() -> None:
    check_sink_schema(schema(value=BinaryType()), WITH_TOPIC)
    check_sink_schema(schema(value=StringType(), key=StringType(), topic=StringType()), NO_TOPIC)
    check_sink_schema(
        schema(
            value=BinaryType(),
            key=BinaryType(),
            partition=IntegerType(),
            headers=headers(BinaryType()),
            extra=LongType(),
        ),
        WITH_TOPIC,
    )
    check_sink_schema(schema(value=BinaryType(), headers=headers(StringType())), WITH_TOPIC)


@pytest.mark.parametrize(
    ("columns", "options", "message"),
    [
        ({"key": BinaryType()}, WITH_TOPIC, "a column named value"),
        ({"value": IntegerType()}, WITH_TOPIC, "column value must be binary or string"),
        ({"value": BinaryType(), "key": LongType()}, WITH_TOPIC, "column key must be binary or"),
        ({"value": BinaryType()}, NO_TOPIC, "a column named topic, or the option topic"),
        ({"value": BinaryType(), "topic": BinaryType()}, NO_TOPIC, "column topic must be string"),
        ({"value": BinaryType(), "partition": LongType()}, WITH_TOPIC, "got bigint"),
        ({"value": BinaryType(), "headers": StringType()}, WITH_TOPIC, "column headers must be"),
        (
            {
                "value": BinaryType(),
                "headers": ArrayType(StructType([StructField("k", StringType())])),
            },
            WITH_TOPIC,
            "array<struct<key: string, value: binary>>",
        ),
    ],
)
def test_rejected_schemas_name_the_column(columns, options, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message.replace("<", ".").replace(">", ".")):
        check_sink_schema(schema(**columns), options)
