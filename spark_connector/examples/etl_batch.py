"""ETL with the strom data source: JSON events in, totals per user and kind out, to a topic
and to Parquet.

    make up                                  # a local cluster, gateway on localhost:9092
    .venv/bin/python spark_connector/examples/etl_batch.py events totals /tmp/totals.parquet

Events are JSON values such as ``{"user": "ada", "kind": "click", "amount": 1.5}``.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import strom_spark

EVENT = "user string, kind string, amount double"


def parse_events(raw: DataFrame) -> DataFrame:
    """The strom source's rows (value: binary JSON) as typed event columns."""
    return raw.select(F.from_json(F.col("value").cast("string"), EVENT).alias("e")).select("e.*")


def totals(events: DataFrame) -> DataFrame:
    return events.groupBy("user", "kind").agg(
        F.count("*").alias("events"), F.sum("amount").alias("amount")
    )


def as_records(df: DataFrame) -> DataFrame:
    """Rows as (key, value): the user as key, every column as one JSON value."""
    return df.select(F.col("user").alias("key"), F.to_json(F.struct(*df.columns)).alias("value"))


def run(spark: SparkSession, bootstrap: str, source: str, sink: str, parquet: str) -> DataFrame:
    raw = (
        spark.read.format("strom")
        .option("strom.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    result = totals(parse_events(raw)).cache()  # one read of the topic for both outputs
    result.write.mode("overwrite").parquet(parquet)
    (
        as_records(result)
        .write.format("strom")
        .mode("append")
        .option("strom.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .save()
    )
    return result


def main() -> None:
    source, sink, parquet = sys.argv[1:4]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need strom_spark too
    spark = SparkSession.builder.master("local[2]").appName("strom-etl").getOrCreate()
    strom_spark.register(spark)
    run(spark, os.environ.get("STROM_BOOTSTRAP", "localhost:9092"), source, sink, parquet).show()
    spark.stop()


if __name__ == "__main__":
    main()
