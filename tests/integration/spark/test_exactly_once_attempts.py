"""Speculative duplicates of an exactly_once batch write, against a real cluster.

Spark never starts a speculative copy on a host that already runs an attempt of the task
(TaskSetManager's ``hasAttemptOnHost``), and ``local[N]`` is one host: with
``spark.speculation=true`` local mode still runs one attempt per task. So the case is driven
here as Spark drives it on a cluster, through the data source's real writer: two attempts of
partition 0 write and stage (the writer is pickled to both, as to every task), only the
winner's commit message reaches the driver's ``commit``; a third attempt is still writing
when the driver commits."""

from __future__ import annotations

import uuid
from collections import Counter

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType
from spark_testkit import new_topic, topic_values

from strom import Producer
from strom.errors import StromError
from strom_spark.exactly_once import write_task_id
from strom_spark.source import StromDataSource

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SCHEMA = StructType([StructField("value", StringType())])


def rows(prefix: str, n: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([f"{prefix}-{i}" for i in range(n)])], names=["value"])


def test_speculative_loser_is_aborted_and_a_late_attempt_fenced(spark_cluster) -> None:  # type: ignore[no-untyped-def]
    topic, prefix = new_topic(spark_cluster, 2), f"eos-spec-{uuid.uuid4().hex[:6]}"
    source = StromDataSource(
        {
            "strom.bootstrap.servers": spark_cluster.gateway,
            "topic": topic,
            "deliveryGuarantee": "exactly_once",
            "transactionalIdPrefix": prefix,
        }
    )
    writer = source.writer(SCHEMA, False)
    winner = writer.write(iter([rows("p0", 300)]))
    loser = writer.write(iter([rows("p0", 300)]))  # the speculative copy: staged too
    other = writer.write(iter([rows("p1", 200)]))
    assert winner.staged and loser.staged and other.staged
    assert winner.staged.transactional_id != loser.staged.transactional_id
    # An attempt still writing when the driver commits (Spark has not killed it yet).
    late_id = write_task_id(prefix, writer.write_id, 0, 999_999)
    late = Producer(spark_cluster.gateway, transactional_id=late_id)
    try:
        late.init_transactions()
        late.begin_transaction()
        late.send(topic, b"late-0")
        late.flush()
        writer.commit([winner, other])
        with pytest.raises(StromError):
            late.send(topic, b"late-1")
            late.prepare_transaction()
    finally:
        late.close()
    got = Counter(v.decode() for v in topic_values(spark_cluster, topic))
    assert got == Counter([f"p0-{i}" for i in range(300)] + [f"p1-{i}" for i in range(200)])
    everything = len(topic_values(spark_cluster, topic, read_committed=False))
    assert everything == 300 + 300 + 200 + 1  # the loser's and the late rows: in the log, aborted
    with spark_cluster.admin() as admin:
        states = {
            t.transactional_id: t.state
            for t in admin.list_transactions(transactional_id_prefix=f"{prefix}-")
        }
    assert states[winner.staged.transactional_id] == "CompleteCommit"
    # Aborted (and fenced: a new epoch, Empty, once the abort completed), never committed.
    for ended in (loser.staged.transactional_id, late_id):
        assert states[ended] in ("PrepareAbort", "CompleteAbort", "Empty"), states
