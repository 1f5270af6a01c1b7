"""The Spark driver of test_exactly_once_standalone (run as its own process: one
SparkContext per process, and the folder's other tests hold a local one).

    eos_standalone_driver.py MASTER_URL GATEWAY MARKERS ROWS CASE:TOPIC:PREFIX ...

The cases run one after the other in one session (one driver, two executors: JVMs are the
slow part of this test).

CASE ``speculation``: partition 0's first attempt to run sends its first rows, then stalls until
Spark starts a speculative copy on the other host, which wins. CASE ``executor-lost``:
partition 1's first attempt to run sends its first rows, then SIGKILLs its own executor's JVM.
Either way the write is exactly_once: the job must succeed with each row visible once.
Every attempt leaves a marker file ``MARKERS/<case>/<partition>-<attempt>`` when it starts;
the attempt that claims ``fault-<partition>`` first stalls or kills."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

import strom_spark

PARTITIONS = 4
FIRST_ROWS = 1000  # sent by the stalling or dying attempt first (past the workers' buffers)
PAD = "x" * 100


def _executor_jvm() -> int:
    """The pid of this Python worker's executor (the nearest ancestor JVM)."""
    pid = os.getppid()
    while pid > 1:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"CoarseGrainedExecutorBackend" in cmdline:
            return pid
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no executor JVM among this process's ancestors")


def _first_to_claim(path: Path) -> bool:
    """True for the one caller that creates ``path`` (the attempts share this machine)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def rows_of(case: str, markers: str, per_partition: int):  # type: ignore[no-untyped-def]
    def rows(index: int, _: Iterator[int]) -> Iterator[tuple[str]]:
        context = TaskContext.get()
        assert context is not None
        attempt = context.attemptNumber()
        Path(markers, case, f"{index}-{attempt}").touch()
        # The fault hits the first attempt that gets this far (an attempt 0 may fail before
        # running this, e.g. on an executor lost in the previous case).
        first = _first_to_claim(Path(markers, case, f"fault-{index}"))
        for i in range(per_partition):
            if i == FIRST_ROWS and first:
                if case == "speculation" and index == 0:
                    time.sleep(120)  # until Spark kills it: the copy on the other host wins
                if case == "executor-lost" and index == 1:
                    time.sleep(2)  # the first rows reach the sink's producer
                    os.kill(_executor_jvm(), signal.SIGKILL)
                    time.sleep(60)
            yield (f"{index}-{i}-{PAD}",)

    return rows


def main() -> None:
    master, gateway, markers, total, *cases = sys.argv[1:]
    per_partition = int(total) // PARTITIONS
    spark = (
        SparkSession.builder.master(master)
        .appName("strom-eos-standalone")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.speculation", "true")
        .config("spark.speculation.interval", "200ms")
        .config("spark.speculation.quantile", "0.5")
        .config("spark.speculation.multiplier", "1.5")
        .config("spark.speculation.minTaskRuntime", "1s")
        # Small Arrow batches: the sink's producer gets the first rows before the stall.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    strom_spark.register(spark)
    schema = StructType([StructField("value", StringType())])
    for spec in cases:
        case, topic, prefix = spec.split(":")
        Path(markers, case).mkdir(parents=True, exist_ok=True)
        frame = spark.createDataFrame(
            spark.sparkContext.parallelize(range(PARTITIONS), PARTITIONS).mapPartitionsWithIndex(
                rows_of(case, markers, per_partition)
            ),
            schema,
        )
        (
            frame.write.format("strom")
            .option("strom.bootstrap.servers", gateway)
            .option("topic", topic)
            .option("deliveryGuarantee", "exactly_once")
            .option("transactionalIdPrefix", prefix)
            .mode("append")
            .save()
        )
        print(f"WRITE DONE {case}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
