"""Batch writes with deliveryGuarantee=exactly_once, real local Spark against a real cluster:
retried tasks add no duplicate, a failed job leaves nothing visible and nothing open, and
read_committed / read_uncommitted readers side by side show what is staged but not decided."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_testkit import new_topic, reader, topic_values

from strom import Admin
from strom.types import TopicPartition

# Generous: Spark on a loaded 2-core machine (the deadlines inside are loops, not sleeps).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TASKS = 4
PER_TASK = 2_000
ROWS = TASKS * PER_TASK
ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
#: States of a transactional id whose transaction is not finished.
UNFINISHED = ("Ongoing", "PrepareCommit", "PrepareAbort")


@pytest.fixture(autouse=True)
def small_arrow_batches(spark: SparkSession) -> Iterator[None]:
    """Rows reach the writer in batches of 250 (not 10,000), so a task failing near its end
    has sent most of its rows already."""
    spark.conf.set(ARROW_BATCH, "250")
    try:
        yield
    finally:
        spark.conf.unset(ARROW_BATCH)


def source(spark: SparkSession, ddl_udf) -> DataFrame:  # type: ignore[no-untyped-def]
    """ROWS rows in TASKS contiguous ranges (task p holds ids [p * PER_TASK, ...)), each value
    passed through ``ddl_udf`` (a UDF that may fail or wait, by task and attempt)."""
    df = spark.range(0, ROWS, 1, numPartitions=TASKS)
    return df.select(ddl_udf(F.col("id")).alias("value"))


def write(df: DataFrame, gateway: str, topic: str, prefix: str, **options: str) -> None:
    (
        df.write.format("strom")
        .mode("append")
        .option("strom.bootstrap.servers", gateway)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("transactionalIdPrefix", prefix)
        .options(**options)
        .save()
    )


def values(cluster, topic: str, level: str) -> list[str]:  # type: ignore[no-untyped-def]
    """What a plain consumer at ``level`` reads (no Spark job: cheaper)."""
    read = topic_values(cluster, topic, read_committed=level == "read_committed")
    return [v.decode() for v in read]


def spark_values(spark, cluster, topic: str, level: str) -> list[str]:  # type: ignore[no-untyped-def]
    """What Spark's strom source at ``level`` reads."""
    df = reader(spark, cluster, subscribe=topic, **{"kafka.isolation.level": level})
    return [bytes(r.value).decode() for r in df.select("value").collect()]


def transactions(cluster, prefix: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with cluster.admin() as admin:
        listed = admin.list_transactions(transactional_id_prefix=f"{prefix}-")
    return {t.transactional_id: t.state for t in listed}


def settled(cluster, prefix: str, timeout: float = 60.0) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The prefix's ids once none is in the middle of ending (aborts complete asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        states = transactions(cluster, prefix)
        if not set(states.values()) & {"PrepareCommit", "PrepareAbort"}:
            return states
        if time.monotonic() > deadline:
            return states
        time.sleep(0.2)


def expected() -> list[str]:
    return [f"row-{i}" for i in range(ROWS)]


def test_retried_tasks_write_each_row_once(spark, spark_cluster, tmp_path: Path) -> None:
    topic, prefix = new_topic(spark_cluster, 3), f"eos-retry-{uuid.uuid4().hex[:6]}"
    marks = str(tmp_path)

    @F.udf("string")
    def fail_first_attempt(i: int) -> str:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = i // PER_TASK
        # Tasks 1 and 3 fail near their end on their first attempt.
        if task in (1, 3) and context.attemptNumber() == 0 and i == (task + 1) * PER_TASK - 20:
            Path(marks, f"failed-{task}").touch()
            raise RuntimeError(f"injected failure of task {task}")
        return f"row-{i}"

    write(source(spark, fail_first_attempt), spark_cluster.gateway, topic, prefix)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failed-1", "failed-3"]
    got = values(spark_cluster, topic, "read_committed")
    assert len(got) == ROWS
    assert Counter(got) == Counter(expected())
    states = settled(spark_cluster, prefix)
    # 4 committed attempts; whatever the failed attempts opened (if their writer had rows
    # before the UDF failed) ended, aborted or fenced.
    assert list(states.values()).count("CompleteCommit") == TASKS
    assert not set(states.values()) & set(UNFINISHED), states


def test_failed_job_leaves_nothing_visible_and_nothing_open(
    spark, spark_cluster, tmp_path: Path
) -> None:
    topic, prefix = new_topic(spark_cluster, 3), f"eos-fail-{uuid.uuid4().hex[:6]}"
    gateway = spark_cluster.gateway

    @F.udf("string")
    def last_task_fails(i: int) -> str:
        task = i // PER_TASK
        if task == TASKS - 1 and i == ROWS - 1:
            # Every attempt of the last task fails once the other tasks' rows are all in the
            # log (staged), so the job fails after some tasks wrote.
            with Admin(gateway) as admin:
                parts = [TopicPartition(topic, p) for p in range(3)]
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline:
                    ends = admin.list_offsets(dict.fromkeys(parts, "latest"))
                    if sum(o.offset for o in ends.values()) >= (TASKS - 1) * PER_TASK:
                        break
                    time.sleep(0.1)
            raise RuntimeError("injected failure of the last task")
        return f"row-{i}"

    with pytest.raises((Py4JJavaError, PySparkException), match="injected failure"):
        write(source(spark, last_task_fails), gateway, topic, prefix)
    assert values(spark_cluster, topic, "read_committed") == []
    # The rows are in the log (read_uncommitted sees them), but aborted.
    assert len(values(spark_cluster, topic, "read_uncommitted")) >= (TASKS - 1) * PER_TASK
    states = settled(spark_cluster, prefix)
    assert len(states) >= TASKS - 1  # the failing task may fail before its writer starts
    assert "CompleteCommit" not in states.values()
    assert not set(states.values()) & set(UNFINISHED), states


def test_read_committed_and_uncommitted_side_by_side(spark, spark_cluster, tmp_path: Path) -> None:
    topic, prefix = new_topic(spark_cluster, 3), f"eos-sbs-{uuid.uuid4().hex[:6]}"
    release = tmp_path / "release"
    flag = str(release)

    @F.udf("string")
    def last_task_waits(i: int) -> str:
        if i == ROWS - 1:  # the last task's last row: wait for the test
            deadline = time.monotonic() + 270
            while not Path(flag).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return f"row-{i}"

    seen: dict[str, int] = {}

    def watch() -> None:
        """Readers side by side while the write is staged (plain consumers: no Spark in a
        second thread), then release the last task."""
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                uncommitted = len(values(spark_cluster, topic, "read_uncommitted"))
                if uncommitted >= (TASKS - 1) * PER_TASK:
                    seen["read_uncommitted"] = uncommitted
                    seen["read_committed"] = len(values(spark_cluster, topic, "read_committed"))
                    seen["open"] = list(transactions(spark_cluster, prefix).values()).count(
                        "Ongoing"
                    )
                    break
                time.sleep(0.5)
        finally:
            release.touch()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        write(source(spark, last_task_waits), spark_cluster.gateway, topic, prefix)
    finally:
        release.touch()
        watcher.join(300)
    # While three tasks had staged: their rows in the log, invisible to read_committed.
    assert seen.get("read_uncommitted", 0) >= (TASKS - 1) * PER_TASK, seen
    assert seen["read_committed"] == 0
    assert seen["open"] >= TASKS - 1
    committed = spark_values(spark, spark_cluster, topic, "read_committed")
    assert Counter(committed) == Counter(expected())
    uncommitted = spark_values(spark, spark_cluster, topic, "read_uncommitted")
    assert Counter(uncommitted) == Counter(committed)


def test_staged_transaction_outliving_its_timeout_fails_the_write_cleanly(
    spark, spark_cluster
) -> None:
    topic, prefix = new_topic(spark_cluster, 3), f"eos-ttl-{uuid.uuid4().hex[:6]}"
    gateway = spark_cluster.gateway

    @F.udf("string")
    def last_task_outwaits(i: int) -> str:
        if i == ROWS - 1:
            # The last task waits until the coordinator has aborted another task's staged
            # transaction on its timeout (3 s), then lets the write finish.
            with Admin(gateway) as admin:
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline:
                    states = {
                        t.state
                        for t in admin.list_transactions(transactional_id_prefix=f"{prefix}-")
                    }
                    if "CompleteAbort" in states:
                        break
                    time.sleep(0.2)
        return f"row-{i}"

    # The commit finds an expired member ("is not open"); on a slow machine a task may even
    # see its own transaction expire while writing. Either way the write fails.
    with pytest.raises((Py4JJavaError, PySparkException)):
        write(
            source(spark, last_task_outwaits),
            gateway,
            topic,
            prefix,
            transactionTimeoutMs="3000",
        )
    # The decision checked its members first: nothing was committed, nothing is left open.
    assert values(spark_cluster, topic, "read_committed") == []
    states = settled(spark_cluster, prefix)
    assert "CompleteCommit" not in states.values()
    assert not set(states.values()) & set(UNFINISHED), states
