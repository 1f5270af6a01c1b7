"""Streaming writes with deliveryGuarantee=exactly_once (spark_connector/examples/
exactly_once_streaming.py): a batch replayed by Spark is recognised in Strom and not written
again, a prefix reused by a new query is refused, and the example's driver killed with
SIGKILL at random moments and restarted from its checkpoint writes each row exactly once."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.errors import StreamingQueryException
from spark_testkit import new_topic, reader, topic_values

from strom import Producer
from strom.types import TopicPartition

# Generous: Spark drivers started on a loaded 2-core machine (deadlines are loops).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

EXAMPLES = Path(__file__).resolve().parents[3] / "spark_connector" / "examples"
EXAMPLE = EXAMPLES / "exactly_once_streaming.py"
USERS, KINDS = ("ada", "bob", "cy"), ("click", "view")


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import exactly_once_streaming

        yield exactly_once_streaming
    finally:
        sys.path.remove(str(EXAMPLES))


def feed(cluster, topic: str, committed: int, aborted: int) -> None:  # type: ignore[no-untyped-def]
    """``committed`` events in transactions of 500, then ``aborted`` events in an aborted
    transaction (a read_committed source never passes those on)."""
    with Producer(cluster.gateway, transactional_id=f"feed-{uuid.uuid4().hex[:8]}") as producer:
        producer.init_transactions()
        for start in range(0, committed, 500):
            producer.begin_transaction()
            for i in range(start, min(start + 500, committed)):
                event = {"user": USERS[i % 3], "kind": KINDS[i % 2], "amount": i % 7 + 0.25}
                producer.send(topic, json.dumps(event).encode(), USERS[i % 3].encode())
            producer.commit_transaction()
        producer.begin_transaction()
        for _ in range(aborted):
            producer.send(topic, b'{"user": "aborted", "kind": "x", "amount": 0}')
        producer.flush()
        producer.abort_transaction()


def sources(spark, cluster, topic: str) -> set[str]:  # type: ignore[no-untyped-def]
    """``partition:offset`` of every committed input record (as the example's source sees
    them: Spark's strom source with read_committed)."""
    df = reader(spark, cluster, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    return {f"{r.partition}:{r.offset}" for r in df.select("partition", "offset").collect()}


def outputs(spark, cluster, topic: str, level: str = "read_committed") -> Counter[str]:  # type: ignore[no-untyped-def]
    """How often each input record (``src``) appears in the output (a plain consumer)."""
    read = topic_values(cluster, topic, read_committed=level == "read_committed")
    values = [json.loads(v) for v in read]
    assert all(v["user"] != "aborted" for v in values)
    return Counter(v["src"] for v in values)


def test_replayed_batch_is_not_written_again(spark, spark_cluster, tmp_path, example) -> None:  # type: ignore[no-untyped-def]
    source, sink = new_topic(spark_cluster, 2), new_topic(spark_cluster, 2)
    feed(spark_cluster, source, 1500, 100)
    prefix, checkpoint = f"eos-replay-{uuid.uuid4().hex[:6]}", tmp_path / "ckpt"

    def run(ckpt: Path):  # type: ignore[no-untyped-def]
        query = example.start(
            spark,
            spark_cluster.gateway,
            source,
            sink,
            str(ckpt),
            prefix,
            available_now=True,
            max_records=500,
        )
        with contextlib.suppress(StreamingQueryException):  # callers look at exception()
            query.awaitTermination(240)
        assert not query.isActive
        return query

    first = run(checkpoint)
    assert first.exception() is None
    want = sources(spark, spark_cluster, source)
    assert len(want) == 1500
    assert outputs(spark, spark_cluster, sink) == Counter(want)

    # Spark forgets it committed the last batch (as when the driver dies between Strom's
    # commit and its own commit log): the restart runs that batch again.
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    replay = run(checkpoint)
    assert replay.exception() is None
    assert outputs(spark, spark_cluster, sink) == Counter(want)
    # The replay did write batch `last` again (new staged transactions, another run's ids),
    # and those were aborted, not committed.
    with spark_cluster.admin() as admin:
        ids = admin.list_transactions(transactional_id_prefix=f"{prefix}-{last}-")
    assert {t.state for t in ids} >= {"CompleteCommit"}
    assert any(t.state in ("CompleteAbort", "Empty") for t in ids), ids
    # The replay's records are in the log, aborted: read_uncommitted sees them twice.
    assert sum(outputs(spark, spark_cluster, sink, "read_uncommitted").values()) > len(want)
    with spark_cluster.admin() as admin:
        decided = admin.describe_staged_commit(prefix)
    assert decided is not None and decided.sequence == last
    assert json.loads(decided.metadata)["batch_id"] == last

    # A new query (new checkpoint) reusing the prefix would have its batches skipped: refused.
    other = run(tmp_path / "other-ckpt")
    assert other.exception() is not None
    assert "belongs to another query" in str(other.exception())
    assert outputs(spark, spark_cluster, sink) == Counter(want)


def start_driver(cluster, args: list[str], log: Path) -> subprocess.Popen[bytes]:  # type: ignore[no-untyped-def]
    env = {
        **os.environ,
        "STROM_BOOTSTRAP": cluster.gateway,
        "SPARK_MASTER": "local[2]",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(EXAMPLE), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM and workers die with it
        )


def sink_end(cluster, topic: str) -> int:  # type: ignore[no-untyped-def]
    with cluster.admin() as admin:
        ends = admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(2)})
    return sum(o.offset for o in ends.values())


def kill_and_restart(  # noqa: PLR0917 - the scenario's knobs
    spark, cluster, tmp_path: Path, records: int, kills: int, seed: int
) -> None:  # type: ignore[no-untyped-def]
    """Kill the example's driver (SIGKILL to its process group) ``kills`` times, each a random
    moment after it started writing, then let it finish: every committed input once."""
    rng = random.Random(seed)
    source, sink = new_topic(cluster, 2), new_topic(cluster, 2)
    feed(cluster, source, records, 200)
    prefix = f"eos-kill-{uuid.uuid4().hex[:6]}"
    args = [source, sink, str(tmp_path / "ckpt"), prefix, "--available-now"]
    args += ["--max-records", str(max(records // 10, 100))]
    log = tmp_path / "driver.log"
    killed = 0
    for _ in range(kills):
        before = sink_end(cluster, sink)
        driver = start_driver(cluster, args, log)
        deadline = time.monotonic() + 240
        while driver.poll() is None and time.monotonic() < deadline:
            if sink_end(cluster, sink) > before:
                break
            time.sleep(0.2)
        time.sleep(rng.uniform(0.0, 3.0))  # the random moment of the kill
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            killed += 1
        driver.wait(60)
    assert killed, "the driver finished before any kill"
    driver = start_driver(cluster, args, log)
    try:
        assert driver.wait(300) == 0, log.read_text()[-4000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    want = sources(spark, cluster, source)
    assert len(want) == records
    got = outputs(spark, cluster, sink)
    assert {src: n for src, n in got.items() if n > 1} == {}
    assert set(got) == want
    with cluster.admin() as admin:
        open_ = admin.list_transactions(states=["Ongoing"], transactional_id_prefix=f"{prefix}-")
    assert open_ == []


def test_driver_killed_once_writes_each_row_once(spark, spark_cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    kill_and_restart(spark, spark_cluster, tmp_path, records=2000, kills=1, seed=1)


@pytest.mark.slow
def test_driver_killed_many_times_writes_each_row_once(spark, spark_cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    kill_and_restart(spark, spark_cluster, tmp_path, records=20_000, kills=5, seed=7)
