"""The ETL examples of spark_connector/examples, run against the shared cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from spark_testkit import new_topic, reader

from strom import Producer

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "spark_connector" / "examples"
USERS, KINDS = ("ada", "bob", "cy"), ("click", "view")


@pytest.fixture(scope="module")
def examples():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(EXAMPLES))
    try:
        import etl_batch
        import etl_streaming

        yield etl_batch, etl_streaming
    finally:
        sys.path.remove(str(EXAMPLES))


def send_events(cluster, topic: str, count: int) -> dict[tuple[str, str], tuple[int, float]]:  # type: ignore[no-untyped-def]
    want: dict[tuple[str, str], tuple[int, float]] = {}
    with Producer(cluster.gateway) as producer:
        for i in range(count):
            user, kind, amount = USERS[i % 3], KINDS[i % 2], float(i % 5)
            n, total = want.get((user, kind), (0, 0.0))
            want[(user, kind)] = (n + 1, total + amount)
            event = {"user": user, "kind": kind, "amount": amount}
            producer.send(topic, json.dumps(event).encode(), user.encode())
        producer.flush()
    return want


def sink_totals(spark, cluster, topic: str) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    return [json.loads(bytes(r.value)) for r in reader(spark, cluster, subscribe=topic).collect()]


def test_batch_etl(spark, spark_cluster, tmp_path, examples) -> None:
    etl_batch, _ = examples
    source, sink = new_topic(spark_cluster, 3), new_topic(spark_cluster, 1)
    want = send_events(spark_cluster, source, 120)
    parquet = str(tmp_path / "totals.parquet")
    etl_batch.run(spark, spark_cluster.gateway, source, sink, parquet)
    stored = {(r.user, r.kind): (r.events, r.amount) for r in spark.read.parquet(parquet).collect()}
    assert stored == want
    sent = {
        (t["user"], t["kind"]): (t["events"], t["amount"])
        for t in sink_totals(spark, spark_cluster, sink)
    }
    assert sent == want


def test_streaming_etl_restarts_from_checkpoint(spark, spark_cluster, tmp_path, examples) -> None:
    _, etl_streaming = examples
    source, sink = new_topic(spark_cluster, 2), new_topic(spark_cluster, 1)
    parquet, checkpoint = str(tmp_path / "totals.parquet"), str(tmp_path / "ckpt")
    first = send_events(spark_cluster, source, 60)
    args = (spark, spark_cluster.gateway, source, sink, parquet, checkpoint)
    query = etl_streaming.start(*args, available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    second = send_events(spark_cluster, source, 30)
    query = etl_streaming.start(*args, available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    rows = spark.read.parquet(parquet).collect()
    assert sum(r.events for r in rows) == 90  # every event counted once across the restart
    for key in set(first) | set(second):
        events = sum(r.events for r in rows if (r.user, r.kind) == key)
        assert events == first.get(key, (0, 0))[0] + second.get(key, (0, 0))[0]
    assert sum(t["events"] for t in sink_totals(spark, spark_cluster, sink)) == 90
