"""The ``strom`` data source: schema, and which reader or writer each query gets."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from strom_spark.arrow import HEADERS_DDL, SCHEMA_DDL, arrow_schema
from strom_spark.avro_values import AvroValueFormat, resolve_value_format
from strom_spark.options import (
    SinkOptions,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
    parse_value_format,
)
from strom_spark.pushdown import in_pushdown_worker
from strom_spark.reader import StromBatchReader, StromPushdownReader, StromStreamReader
from strom_spark.writer import StromStreamWriter, StromWriter, check_sink_schema

__all__ = ["StromDataSource"]

Opts = TypeVar("Opts", SourceOptions, SinkOptions)


class StromDataSource(DataSource):
    """Reads and writes Strom topics; options as Spark's Kafka source (docs/spark.md)."""

    @classmethod
    def name(cls) -> str:
        return "strom"

    def _include_headers(self) -> bool:
        value = {k.lower(): v for k, v in self.options.items()}.get("includeheaders", "false")
        return str(value).strip().lower() == "true"

    def _value_format(self, *, sink: bool) -> AvroValueFormat | None:
        """``valueFormat=avro``: the subject's schema, fetched from the registry now."""
        wanted = parse_value_format(self.options, sink=sink)
        if wanted is None:
            return None
        return resolve_value_format(
            wanted.registry_url,
            wanted.subject,
            version=wanted.version,
            register=wanted.register,
            user_info=wanted.user_info,
            cafile=wanted.cafile,
        )

    def _with_format(self, options: Opts, *, sink: bool) -> Opts:
        value_format = self._value_format(sink=sink)
        return (
            options
            if value_format is None
            else dataclasses.replace(options, value_avro=value_format)
        )

    def schema(self) -> str | StructType:
        value_format = self._value_format(sink=False)
        if value_format is None:
            return SCHEMA_DDL + (", " + HEADERS_DDL if self._include_headers() else "")
        from pyspark.sql.pandas.types import from_arrow_schema

        base = arrow_schema(self._include_headers())
        typed = base.set(base.get_field_index("value"), base.field("value").with_type(
            value_format.value_type))  # fmt: skip
        return from_arrow_schema(typed)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = self._with_format(parse_source_options(self.options, streaming=False), sink=False)
        if in_pushdown_worker():
            return StromPushdownReader(options)
        return StromBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_source_options(self.options, streaming=True)
        return StromStreamReader(self._with_format(options, sink=False))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = self._with_format(parse_sink_options(self.options), sink=True)
        check_sink_schema(schema, options)
        return StromWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = self._with_format(parse_sink_options(self.options, streaming=True), sink=True)
        check_sink_schema(schema, options)
        return StromStreamWriter(options)
