"""Fetched record batches into Arrow with the Kafka source's schema (both record kernels)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from strom.records import BatchBuilder, Compression, encode_batch
from strom.records.header import set_log_append_time
from strom.records.kernel import available
from strom.types import TopicPartition
from strom_spark import arrow
from strom_spark.fetch import next_offset

TP = TopicPartition("events", 3)


def batch(base: int, count: int, **kwargs) -> bytes:  # type: ignore[no-untyped-def]
    records = [
        (1000 + i, b"k%d" % i if i % 2 else None, b"v%d" % (base + i), [("h", b"%d" % i)])
        for i in range(count)
    ]
    return encode_batch(records, base_offset=base, **kwargs)


@pytest.fixture(params=[k.name for k in available()])
def kernel(request):  # type: ignore[no-untyped-def]
    return next(k for k in available() if k.name == request.param)


@pytest.mark.parametrize("codec", [Compression.LZ4, Compression.SNAPPY], ids=lambda c: c.name)
def test_schema_and_values(kernel, codec) -> None:  # type: ignore[no-untyped-def]
    raw = batch(10, 4) + batch(14, 3, compression=codec)
    out = arrow.records_to_arrow(raw, TP, 11, 16, include_headers=True, kernel=kernel)
    assert out is not None
    assert out.schema == arrow.arrow_schema(True)
    assert out.column("offset").to_pylist() == [11, 12, 13, 14, 15]
    assert out.column("value").to_pylist() == [b"v11", b"v12", b"v13", b"v14", b"v15"]
    assert out.column("key").to_pylist() == [b"k1", None, b"k3", None, b"k1"]
    assert out.column("topic").to_pylist() == ["events"] * 5
    assert out.column("partition").to_pylist() == [3] * 5
    assert out.column("timestampType").to_pylist() == [0] * 5
    assert [t.timestamp() for t in out.column("timestamp").to_pylist()] == [
        1.001,
        1.002,
        1.003,
        1.0,
        1.001,
    ]
    assert out.column("headers").to_pylist()[0] == [{"key": "h", "value": b"1"}]
    assert "headers" not in arrow.records_to_arrow(raw, TP, 0, 100).schema.names  # type: ignore[union-attr]


def test_log_append_time_and_empty_ranges() -> None:
    raw = bytearray(batch(0, 3))
    set_log_append_time(raw, 0, 5000)
    out = arrow.records_to_arrow(bytes(raw), TP, 0, 10)
    assert out is not None
    assert out.column("timestampType").to_pylist() == [1, 1, 1]
    assert {t.timestamp() for t in out.column("timestamp").to_pylist()} == {5.0}
    assert arrow.records_to_arrow(bytes(raw), TP, 3, 10) is None
    assert arrow.records_to_arrow(b"", TP, 0, 10) is None


def test_next_offset_skips_a_cut_off_tail() -> None:
    raw = batch(0, 5) + batch(5, 5)
    assert next_offset(raw, 0) == 10
    assert next_offset(raw[:-3], 0) == 5
    assert next_offset(b"", 7) == 7
    assert pa.types.is_timestamp(arrow.arrow_schema(False).field("timestamp").type)


def test_builder_batches_decode_the_same() -> None:
    builder = BatchBuilder(base_offset=100)
    for i in range(50):
        builder.append(i, None, b"x" * i)
    out = arrow.records_to_arrow(builder.build(), TP, 0, 1000)
    assert out is not None and out.num_rows == 50
    assert out.column("value").to_pylist()[7] == b"x" * 7
