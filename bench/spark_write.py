"""Benchmark of the Spark sink's delivery guarantees: ``exactly_once`` against
``at_least_once`` writing the same DataFrame, and what exactly-once adds to each micro-batch.

One real local cluster on loopback (``bench/replication.py``'s ``cluster_spec``), data in a
temporary directory, every process stopped at the end; Spark local[2] (the machine's 2 cores).

* batch writes: a cached DataFrame of 2,000,000 rows (``--quick``: 300,000) with 100-byte
  values in 8 partitions (8 tasks) is written with ``df.write.format("strom")`` to a new topic
  of 8 partitions, alternately with ``deliveryGuarantee=at_least_once`` and ``exactly_once``,
  3 rounds each (``--quick``: 2); the best wall time of each counts. Goal: exactly_once writes
  >= 0.8 as many rows/s as at_least_once (the ratio is the SUMMARY's ``ratio``).
* micro-batches: a topic of 4 partitions holding 20 micro-batches' worth of records (10,000 per
  batch; ``--quick``: 8 of 5,000) is copied by ``readStream`` -> ``writeStream`` with
  ``Trigger.AvailableNow`` once with each guarantee (its own checkpoint); the median of
  Spark's ``addBatch`` duration per micro-batch (tasks writing + the sink's commit) of each run,
  and their difference: what exactly-once adds per micro-batch end to end (each task's
  InitProducerId, staging, the driver's decision and orphan sweep).
* the decision alone: ``strom_spark.exactly_once.commit_micro_batch`` called in this process
  for 4 staged transactions of 100 records each (what the driver does after a micro-batch),
  30 times (``--quick``: 10); median and p90 milliseconds.

The machine is shared: its load during the run is reported. The last line is
``SUMMARY {json}``.

    .venv/bin/python bench/spark_write.py            # full run, a few minutes
    .venv/bin/python bench/spark_write.py --quick    # about a minute after Spark starts
"""

from __future__ import annotations

import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from benchkit import bench_arguments, print_summary, progress, work_dir
from spark import local_cluster, spark_session
from storage import machine_busy

from strom import Admin, NewTopic, Producer
from strom_spark.exactly_once import commit_micro_batch
from strom_spark.options import parse_sink_options
from strom_spark.writer import Written

TASKS = 8
VALUE_BYTES = 100
GOAL = 0.8
FULL = {"rows": 2_000_000, "rounds": 3, "batches": 20, "per_batch": 10_000, "decisions": 30}
QUICK = {"rows": 300_000, "rounds": 2, "batches": 8, "per_batch": 5_000, "decisions": 10}


def new_topic(gateway: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with Admin(gateway) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def sink_options(gateway: str, topic: str, guarantee: str, prefix: str) -> dict[str, str]:
    options = {
        "strom.bootstrap.servers": gateway,
        "topic": topic,
        "deliveryGuarantee": guarantee,
    }
    if guarantee == "exactly_once":
        options["transactionalIdPrefix"] = prefix
    return options


def batch_writes(spark: Any, gateway: str, rows: int, rounds: int) -> dict[str, list[float]]:
    from pyspark.sql import functions as F

    df = spark.range(0, rows, 1, numPartitions=TASKS).select(
        F.rpad(F.col("id").cast("string"), VALUE_BYTES, "x").alias("value")
    )
    df.cache()
    df.count()
    seconds: dict[str, list[float]] = {"at_least_once": [], "exactly_once": []}
    for i in range(rounds):
        for guarantee, runs in seconds.items():
            topic = new_topic(gateway, TASKS)
            options = sink_options(gateway, topic, guarantee, f"bench-{uuid.uuid4().hex[:6]}")
            start = time.perf_counter()
            df.write.format("strom").mode("append").options(**options).save()
            took = time.perf_counter() - start
            runs.append(took)
            progress(f"  round {i + 1} {guarantee}: {took:.2f} s ({rows / took:,.0f} rows/s)")
    df.unpersist()
    return seconds


def fill(gateway: str, topic: str, records: int) -> None:
    value = b"v" * VALUE_BYTES
    with Producer(gateway, linger_ms=5) as producer:
        for start in range(0, records, 10_000):
            producer.send_many(topic, [value] * min(10_000, records - start))
        producer.flush()


def micro_batches(
    spark: Any, gateway: str, workdir: Path, batches: int, per_batch: int
) -> dict[str, list[float]]:
    """``addBatch`` ms of every micro-batch of a topic-to-topic copy, per guarantee."""
    source = new_topic(gateway, 4)
    fill(gateway, source, batches * per_batch)
    durations: dict[str, list[float]] = {}
    for guarantee in ("at_least_once", "exactly_once"):
        sink = new_topic(gateway, 4)
        options = sink_options(gateway, sink, guarantee, f"bench-{uuid.uuid4().hex[:6]}")
        query = (
            spark.readStream.format("strom")
            .option("strom.bootstrap.servers", gateway)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(per_batch))
            .load()
            .select("key", "value")
            .writeStream.format("strom")
            .options(**options)
            .option("checkpointLocation", str(workdir / f"ckpt-{guarantee}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{guarantee} query failed: {query.exception()}")
        done = [p for p in query.recentProgress if p["numInputRows"]]
        if len(done) != batches:
            raise RuntimeError(f"{guarantee}: {len(done)} micro-batches, not {batches}")
        # The first micro-batch also starts Python workers: left out.
        durations[guarantee] = [float(p["durationMs"]["addBatch"]) for p in done[1:]]
        progress(f"  {guarantee}: addBatch median {statistics.median(durations[guarantee]):.0f} ms")
    return durations


def decisions(gateway: str, count: int) -> list[float]:
    """Milliseconds of the driver's work after a micro-batch of 4 staged transactions."""
    topic = new_topic(gateway, 4)
    prefix = f"bench-decide-{uuid.uuid4().hex[:6]}"
    options = parse_sink_options(
        sink_options(gateway, topic, "exactly_once", prefix), streaming=True
    )
    took = []
    for batch in range(count):
        messages = []
        for task in range(4):
            tid = f"{prefix}-{batch}-00000000-{task}-{batch * 4 + task}"
            with Producer(gateway, transactional_id=tid) as producer:
                producer.init_transactions()
                producer.begin_transaction()
                producer.send_many(topic, [b"x" * VALUE_BYTES] * 100)
                messages.append(Written(100, producer.prepare_transaction()))
        start = time.perf_counter()
        if not commit_micro_batch(options, batch, messages):
            raise RuntimeError(f"batch {batch} was not committed")
        took.append((time.perf_counter() - start) * 1000)
    return took


def run(sizes: dict[str, int], keep: bool) -> dict[str, Any]:
    summary: dict[str, Any] = {"rows": sizes["rows"], "tasks": TASKS, "value_bytes": VALUE_BYTES}
    busy0 = machine_busy()
    with work_dir("strom-bench-spark-write-", keep) as workdir:
        with local_cluster(workdir) as gateway:
            progress("Spark: starting local[2] ...")
            spark = spark_session(
                workdir, "strom-spark-write-bench", {"spark.sql.shuffle.partitions": "4"}
            )
            try:
                progress(f"batch writes of {sizes['rows']:,} rows ...")
                writes = batch_writes(spark, gateway, sizes["rows"], sizes["rounds"])
                progress(f"micro-batches: {sizes['batches']} of {sizes['per_batch']:,} ...")
                batches = micro_batches(
                    spark, gateway, workdir, sizes["batches"], sizes["per_batch"]
                )
            finally:
                spark.stop()
            progress(f"the driver's decision alone, {sizes['decisions']} times ...")
            decided = decisions(gateway, sizes["decisions"])
        busy1 = machine_busy()
        summary["machine_busy"] = (busy1[0] - busy0[0]) / max(1e-9, busy1[1] - busy0[1])
    rows = sizes["rows"]
    summary["write_s"] = writes
    rates = {g: rows / min(s) for g, s in writes.items()}
    summary["rows_per_s"] = rates
    summary["ratio"] = rates["exactly_once"] / rates["at_least_once"]
    summary["goal"] = GOAL
    summary["goal_met"] = summary["ratio"] >= GOAL
    summary["micro_batch_rows"] = sizes["per_batch"]
    medians = {g: statistics.median(ms) for g, ms in batches.items()}
    summary["add_batch_median_ms"] = medians
    summary["added_ms_per_micro_batch"] = medians["exactly_once"] - medians["at_least_once"]
    summary["decision_ms"] = {
        "median": statistics.median(decided),
        "p90": sorted(decided)[int(0.9 * (len(decided) - 1))],
    }
    report(summary)
    return summary


def report(s: dict[str, Any]) -> None:
    r = s["rows_per_s"]
    print(
        f"\n{s['rows']:,} rows of {VALUE_BYTES} bytes in {TASKS} tasks, Spark local[2]; "
        f"machine busy {s['machine_busy']:.0%} during the run"
    )
    head = f"{'write':16} {'best s':>8} {'rows/s':>11} {'vs at_least_once':>17}"
    print(head)
    print("-" * len(head))
    for guarantee in ("at_least_once", "exactly_once"):
        ratio = r[guarantee] / r["at_least_once"]
        print(
            f"{guarantee:16} {min(s['write_s'][guarantee]):8.2f} {r[guarantee]:11,.0f} "
            f"{ratio:16.2f}x"
        )
    print(f"goal exactly_once >= {GOAL} x at_least_once: {'met' if s['goal_met'] else 'NOT met'}")
    m = s["add_batch_median_ms"]
    print(
        f"micro-batch of {s['micro_batch_rows']:,} rows, addBatch median: at_least_once "
        f"{m['at_least_once']:.0f} ms, exactly_once {m['exactly_once']:.0f} ms "
        f"(+{s['added_ms_per_micro_batch']:.0f} ms)"
    )
    d = s["decision_ms"]
    print(f"driver's decision (4 members): median {d['median']:.1f} ms, p90 {d['p90']:.1f} ms")


def main() -> None:
    args = bench_arguments(__doc__, "300,000 rows, 8 micro-batches").parse_args()
    print_summary(lambda: run(QUICK if args.quick else FULL, args.keep))


if __name__ == "__main__":
    main()
