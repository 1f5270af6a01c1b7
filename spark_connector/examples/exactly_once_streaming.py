"""Exactly-once streaming: JSON events read with read_committed, enriched, and written with
``deliveryGuarantee=exactly_once``. Each output record appears once for read_committed
readers, however often the driver is killed and the query restarted from its checkpoint.

    make up                                  # a local cluster, gateway on localhost:9092
    .venv/bin/python spark_connector/examples/exactly_once_streaming.py \\
        events enriched /tmp/eos-checkpoint enrich-events

The last argument is the ``transactionalIdPrefix``: it names the query in Strom (keep it with
the checkpoint; a new checkpoint needs a new prefix). ``--available-now`` processes what is
there and stops; ``--max-records N`` caps each micro-batch. Events are JSON values such as
``{"user": "ada", "kind": "click", "amount": 1.5}``; each output value is the event with its
amount in cents and where it came from (``"src": "partition:offset"``), keyed by user.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

import strom_spark

EVENT = "user string, kind string, amount double"


def enrich(raw: DataFrame) -> DataFrame:
    """The source's rows as (key, value) records: a pure function of each input record."""
    event = F.from_json(F.col("value").cast("string"), EVENT)
    return raw.select(
        event.alias("e"),
        F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string")).alias(
            "src"
        ),
    ).select(
        F.col("e.user").alias("key"),
        F.to_json(
            F.struct(
                "e.user",
                "e.kind",
                "e.amount",
                F.round(F.col("e.amount") * 100).cast("long").alias("amount_cents"),
                "src",
            )
        ).alias("value"),
    )


def start(  # noqa: PLR0917 - an example's knobs
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    prefix: str,
    *,
    available_now: bool = False,
    max_records: int = 10_000,
) -> StreamingQuery:
    raw = (
        spark.readStream.format("strom")
        .option("strom.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")  # for a new query; a restart uses the checkpoint
        .option("kafka.isolation.level", "read_committed")  # committed input only
        .option("maxOffsetsPerTrigger", str(max_records))
        .load()
    )
    writer = (
        enrich(raw)
        .writeStream.format("strom")
        .option("strom.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", prefix)  # stable: it names this query in Strom
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="2 seconds")
    return writer.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("sink")
    parser.add_argument("checkpoint")
    parser.add_argument("prefix", help="transactionalIdPrefix: one per query, kept across restarts")
    parser.add_argument("--available-now", action="store_true", help="process what is there")
    parser.add_argument("--max-records", type=int, default=10_000, help="per micro-batch")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need strom_spark too
    spark = (
        SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName("strom-exactly-once")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    strom_spark.register(spark)
    bootstrap = os.environ.get("STROM_BOOTSTRAP", "localhost:9092")
    query = start(
        spark,
        bootstrap,
        args.source,
        args.sink,
        args.checkpoint,
        args.prefix,
        available_now=args.available_now,
        max_records=args.max_records,
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
