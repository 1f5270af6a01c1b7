"""The ``strom`` data source: schema, and which reader or writer each query gets."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from strom_spark.arrow import HEADERS_DDL, SCHEMA_DDL
from strom_spark.options import parse_sink_options, parse_source_options
from strom_spark.pushdown import in_pushdown_worker
from strom_spark.reader import StromBatchReader, StromPushdownReader, StromStreamReader
from strom_spark.writer import StromStreamWriter, StromWriter, check_sink_schema

__all__ = ["StromDataSource"]


class StromDataSource(DataSource):
    """Reads and writes Strom topics; options as Spark's Kafka source (docs/spark.md)."""

    @classmethod
    def name(cls) -> str:
        return "strom"

    def _include_headers(self) -> bool:
        value = {k.lower(): v for k, v in self.options.items()}.get("includeheaders", "false")
        return str(value).strip().lower() == "true"

    def schema(self) -> str:
        return SCHEMA_DDL + (", " + HEADERS_DDL if self._include_headers() else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source_options(self.options, streaming=False)
        if in_pushdown_worker():
            return StromPushdownReader(options)
        return StromBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StromStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        return StromWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink_options(self.options, streaming=True)
        check_sink_schema(schema, options)
        return StromStreamWriter(options)
