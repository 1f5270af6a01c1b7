"""The streaming variant of ``etl_batch.py``: each micro-batch of JSON events is totalled per
user and kind, and the totals go to a topic and to Parquet. The checkpoint directory keeps the
source offsets: a restarted query continues where it stopped.

    .venv/bin/python spark_connector/examples/etl_streaming.py events totals \\
        /tmp/totals.parquet /tmp/etl-checkpoint
"""

from __future__ import annotations

import os
import sys

from etl_batch import as_records, parse_events, totals
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

import strom_spark


def start(  # noqa: PLR0917 - an example's knobs
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    parquet: str,
    checkpoint: str,
    *,
    available_now: bool = False,
) -> StreamingQuery:
    raw = (
        spark.readStream.format("strom")
        .option("strom.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")  # for a new query; a restart uses the checkpoint
        .option("maxOffsetsPerTrigger", "100000")
        .load()
    )

    def write(batch: DataFrame, batch_id: int) -> None:
        result = totals(parse_events(batch)).withColumn("batch", F.lit(batch_id)).cache()
        result.write.mode("append").parquet(parquet)
        (
            as_records(result)
            .write.format("strom")
            .mode("append")
            .option("strom.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .save()
        )
        result.unpersist()

    writer = raw.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="5 seconds")
    return writer.start()


def main() -> None:
    source, sink, parquet, checkpoint = sys.argv[1:5]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.master("local[2]").appName("strom-etl-stream").getOrCreate()
    strom_spark.register(spark)
    bootstrap = os.environ.get("STROM_BOOTSTRAP", "localhost:9092")
    start(spark, bootstrap, source, sink, parquet, checkpoint).awaitTermination()


if __name__ == "__main__":
    main()
