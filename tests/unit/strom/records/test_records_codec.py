"""Encoding and decoding whole batches through the public API, for each kernel."""

from __future__ import annotations

import struct

import cramjam
import pytest
from records_util import raw_batch

from strom.errors import ConfigurationError, TruncatedBatchError
from strom.records import (
    HEADER_SIZE,
    BatchBuilder,
    Compression,
    DecodedBatch,
    Record,
    TimestampType,
    decode_batch,
    decode_batches,
    decode_columns,
    encode_batch,
    iter_records,
    read_header,
    validate_batch,
)
from strom.records.kernel import Kernel
from strom.records.varint import INT64_MAX, INT64_MIN

CODECS = [
    Compression.NONE,
    Compression.GZIP,
    Compression.SNAPPY,
    Compression.LZ4,
    Compression.ZSTD,
]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_round_trip_fields(kernel: Kernel, codec: Compression) -> None:
    headers = [("trace-id", b"abc"), ("empty", b""), ("null", None), ("ünïcode", b"\xff")]
    records = [
        (1_700_000_000_000, b"k1", b"v1", headers),
        (1_700_000_000_005, None, b"v2", None),
        (1_699_999_999_990, b"", None, []),
        (1_700_000_000_001, None, None),
        (1_700_000_000_002, b"\x00" * 300, b"x" * 70_000, [("h", b"y" * 200)]),
    ]
    data = encode_batch(
        records,
        compression=codec,
        base_offset=1000,
        partition_leader_epoch=7,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        is_transactional=True,
        kernel=kernel,
    )
    batch = decode_batch(data, kernel=kernel)
    assert batch.compression is codec
    assert batch.base_offset == 1000
    assert batch.last_offset == 1004
    assert batch.next_offset == 1005
    assert batch.partition_leader_epoch == 7
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 17)
    assert batch.is_transactional and not batch.is_control
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert batch.first_timestamp == 1_700_000_000_000
    assert batch.max_timestamp == 1_700_000_000_005
    assert batch.size == len(data)
    assert len(batch) == 5
    assert batch.records == [
        Record(1000, 1_700_000_000_000, b"k1", b"v1", tuple(headers)),
        Record(1001, 1_700_000_000_005, None, b"v2", ()),
        Record(1002, 1_699_999_999_990, b"", None, ()),
        Record(1003, 1_700_000_000_001, None, None, ()),
        Record(1004, 1_700_000_000_002, b"\x00" * 300, b"x" * 70_000, (("h", b"y" * 200),)),
    ]
    first = batch.records[0]
    assert (first.offset, first.timestamp, first.key, first.value) == (
        1000,
        1_700_000_000_000,
        b"k1",
        b"v1",
    )
    assert isinstance(first.headers, tuple)
    assert list(batch) == batch.records


def test_null_and_empty_are_distinct(kernel: Kernel) -> None:
    data = encode_batch([(0, None, b""), (0, b"", None)], kernel=kernel)
    first, second = decode_batch(data, kernel=kernel).records
    assert first.key is None and first.value == b""
    assert second.key == b"" and second.value is None


def test_extreme_timestamps_round_trip(kernel: Kernel) -> None:
    # Deltas wrap around int64 exactly as Java's long arithmetic does.
    stamps = [0, INT64_MAX, INT64_MIN, -1, INT64_MAX, 5]
    data = encode_batch([(ts, None, b"") for ts in stamps], kernel=kernel)
    batch = decode_batch(data, kernel=kernel)
    assert [r.timestamp for r in batch.records] == stamps
    assert batch.first_timestamp == 0
    assert batch.max_timestamp == INT64_MAX


def test_control_and_log_append_time(kernel: Kernel) -> None:
    data = encode_batch(
        [(10, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        is_control=True,
        is_transactional=True,
        log_append_time=True,
        kernel=kernel,
    )
    batch = decode_batch(data, kernel=kernel)
    assert batch.is_control and batch.is_transactional
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.records[0].timestamp == 10


def test_bytes_like_inputs(kernel: Kernel) -> None:
    data = encode_batch(
        [(1, bytearray(b"key"), memoryview(b"value"), [("h", bytearray(b"hv"))])], kernel=kernel
    )
    record = decode_batch(data, kernel=kernel).records[0]
    assert record.key == b"key" and record.value == b"value"
    assert record.headers == (("h", b"hv"),)
    assert type(record.key) is bytes and type(record.value) is bytes


def test_decode_accepts_bytearray_and_memoryview(kernel: Kernel) -> None:
    data = encode_batch([(1, b"k", b"v")], kernel=kernel)
    expected = decode_batch(data, kernel=kernel)
    assert decode_batch(bytearray(data), kernel=kernel) == expected
    assert decode_batch(memoryview(data), kernel=kernel) == expected
    padded = b"\x99" * 5 + data + b"\x77"
    assert decode_batch(padded, 5, kernel=kernel) == expected


def test_builder_api(kernel: Kernel) -> None:
    builder = BatchBuilder(kernel=kernel)
    assert builder.record_count == 0
    assert builder.estimated_size() == HEADER_SIZE
    assert builder.append(5, b"k", b"v") == 0
    assert builder.append(6, None, b"v", [("a", None)]) == 1
    assert builder.record_count == 2
    size = builder.estimated_size()
    data = builder.build()
    assert len(data) == size
    assert builder.build() is data
    with pytest.raises(RuntimeError):
        builder.append(7, None, None)
    assert validate_batch(data).record_count == 2


def test_build_without_records(kernel: Kernel) -> None:
    with pytest.raises(ValueError, match="at least one record"):
        BatchBuilder(kernel=kernel).build()


def test_failed_append_leaves_builder_unchanged(kernel: Kernel) -> None:
    builder = BatchBuilder(kernel=kernel)
    builder.append(1, b"k", b"v")
    size = builder.estimated_size()
    bad_calls = [
        (lambda: builder.append("1", b"k", b"v"), TypeError),  # type: ignore[arg-type]
        (lambda: builder.append(1.5, b"k", b"v"), TypeError),  # type: ignore[arg-type]
        (lambda: builder.append(2**63, b"k", b"v"), ValueError),
        (lambda: builder.append(1, "key", b"v"), TypeError),  # type: ignore[arg-type]
        (lambda: builder.append(1, b"k", 5), TypeError),  # type: ignore[arg-type]
        (lambda: builder.append(1, b"k", b"v", [("h",)]), TypeError),  # type: ignore[list-item]
        (lambda: builder.append(1, b"k", b"v", [(b"h", b"v")]), TypeError),  # type: ignore[list-item]
        (lambda: builder.append(1, b"k", b"v", [("h", "text")]), TypeError),  # type: ignore[list-item]
        (lambda: builder.append(1, b"k", b"v", 5), TypeError),  # type: ignore[arg-type]
        (lambda: builder.append(1, b"k", b"v", [("a", b"1"), 7]), TypeError),  # type: ignore[list-item]
        (lambda: builder.append(1, b"k", b"v", [("\udc80", b"1")]), UnicodeEncodeError),
    ]
    for call, error in bad_calls:
        with pytest.raises(error):
            call()
        assert builder.record_count == 1
        assert builder.estimated_size() == size
    assert builder.append(2, b"k", b"v") == 1
    assert [r.offset for r in decode_batch(builder.build(), kernel=kernel).records] == [0, 1]


def test_append_many(kernel: Kernel) -> None:
    builder = BatchBuilder(kernel=kernel)
    builder.append(1, b"a", b"1")
    first = builder.append_many([2, 3], [b"b", None], (b"2", b"3"), [[("h", b"x")], None])
    assert first == 1
    assert builder.record_count == 3
    with pytest.raises(ValueError, match="same length"):
        builder.append_many([4], [b"c", b"d"], [b"4"])
    with pytest.raises(TypeError):
        builder.append_many([4, "5"], [b"c", b"d"], [b"4", b"5"])
    assert builder.record_count == 3
    assert builder.append_many((), (), ()) == 3
    same = BatchBuilder(kernel=kernel)
    same.append(1, b"a", b"1")
    same.append(2, b"b", b"2", [("h", b"x")])
    same.append(3, None, b"3")
    assert builder.build() == same.build()


def test_builder_options_are_checked(kernel: Kernel) -> None:
    with pytest.raises(ConfigurationError, match="producer_epoch"):
        BatchBuilder(producer_epoch=1 << 15, kernel=kernel)
    with pytest.raises(ConfigurationError, match="base_offset"):
        BatchBuilder(base_offset=1 << 63, kernel=kernel)
    with pytest.raises(ConfigurationError, match="partition_leader_epoch"):
        BatchBuilder(partition_leader_epoch="1", kernel=kernel)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="lz5"):
        BatchBuilder(compression="lz5", kernel=kernel)
    with pytest.raises(ConfigurationError, match="compression type 5"):
        BatchBuilder(compression=5, kernel=kernel)
    assert BatchBuilder(compression="zstd", kernel=kernel).compression is Compression.ZSTD


def test_compression_levels(kernel: Kernel) -> None:
    records = [(i, None, b"abc" * 100) for i in range(50)]
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD):
        for level in (1, 9):
            data = encode_batch(records, compression=codec, compression_level=level, kernel=kernel)
            assert len(decode_batch(data, kernel=kernel)) == 50


def test_concatenated_batches(kernel: Kernel) -> None:
    parts = [
        encode_batch([(i, None, bytes([i]))], base_offset=i, compression=codec, kernel=kernel)
        for i, codec in enumerate(CODECS)
    ]
    data = b"".join(parts)
    batches = list(decode_batches(data, kernel=kernel))
    assert [b.base_offset for b in batches] == [0, 1, 2, 3, 4]
    assert [r.value for r in iter_records(data, kernel=kernel)] == [
        b"\x00",
        b"\x01",
        b"\x02",
        b"\x03",
        b"\x04",
    ]
    assert list(decode_batches(b"", kernel=kernel)) == []
    with pytest.raises(TruncatedBatchError):
        list(decode_batches(data[:-1], kernel=kernel))
    with pytest.raises(TruncatedBatchError):
        list(decode_batches(data + b"\x00" * 5, kernel=kernel))


def test_allow_truncated_tail(kernel: Kernel) -> None:
    data = encode_batch([(1, None, b"a")], kernel=kernel) + encode_batch(
        [(2, None, b"b")], base_offset=1, kernel=kernel
    )
    for cut in (1, 10, 30, 60, len(data) // 2 - 1):
        batches = list(decode_batches(data[:-cut], allow_truncated_tail=True, kernel=kernel))
        assert [b.base_offset for b in batches] == [0]
    assert len(list(decode_batches(data, allow_truncated_tail=True, kernel=kernel))) == 2


def test_decode_columns(kernel: Kernel) -> None:
    data = encode_batch(
        [(5, b"a", b"1", [("h", None)]), (6, None, b"2")], base_offset=10, kernel=kernel
    ) + encode_batch([(7, b"c", None)], base_offset=12, compression="lz4", kernel=kernel)
    first, second = decode_columns(data, kernel=kernel)
    assert first.header == read_header(data)
    assert first.offsets == [10, 11]
    assert first.timestamps == [5, 6]
    assert first.keys == [b"a", None]
    assert first.values == [b"1", b"2"]
    assert first.headers == [(("h", None),), ()]
    assert (second.offsets, second.keys, second.values) == ([12], [b"c"], [None])


def test_decoded_batch_repr_and_equality(kernel: Kernel) -> None:
    data = encode_batch([(1, None, b"a")], compression="gzip", kernel=kernel)
    batch = decode_batch(data, kernel=kernel)
    assert "compression=gzip" in repr(batch)
    assert batch == decode_batch(data, kernel=kernel)
    assert batch != object()
    assert isinstance(batch, DecodedBatch)


def test_rebuild_with_every_record_reproduces_the_builders_bytes() -> None:
    """Compaction's re-encoding (rebuild_batch) and the producer's (BatchBuilder) are one
    format: rebuilding a batch from all its own records gives back the same bytes."""
    from strom.records import BatchBuilder, decode_batch, rebuild_batch

    for compression in ("none", "gzip"):
        builder = BatchBuilder(
            compression=compression,
            base_offset=7,
            producer_id=3,
            producer_epoch=1,
            base_sequence=10,
            partition_leader_epoch=2,
        )
        builder.append(1_000, b"k", b"v", [("h", b"x"), ("n", None)])
        builder.append(999, None, None)
        builder.append(1_005, b"", b"value")
        built = builder.build()
        decoded = decode_batch(built)
        assert rebuild_batch(decoded.header, decoded.records) == built
        assert rebuild_batch(decoded.header, decoded.records[1:]) != built


def _records_section(count: int) -> tuple[list[tuple[int, bytes | None, bytes | None]], bytes]:
    records = [(1_000 + i, b"k%d" % i, b"value %d " % i * 50) for i in range(count)]
    return records, encode_batch(records)[HEADER_SIZE:]


def test_snappy_is_written_in_xerial_framing_as_kafkas_java_client_does() -> None:
    records, section = _records_section(200)
    assert len(section) > 64 * 1024  # several 32 KiB blocks
    data = encode_batch(records, compression=Compression.SNAPPY)
    stream = data[HEADER_SIZE:]
    # SnappyOutputStream: magic, version 1, compatible version 1, then length-prefixed blocks.
    assert stream[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    blocks, pos = [], 16
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        blocks.append(cramjam.snappy.decompress_raw(stream[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    assert pos == len(stream)
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(bytes(b) for b in blocks) == section


@pytest.mark.parametrize("framing", ["raw", "xerial-one-block"])
def test_snappy_sections_as_other_clients_write_them_are_read(kernel: Kernel, framing: str) -> None:
    # librdkafka writes one raw snappy block for a v2 batch; a xerial stream may hold the
    # whole section in one block (kafka-python's block size is a setting).
    records, section = _records_section(200)
    block = bytes(cramjam.snappy.compress_raw(section))
    if framing == "raw":
        stream = block
    else:
        stream = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block
    data = raw_batch(
        stream, count=200, attributes=Compression.SNAPPY, first_timestamp=1_000, max_timestamp=1_199
    )
    batch = decode_batch(data, kernel=kernel)
    assert batch.compression is Compression.SNAPPY
    assert [(r.timestamp, r.key, r.value) for r in batch] == [
        (1_000 + i, k, v) for i, (_, k, v) in enumerate(records)
    ]
