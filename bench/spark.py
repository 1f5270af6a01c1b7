"""Benchmark of the Spark connector (``strom_spark``): reading a topic into Spark, beside one
Python consumer and the connector's own decoding ceiling, measured in the same run.

One real local cluster on loopback (``bench/replication.py``'s ``cluster_spec``: etcd, 2
controllers, 3 storage nodes, the gateway, a coordinator), data in a temporary directory, every
process stopped at the end. A topic of 8 partitions, replication factor 1, is filled with
10,000,000 records (``--quick``: 1,000,000) of 100 random bytes, no key, in uncompressed 16 KiB
batches (the producer's default ``batch.size``: 140 records each), written straight to the
partition leaders with ``Produce`` (acks=1), so filling is not what is measured.

* connector, ``df.count()``: ``spark.read.format("strom")`` over the whole topic in a local[2]
  session (the machine's 2 cores), one Spark task per partition, each reading its partition
  from the leader and yielding Arrow batches; the wall time of the action, planning included.
  Best of 2 (the first run also starts Spark's Python workers: shown apart).
* connector, parquet write: the same DataFrame written with ``df.write.parquet`` (all columns).
* one Python consumer: ``strom.Consumer`` assigned the 8 partitions, ``poll(max_records=
  10000)`` from the earliest offsets until every record arrived (a ``ConsumerRecord`` each).
* Spark's floor: ``df.count()`` over a data source yielding prebuilt Arrow batches of the same
  schema and size (no I/O, no decoding): what Spark's side of a Python data source costs (the
  batches handed to the JVM and turned into rows), which the connector cannot go below.
* ceiling: the connector's own decoding (``strom_spark.arrow.records_to_arrow``, the C record
  kernel) of the same batches into Arrow, in this one process, without Spark or network: the
  raw Fetch responses (8 MiB each, as a Spark task fetches them) are read into memory first.

Targets: the connector's count reads >= 2x as many records/s as one Python consumer, and
>= 50% of 2x the single-process decode ceiling (2 cores). The machine is shared: its load is
reported. The last line is ``SUMMARY {json}``.

    .venv/bin/python bench/spark.py            # full run, a few minutes
    .venv/bin/python bench/spark.py --quick    # under a minute (after Spark starts)
    .venv/bin/python bench/spark.py --keep     # keep data and logs
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchkit import bench_arguments, print_summary, progress
from replication import cluster_spec
from storage import machine_busy

from strom import Admin, Consumer, NewTopic, TopicPartition
from strom.cluster import ClusterClient, storage_call
from strom.protocol.v1 import storage_pb2
from strom.records import encode_batch
from strom_server.local.supervisor import Supervisor
from strom_spark.arrow import records_to_arrow
from strom_spark.fetch import fetch_partition, next_offset

PARTITIONS = 8
VALUE_SIZE = 100
BATCH_RECORDS = 140  # 16 KiB batches of 100-byte values
BATCHES_PER_REQUEST = 32
FETCH_BYTES = 8 << 20
TARGETS = {"vs_consumer": 2.0, "vs_2x_ceiling": 0.5}
FULL, QUICK = 10_000_000, 1_000_000


# --------------------------------------------------------------------------- data


async def fill(gateway: str, topic: str, records: int) -> None:
    """``records`` 100-byte values over the partitions, as whole 16 KiB batches."""
    rng = random.Random(7)
    batches = [
        encode_batch(
            [(1_700_000_000_000, None, rng.randbytes(VALUE_SIZE)) for _ in range(BATCH_RECORDS)]
        )
        for _ in range(4)
    ]
    per_partition = records // PARTITIONS
    cluster = ClusterClient(gateway)
    try:
        jobs = []
        for p in range(PARTITIONS):
            leader = await cluster.leader(TopicPartition(topic, p))
            left = per_partition
            while left:
                count = min(left, BATCH_RECORDS * BATCHES_PER_REQUEST)
                whole, tail = divmod(count, BATCH_RECORDS)
                payload = b"".join(batches[i % 4] for i in range(whole))
                if tail:
                    payload += encode_batch(
                        [(1_700_000_000_000, None, rng.randbytes(VALUE_SIZE)) for _ in range(tail)]
                    )
                jobs.append((leader.leader, p, payload))
                left -= count
        semaphore = asyncio.Semaphore(16)

        async def send(node: int, partition: int, payload: bytes) -> None:
            request = storage_pb2.ProduceRequest(acks=1, timeout_ms=30000)
            request.partitions.add(topic=topic, partition=partition, records=payload)
            async with semaphore:
                response = await storage_call(cluster, node, "Produce", request, 60)
            (result,) = response.partitions
            if result.error_code:
                raise RuntimeError(f"produce {topic}-{partition}: {result.error_message}")

        await asyncio.gather(*(send(*job) for job in jobs))
    finally:
        await cluster.close()


async def fetch_all(gateway: str, topic: str, ends: dict[int, int]) -> list[tuple[int, bytes, int]]:
    """Every partition's records as raw Fetch responses: (partition, bytes, start offset)."""
    cluster = ClusterClient(gateway)
    chunks = []
    try:
        for p, end in ends.items():
            tp, position = TopicPartition(topic, p), 0
            while position < end:
                result = await fetch_partition(cluster, tp, position, FETCH_BYTES, 30)
                chunks.append((p, result.records, position))
                position = next_offset(result.records, position)
    finally:
        await cluster.close()
    return chunks


# --------------------------------------------------------------------------- measurements


def ceiling(topic: str, chunks: list[tuple[int, bytes, int]], end: int) -> float:
    """Seconds to turn every chunk into Arrow in this process (best of 2)."""
    best = float("inf")
    for _ in range(2):
        gc.collect()
        start = time.perf_counter()
        for p, raw, position in chunks:
            records_to_arrow(raw, TopicPartition(topic, p), position, end)
        best = min(best, time.perf_counter() - start)
    return best


def consumer_seconds(gateway: str, topic: str, n: int) -> float:
    with Consumer(
        bootstrap_servers=gateway, auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        gc.collect()
        got, deadline = 0, time.monotonic() + 600
        start = time.perf_counter()
        while got < n:
            for records in consumer.poll(timeout_ms=1000, max_records=10000).values():
                got += len(records)
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed {got} of {n} records in 600 s")
        return time.perf_counter() - start


def prebuilt_source(n: int) -> Any:
    """A data source yielding ``n`` records as prebuilt Arrow batches (8 tasks)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from strom_spark.arrow import SCHEMA_DDL

    class Prebuilt(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(n // PARTITIONS) for _ in range(PARTITIONS)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa

            from strom_spark.arrow import arrow_schema

            size = 70_000  # records of one 8 MiB Fetch
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.nulls(size, pa.binary()),
                    pa.array([bytes(VALUE_SIZE)] * size, pa.binary()),
                    pa.repeat(pa.scalar("bench-spark", pa.string()), size),
                    pa.repeat(pa.scalar(1, pa.int32()), size),
                    pa.array(range(size), pa.int64()),
                    pa.repeat(pa.scalar(0, pa.timestamp("us", tz="UTC")), size),
                    pa.repeat(pa.scalar(0, pa.int32()), size),
                ],
                schema=arrow_schema(False),
            )
            left = partition.value
            while left > 0:
                yield batch.slice(0, min(size, left))
                left -= size

    class PrebuiltSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "strom_bench_prebuilt"

        def schema(self) -> str:
            return SCHEMA_DDL

        def reader(self, schema: Any) -> DataSourceReader:
            return Prebuilt()

    return PrebuiltSource


def spark_session(
    workdir: Path, app: str = "strom-spark-bench", conf: dict[str, str] | None = None
) -> Any:
    """A local[2] session with the strom data source registered (``conf``: more settings,
    e.g. ``spark.sql.shuffle.partitions``); also ``bench/spark_write.py``'s."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import strom_spark

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.warehouse.dir", str(workdir / "warehouse"))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    strom_spark.register(spark)
    return spark


def timed(run: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = run()
    return time.perf_counter() - start, value


@contextmanager
def local_cluster(workdir: Path) -> Iterator[str]:
    spec = cluster_spec(workdir)
    supervisor = Supervisor(spec.processes(), grace_s=30.0)
    try:
        supervisor.start_all(60.0)
        yield spec.gateway_address
    finally:
        supervisor.stop_all()


def run(n: int, keep: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="strom-bench-spark-"))
    summary: dict[str, Any] = {"records": n, "partitions": PARTITIONS, "value_bytes": VALUE_SIZE}
    busy0 = machine_busy()
    try:
        with local_cluster(workdir) as gateway:
            topic = "bench-spark"
            with Admin(gateway) as admin:
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
            progress(f"writing {n:,} records to {PARTITIONS} partitions ...")
            asyncio.run(fill(gateway, topic, n))
            per_partition = n // PARTITIONS
            n = summary["records"] = per_partition * PARTITIONS
            ends = dict.fromkeys(range(PARTITIONS), per_partition)

            progress("the decode ceiling (in-process, no Spark, no network) ...")
            chunks = asyncio.run(fetch_all(gateway, topic, ends))
            summary["ceiling_s"] = ceiling(topic, chunks, per_partition)
            summary["raw_mb"] = sum(len(c[1]) for c in chunks) / 1e6
            del chunks
            gc.collect()

            progress("one Python consumer ...")
            summary["consumer_s"] = consumer_seconds(gateway, topic, n)

            progress("Spark: starting local[2] ...")
            spark = spark_session(workdir)
            try:
                df = (
                    spark.read.format("strom")
                    .option("strom.bootstrap.servers", gateway)
                    .option("subscribe", topic)
                    .load()
                )
                counts = []
                for i in range(2):
                    seconds, got = timed(df.count)
                    if got != n:
                        raise RuntimeError(f"count returned {got}, not {n}")
                    counts.append(seconds)
                    progress(f"  count {i + 1}: {seconds:.2f} s")
                summary["count_s_runs"] = counts
                summary["count_s"] = min(counts)
                spark.dataSource.register(prebuilt_source(n))
                floor = spark.read.format("strom_bench_prebuilt").load()
                summary["floor_s"] = min(timed(floor.count)[0] for _ in range(2))
                progress(f"  Spark's floor (prebuilt batches): {summary['floor_s']:.2f} s")
                out = workdir / "parquet"
                seconds, _ = timed(lambda: df.write.mode("overwrite").parquet(str(out)))
                summary["parquet_s"] = seconds
                summary["parquet_mb"] = sum(f.stat().st_size for f in out.glob("*.parquet")) / 1e6
                progress(f"  parquet: {seconds:.2f} s")
            finally:
                spark.stop()
        busy1 = machine_busy()
        summary["machine_busy"] = (busy1[0] - busy0[0]) / max(1e-9, busy1[1] - busy0[1])
    except BaseException:
        keep = True
        print(f"benchmark failed; data and logs kept in {workdir}", file=sys.stderr)
        raise
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    rates = {
        name: n / summary[f"{name}_s"]
        for name in ("ceiling", "consumer", "count", "parquet", "floor")
    }
    summary["records_per_s"] = rates
    summary["count_vs_consumer"] = rates["count"] / rates["consumer"]
    summary["count_vs_2x_ceiling"] = rates["count"] / (2 * rates["ceiling"])
    summary["parquet_vs_consumer"] = rates["parquet"] / rates["consumer"]
    summary["targets_met"] = {
        "vs_consumer": summary["count_vs_consumer"] >= TARGETS["vs_consumer"],
        "vs_2x_ceiling": summary["count_vs_2x_ceiling"] >= TARGETS["vs_2x_ceiling"],
    }
    summary["target_values"] = TARGETS
    report(summary)
    return summary


def report(s: dict[str, Any]) -> None:
    r = s["records_per_s"]
    print(
        f"\n{s['records']:,} records of {VALUE_SIZE} bytes, {PARTITIONS} partitions "
        f"({s['raw_mb']:.0f} MB of batches); machine busy {s['machine_busy']:.0%} during the run"
    )
    head = f"{'reader':46} {'seconds':>8} {'records/s':>11} {'vs consumer':>11}"
    print(head)
    print("-" * len(head))
    rows = [
        ("ceiling: records_to_arrow, 1 process, no I/O", "ceiling"),
        ("one Python consumer (strom.Consumer.poll)", "consumer"),
        ("Spark local[2]: df.count()", "count"),
        ("Spark local[2]: df.write.parquet", "parquet"),
        ("Spark's floor: count of prebuilt Arrow batches", "floor"),
    ]
    for label, key in rows:
        print(f"{label:46} {s[f'{key}_s']:8.2f} {r[key]:11,.0f} {r[key] / r['consumer']:10.2f}x")
    print(f"(first count, Python workers starting: {s['count_s_runs'][0]:.2f} s)")
    for name, met in s["targets_met"].items():
        value = s["count_vs_consumer"] if name == "vs_consumer" else s["count_vs_2x_ceiling"]
        print(f"target {name} >= {TARGETS[name]}: {value:.2f} {'met' if met else 'NOT met'}")


def main() -> None:
    args = bench_arguments(__doc__, "1,000,000 records").parse_args()
    print_summary(lambda: run(QUICK if args.quick else FULL, args.keep))


if __name__ == "__main__":
    main()
