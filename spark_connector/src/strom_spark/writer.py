"""Batch and streaming writers of the ``strom`` data source.

Columns as Spark's Kafka sink: ``value`` (binary or string, required), ``key`` (binary or
string), ``topic`` (string; the ``topic`` option overrides it), ``partition`` (int) and
``headers`` (array<struct<key: string, value: binary>>); other columns are ignored. The schema
is checked on the driver, before any task writes.

Each task writes through its own ``strom.Producer`` (acks=all, idempotent) and succeeds only
when every record is acknowledged. Semantics are at-least-once, as Spark's own Kafka sink: a
task retried after a failure, or a job aborted after some tasks wrote, leaves the records
already acknowledged in the topic (``abort`` cannot take them back until Strom has
transactions); the idempotent producer only removes duplicates of its own retries.
"""

from __future__ import annotations

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
from strom_spark.options import SinkOptions

__all__ = ["StromStreamWriter", "StromWriter", "Written", "check_sink_schema"]


@dataclass
class Written(WriterCommitMessage):
    """What one task wrote."""

    records: int


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


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> Written:
    """Send every row of ``batches``; return once all are acknowledged (or raise)."""
    failure: list[BaseException] = []
    lock = threading.Lock()

    def delivered(_metadata: Any, error: BaseException | None) -> None:
        if error is not None:
            with lock:
                failure.append(error)

    count = 0
    bulk = []
    settings: dict[str, Any] = {"client_id": "strom-spark", **options.producer}
    producer = Producer(options.bootstrap_servers, acks="all", enable_idempotence=True, **settings)
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            names = batch.schema.names
            values = _as_bytes(batch.column("value"))
            keys = _as_bytes(batch.column("key")) if "key" in names else None
            if options.topic is not None:
                topics: list[str] | str = options.topic
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
                bulk.append(producer.send_many(topics, values, keys))
            else:
                _send_rows(producer, batch, topics, keys, values, delivered)
            count += batch.num_rows
        producer.flush()
        for future in bulk:
            future.result()
        if failure:
            raise failure[0]
    finally:
        producer.close()
    return Written(count)


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

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:  # type: ignore[override]
        return write_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task's records are acknowledged already: nothing is left to do."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records acknowledged before the failure stay in the topic (at-least-once)."""


class StromStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("strom")``: each micro-batch as a batch write."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:  # type: ignore[override]
        return write_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: the micro-batch's records were acknowledged by its tasks."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """A micro-batch retried after a failure may write some records twice."""
