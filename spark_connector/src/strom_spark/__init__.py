"""Strom's connector for Apache Spark: the PySpark data source ``strom``.

    import strom_spark
    strom_spark.register(spark)
    df = (spark.read.format("strom")
          .option("strom.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

Batch and streaming reads with the schema and options of Spark's Kafka source, batch and
streaming writes; ``docs/spark.md`` has the details.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom_spark.offsets import DataLossError
from strom_spark.source import StromDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DataLossError", "StromDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("strom")`` available in ``spark`` (once per session)."""
    spark.dataSource.register(StromDataSource)
