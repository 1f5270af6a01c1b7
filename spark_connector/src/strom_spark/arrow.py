"""Record batches of a fetch into one Arrow ``RecordBatch`` with the Kafka source's schema.

The records are decoded per batch into parallel lists by ``strom.records.decode_columns`` (the
C kernel when built); Arrow builds each column from those lists in one call. Nothing here runs
per record in Python.
"""

from __future__ import annotations

import gc
from array import array
from bisect import bisect_left
from collections.abc import Sequence

import pyarrow as pa

from strom.consumer.aborted import AbortedTransaction, AbortedTransactionFilter
from strom.records import decode_columns
from strom.records.header import ATTR_CONTROL, ATTR_TIMESTAMP_TYPE
from strom.records.kernel import Kernel
from strom.types import TopicPartition

__all__ = ["HEADERS_TYPE", "SCHEMA_DDL", "arrow_schema", "records_to_arrow"]

#: Spark's Kafka source schema, as a DDL string (headers appended with includeHeaders=true).
SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_TIMESTAMP = pa.timestamp("us", tz="UTC")  # how Spark's TimestampType travels in Arrow
_MS = pa.timestamp("ms", tz="UTC")


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", _TIMESTAMP),
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(("headers", HEADERS_TYPE))
    return pa.schema(fields)


def records_to_arrow(
    raw: bytes,
    tp: TopicPartition,
    start: int,
    end: int,
    *,
    include_headers: bool = False,
    kernel: Kernel | None = None,
    aborted: Sequence[AbortedTransaction] | None = None,
) -> pa.RecordBatch | None:
    """The records of ``raw`` (whole batches of one partition, as a Fetch returns them) with
    offsets in ``[start, end)``, control batches skipped; None when there is none.
    ``aborted``: the fetch's aborted transactions (read_committed), whose batches are dropped.
    ``kernel``: the record kernel to decode with (default: the C one when built)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()  # lists of bytes cannot form cycles; collections here cost as much as decoding
    try:
        drop = AbortedTransactionFilter(aborted) if aborted else None
        return _convert(raw, tp, start, end, include_headers, kernel, drop)
    finally:
        if paused:
            gc.enable()


def _convert(  # noqa: PLR0917 - private, called once
    raw: bytes,
    tp: TopicPartition,
    start: int,
    end: int,
    include_headers: bool,
    kernel: Kernel | None,
    drop: AbortedTransactionFilter | None,
) -> pa.RecordBatch | None:
    offsets = array("q")
    timestamps = array("q")
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[tuple[str, bytes | None], ...]] = []
    types: list[tuple[int, int]] = []  # (timestamp type, records) per batch
    for columns in decode_columns(raw, allow_truncated_tail=True, kernel=kernel):
        header = columns.header
        if drop is not None:
            if drop.drops(header, columns.keys, columns.values):
                continue
        elif header.attributes & ATTR_CONTROL:
            continue
        if not columns.offsets:
            continue
        if header.base_offset + header.last_offset_delta < start or header.base_offset >= end:
            continue
        lo, hi = 0, len(columns.offsets)
        if columns.offsets[0] < start:
            lo = bisect_left(columns.offsets, start)
        if columns.offsets[-1] >= end:
            hi = bisect_left(columns.offsets, end)
        if lo >= hi:
            continue
        whole = lo == 0 and hi == len(columns.offsets)
        offsets.extend(columns.offsets if whole else columns.offsets[lo:hi])
        timestamps.extend(columns.timestamps if whole else columns.timestamps[lo:hi])
        keys += columns.keys if whole else columns.keys[lo:hi]
        values += columns.values if whole else columns.values[lo:hi]
        if include_headers:
            headers += columns.headers if whole else columns.headers[lo:hi]
        types.append((1 if header.attributes & ATTR_TIMESTAMP_TYPE else 0, hi - lo))
    count = len(offsets)
    if not count:
        return None
    arrays = [
        pa.nulls(count, pa.binary()) if keys.count(None) == count else pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(tp.topic, pa.string()), count),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), count),
        _int64s(offsets, pa.int64()),
        _int64s(timestamps, _MS).cast(_TIMESTAMP),
        _timestamp_types(types, count),
    ]
    if include_headers:
        arrays.append(pa.array(headers, HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def _int64s(items: array[int], kind: pa.DataType) -> pa.Array:
    """An Arrow array over the machine integers of ``items`` (no per-item conversion)."""
    return pa.Array.from_buffers(kind, len(items), [None, pa.py_buffer(items)])


def _timestamp_types(types: list[tuple[int, int]], count: int) -> pa.Array:
    if all(kind == types[0][0] for kind, _ in types):
        return pa.repeat(pa.scalar(types[0][0], pa.int32()), count)
    return pa.array([kind for kind, n in types for _ in range(n)], pa.int32())
