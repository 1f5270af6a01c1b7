"""Batch and streaming writers of the ``strom`` data source.

Columns as Spark's Kafka sink: ``value`` (binary or string, required), ``key`` (binary or
string), ``topic`` (string; the ``topic`` option overrides it), ``partition`` (int) and
``headers`` (array<struct<key: string, value: binary>>); other columns are ignored. The schema
is checked on the driver, before any task writes.

Each task writes through its own ``strom.Producer`` (acks=all, idempotent) and succeeds only
when every record is acknowledged. The option ``deliveryGuarantee`` chooses the semantics:

* ``at_least_once`` (default), as Spark's own Kafka sink: a task retried after a failure, or a
  job aborted after some tasks wrote, leaves the records already acknowledged in the topic;
  the idempotent producer only removes duplicates of its own retries.
* ``exactly_once``: each task writes in a transaction of its own and stages it
  (``stage_batches``); the driver's ``commit`` has the transaction coordinator commit every
  task's staged transaction as one decision (per job, or per micro-batch id: a replayed batch
  is recognised and its new output aborted), and ends every other transaction of the write;
  ``abort`` aborts them all. read_committed readers see all of a write's rows once, or none.
  ``strom_spark.exactly_once`` has the ids and the driver's side; ``docs/spark.md`` the
  failure cases and why each is safe.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from strom import Producer
from strom.types import StagedTransaction
from strom_spark.avro_values import encode_values
from strom_spark.exactly_once import (
    abort_micro_batch,
    abort_write,
    commit_micro_batch,
    commit_write,
    new_run_token,
    new_write_id,
    streaming_task_id,
    task_context,
    write_task_id,
)
from strom_spark.options import SinkOptions

__all__ = [
    "StromStreamWriter",
    "StromWriter",
    "Written",
    "check_sink_schema",
    "stage_batches",
    "write_batches",
]


@dataclass
class Written(WriterCommitMessage):
    """What one task wrote (exactly_once: the transaction it staged, if it had rows)."""

    records: int
    staged: StagedTransaction | None = None
    #: The streaming query's id (stable across restarts), as the task saw it.
    query_id: str | None = None


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Raise ValueError naming the column when the DataFrame cannot be written."""
    fields = {f.name: f.dataType for f in schema.fields}

    def need(name: str, allowed: tuple[Any, ...], what: str) -> None:
        kind = fields[name]
        if not isinstance(kind, allowed):
            raise ValueError(
                f"column {name} must be {what} to write to strom, got {kind.simpleString()}"
            )

    if "value" not in fields:
        raise ValueError("a column named value (binary or string) is required to write to strom")
    if options.value_avro is not None:
        need("value", (StructType,), "a struct (valueFormat=avro)")
    else:
        need("value", (BinaryType, StringType), "binary or string")
    if "key" in fields:
        need("key", (BinaryType, StringType), "binary or string")
    if options.topic is None:
        if "topic" not in fields:
            raise ValueError("a column named topic, or the option topic, is required")
        need("topic", (StringType,), "string")
    if "partition" in fields:
        need("partition", (IntegerType,), "int")
    if "headers" in fields:
        kind = fields["headers"]
        element = kind.elementType if isinstance(kind, ArrayType) else None
        sub = (
            {f.name: f.dataType for f in element.fields} if isinstance(element, StructType) else {}
        )
        if (
            set(sub) != {"key", "value"}
            or not isinstance(sub["key"], StringType)
            or not (isinstance(sub["value"], (BinaryType, StringType)))
        ):
            raise ValueError(
                "column headers must be array<struct<key: string, value: binary>>, got "
                f"{kind.simpleString()}"
            )


def _as_bytes(column: pa.ChunkedArray | pa.Array) -> list[bytes | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()  # type: ignore[no-any-return]


class _Sender:
    """Sends the rows of Arrow batches through one producer; ``check`` after a flush raises
    the first failed record's error."""

    def __init__(self, producer: Producer, options: SinkOptions) -> None:
        self.producer = producer
        self.options = options
        self.failure: list[BaseException] = []
        self.lock = threading.Lock()
        self.bulk: list[Any] = []

    def delivered(self, _metadata: Any, error: BaseException | None) -> None:
        if error is not None:
            with self.lock:
                self.failure.append(error)

    def send(self, batch: pa.RecordBatch) -> int:
        if self.options.value_avro is not None:
            batch = encode_values(batch, self.options.value_avro)
        names = batch.schema.names
        values = _as_bytes(batch.column("value"))
        keys = _as_bytes(batch.column("key")) if "key" in names else None
        if self.options.topic is not None:
            topics: list[str] | str = self.options.topic
        else:
            column = batch.column("topic")
            if column.null_count:
                raise ValueError("column topic has null values and no topic option is set")
            unique = pc.unique(column)
            topics = unique[0].as_py() if len(unique) == 1 else column.to_pylist()
        simple = (
            isinstance(topics, str)
            and "partition" not in names
            and "headers" not in names
            and (keys is None or None not in keys)
        )
        if simple:
            assert isinstance(topics, str)
            self.bulk.append(self.producer.send_many(topics, values, keys))
        else:
            _send_rows(self.producer, batch, topics, keys, values, self.delivered)
        return int(batch.num_rows)

    def check(self) -> None:
        for future in self.bulk:
            future.result()
        if self.failure:
            raise self.failure[0]


def _producer(options: SinkOptions, **extra: Any) -> Producer:
    settings: dict[str, Any] = {"client_id": "strom-spark", **options.producer, **extra}
    return Producer(options.bootstrap_servers, acks="all", enable_idempotence=True, **settings)


def _send_all(producer: Producer, options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row of ``batches`` and flush; the number of rows, once all are
    acknowledged (else the first failed record's error)."""
    sender = _Sender(producer, options)
    count = 0
    for batch in batches:
        if batch.num_rows:
            count += sender.send(batch)
    producer.flush()
    sender.check()
    return count


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> Written:
    """Send every row of ``batches``; return once all are acknowledged (or raise)."""
    producer = _producer(options)
    try:
        return Written(_send_all(producer, options, batches))
    finally:
        producer.close()


def stage_batches(
    options: SinkOptions, transactional_id: str, batches: Iterator[pa.RecordBatch]
) -> Written:
    """Send every row of ``batches`` in one transaction of ``transactional_id`` and stage it
    (``Producer.prepare_transaction``): the rows are in the log, invisible to read_committed
    readers until the driver's decision. A task without rows stages nothing. On any error the
    transaction is aborted and the error raised."""
    first = next((batch for batch in batches if batch.num_rows), None)
    if first is None:
        return Written(0)
    producer = _producer(
        options,
        transactional_id=transactional_id,
        transaction_timeout_ms=options.transaction_timeout_ms,
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        count = _send_all(producer, options, itertools.chain([first], batches))
        staged = producer.prepare_transaction()
    except BaseException:
        with contextlib.suppress(Exception):
            producer.abort_transaction()
        raise
    finally:
        producer.close()
    return Written(count, staged)


def _send_rows(  # noqa: PLR0917 - the columns of one batch
    producer: Producer,
    batch: pa.RecordBatch,
    topics: list[str] | str,
    keys: list[bytes | None] | None,
    values: list[bytes | None],
    delivered: Any,
) -> None:
    names = batch.schema.names
    rows = batch.num_rows
    partitions = batch.column("partition").to_pylist() if "partition" in names else None
    headers = None
    if "headers" in names:
        headers = [
            None
            if hs is None
            else [
                (h["key"], h["value"].encode() if isinstance(h["value"], str) else h["value"])
                for h in hs
            ]
            for hs in batch.column("headers").to_pylist()
        ]
    for i in range(rows):
        producer.send(
            topics if isinstance(topics, str) else topics[i],
            values[i],
            None if keys is None else keys[i],
            None if headers is None else headers[i],
            None if partitions is None else partitions[i],
            None,
            delivered,
        )


class StromWriter(DataSourceArrowWriter):
    """``df.write.format("strom")`` (see the module doc for the semantics)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        #: The write's id (exactly_once): made here, on the driver, and pickled with the
        #: writer to every task and to the commit.
        self.write_id = new_write_id()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:  # type: ignore[override]
        if not self.options.exactly_once:
            return write_batches(self.options, iterator)
        partition, attempt, _, _ = task_context()
        tid = write_task_id(self.options.transactional_id_prefix, self.write_id, partition, attempt)
        return stage_batches(self.options, tid, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """exactly_once: every task's staged transaction as one decision; at_least_once:
        every task's records are acknowledged already, nothing is left to do."""
        if self.options.exactly_once:
            commit_write(self.options, self.write_id, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """exactly_once: every transaction of the write is aborted; at_least_once: records
        acknowledged before the failure stay in the topic."""
        if self.options.exactly_once:
            abort_write(self.options, self.write_id, messages)


class StromStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("strom")``: each micro-batch as a batch write (exactly_once:
    one decision per batch id)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        #: Unique per start of the query (tasks' transactional ids); Spark makes a new writer
        #: for each commit, which does not need it.
        self.run = new_run_token()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:  # type: ignore[override]
        if not self.options.exactly_once:
            return write_batches(self.options, iterator)
        partition, attempt, batch_id, query_id = task_context()
        prefix = self.options.transactional_id_prefix
        tid = streaming_task_id(prefix, batch_id, self.run, partition, attempt)
        written = stage_batches(self.options, tid, iterator)
        written.query_id = query_id
        return written

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """exactly_once: the batch's staged transactions as decision ``batchId`` (a replayed
        batch id is recognised and its new output aborted); at_least_once: nothing to do."""
        if self.options.exactly_once:
            commit_micro_batch(self.options, batchId, messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """exactly_once: the batch's transactions are aborted; at_least_once: a micro-batch
        retried after a failure may write some records twice."""
        if self.options.exactly_once:
            abort_micro_batch(self.options, batchId, messages)
