"""One test per way a batch can be malformed: each raises its own CorruptRecordError subclass.

Batches are laid out by hand (records_util) with a valid CRC, so that the check under test is
the one that fires; both kernels must raise the same class with the same message.
"""

from __future__ import annotations

import struct

import pytest
from records_util import raw_batch, raw_record, refresh_crc, zigzag_varint

from strom.errors import (
    CorruptRecordError,
    InvalidBatchLengthError,
    InvalidCrcError,
    InvalidRecordLayoutError,
    RecordCountMismatchError,
    TruncatedBatchError,
    UnsupportedCompressionTypeError,
    UnsupportedMagicError,
    VarintOverflowError,
)
from strom.records import decode_batch, decode_columns, encode_batch
from strom.records.compression import compress
from strom.records.kernel import Kernel, available

GOOD = raw_record(offset_delta=0) + raw_record(offset_delta=1, key=b"k")


def reject(data: bytes, error: type[Exception], match: str, **options: object) -> None:
    """Every kernel, through both decoders, raises ``error`` with the same message."""
    messages = set()
    for kernel in available():
        for decoder in (decode_batch, decode_columns):
            with pytest.raises(error, match=match) as info:
                decoder(data, kernel=kernel, **options)  # type: ignore[operator]
            assert type(info.value) is error
            messages.add(str(info.value))
    assert len(messages) == 1, messages


def test_reference_batch_is_valid(kernel: Kernel) -> None:
    assert len(decode_batch(raw_batch(GOOD, count=2), kernel=kernel)) == 2


def test_wrong_crc() -> None:
    data = bytearray(raw_batch(GOOD, count=2))
    data[-1] ^= 0x01
    reject(bytes(data), InvalidCrcError, "CRC-32C is 0x")


def test_truncated_header() -> None:
    reject(raw_batch(GOOD, count=2)[:40], TruncatedBatchError, "a batch header needs 61")


def test_truncated_buffer() -> None:
    reject(raw_batch(GOOD, count=2)[:-3], TruncatedBatchError, "only .* remain")


def test_batch_length_too_short() -> None:
    reject(raw_batch(GOOD, count=2, length=48), InvalidBatchLengthError, "length field 48")


def test_batch_length_overlong() -> None:
    reject(raw_batch(GOOD, count=2, length=0x7FFFFFF0), InvalidBatchLengthError, "out of range")


def test_batch_length_beyond_buffer() -> None:
    reject(raw_batch(GOOD, count=2, length=49 + len(GOOD) + 10), TruncatedBatchError, "remain")


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_unknown_magic(magic: int) -> None:
    reject(raw_batch(GOOD, count=2, magic=magic), UnsupportedMagicError, f"magic {magic}")


def test_negative_record_count() -> None:
    reject(raw_batch(GOOD, count=-1), InvalidBatchLengthError, "record count")


def test_fewer_records_than_count() -> None:
    reject(
        raw_batch(GOOD, count=3),
        RecordCountMismatchError,
        "batch says 3 records, its records section ends after 2",
    )


def test_trailing_bytes_after_last_record() -> None:
    reject(
        raw_batch(GOOD + b"\x00\x00", count=2),
        RecordCountMismatchError,
        "batch says 2 records, but 2 bytes follow the last one",
    )


def test_empty_batch_with_bytes() -> None:
    reject(raw_batch(GOOD, count=0), RecordCountMismatchError, "batch says 0 records")


def test_empty_batch_is_valid(kernel: Kernel) -> None:
    # Kafka's compaction may leave a batch with no records (kept for producer state).
    assert decode_batch(raw_batch(b"", count=0), kernel=kernel).records == []


def test_truncated_record() -> None:
    last = raw_record(offset_delta=1, value=b"x" * 20)
    reject(
        raw_batch(raw_record() + last[:-5], count=2),
        TruncatedBatchError,
        r"record 1 at byte \d+: length 26 runs past the end of the records section",
    )


def test_truncated_record_length_varint() -> None:
    reject(
        raw_batch(raw_record() + b"\x80", count=2),
        TruncatedBatchError,
        "record 1 at byte 8: length varint is truncated",
    )


@pytest.mark.parametrize("length", [5, 0, -1, -7])
def test_record_length_too_short(length: int) -> None:
    record = raw_record(length=length)
    reject(
        raw_batch(record, count=1),
        InvalidBatchLengthError,
        f"record 0 at byte 0: length {length} is below the minimum of 6",
    )


def test_record_length_varint_overflow() -> None:
    reject(
        raw_batch(b"\xff\xff\xff\xff\xff\x01" + b"\x00" * 10, count=1),
        VarintOverflowError,
        "record 0 at byte 0: length overflows 32 bits",
    )


def test_offset_delta_varint_overflow() -> None:
    body = b"\x00\x00" + b"\x80\x80\x80\x80\x80\x01" + b"\x01\x00\x00"
    reject(
        raw_batch(raw_record(body), count=1),
        VarintOverflowError,
        "offset delta overflows 32 bits",
    )


def test_timestamp_delta_varlong_overflow() -> None:
    body = b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00\x01\x00\x00"
    reject(
        raw_batch(raw_record(body), count=1),
        VarintOverflowError,
        "timestamp delta overflows 64 bits",
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"key": b"k", "value": b"v"}, None),
        ({"key": None, "value": None}, None),
    ],
)
def test_null_lengths_are_fine(
    kernel: Kernel, fields: dict[str, bytes | None], message: None
) -> None:
    record = decode_batch(raw_batch(raw_record(**fields), count=1), kernel=kernel).records[0]  # type: ignore[arg-type]
    assert (record.key, record.value) == (fields["key"], fields["value"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x00\x00\x00" + zigzag_varint(-2) + b"\x00\x00", "key length -2 is negative"),
        (b"\x00\x00\x00\x01" + zigzag_varint(-5) + b"\x00", "value length -5 is negative"),
        (b"\x00\x00\x00\x01\x01" + zigzag_varint(-1), "header count -1 is negative"),
        (
            b"\x00\x00\x00\x01\x01\x02" + zigzag_varint(-1) + b"\x00",
            "header key length -1 is negative",
        ),
        (
            b"\x00\x00\x00\x01\x01\x02" + zigzag_varint(2) + b"hk" + zigzag_varint(-2),
            "header value length -2 is negative",
        ),
    ],
)
def test_negative_lengths(body: bytes, message: str) -> None:
    reject(raw_batch(raw_record(body), count=1), InvalidRecordLayoutError, message)


def test_invalid_utf8_header_key() -> None:
    record = raw_record(headers=((b"\xc3\x28", b"v"),))
    reject(raw_batch(record, count=1), InvalidRecordLayoutError, "header key is not valid UTF-8")


def test_surrogate_in_header_key_is_invalid_utf8() -> None:
    record = raw_record(headers=((b"\xed\xa0\x80", b"v"),))
    reject(raw_batch(record, count=1), InvalidRecordLayoutError, "not valid UTF-8")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b"\x00\x00\x00" + zigzag_varint(50) + b"abc\x01\x00",
            "key runs past the end of the record",
        ),
        (b"\x00\x00\x00\x01" + zigzag_varint(9) + b"ab\x00", "value runs past the end"),
        (b"\x00\x00\x00\x01\x01" + zigzag_varint(100), "header count 100 runs past the end"),
        (b"\x00\x00\x00\x01\x01\x02" + zigzag_varint(8) + b"hk\x00\x00", "header key runs past"),
        (b"\x00\x00\x00\x01\x01\x02\x04hk" + zigzag_varint(8) + b"\x00", "header value runs past"),
        (b"\x00\x00\x00\x01\x01\x00\x00\x00", "2 bytes left over inside the record"),
        (b"\x00\x00\x00\x01\x01\x80\x80", "header count runs past the end of the record"),
    ],
)
def test_fields_overrunning_their_record(body: bytes, message: str) -> None:
    reject(
        raw_batch(raw_record(body) + raw_record(offset_delta=1), count=2),
        InvalidRecordLayoutError,
        message,
    )


@pytest.mark.parametrize(
    ("deltas", "last", "message"),
    [
        ((0, 0), 1, "offset delta 0 is out of order"),
        ((1, 0), 1, "offset delta 0 is out of order"),
        ((0, 2), 1, "offset delta 2 is out of order or beyond the last offset delta 1"),
        ((-1, 0), 1, "offset delta -1"),
    ],
)
def test_bad_offset_deltas(deltas: tuple[int, int], last: int, message: str) -> None:
    records = b"".join(raw_record(offset_delta=d) for d in deltas)
    reject(raw_batch(records, count=2, last_offset_delta=last), InvalidRecordLayoutError, message)


def test_offset_gaps_are_fine(kernel: Kernel) -> None:
    # A compacted batch keeps its offsets: deltas may skip, up to last_offset_delta.
    records = raw_record(offset_delta=0) + raw_record(offset_delta=5)
    batch = decode_batch(
        raw_batch(records, count=2, base_offset=100, last_offset_delta=9), kernel=kernel
    )
    assert [r.offset for r in batch.records] == [100, 105]
    assert batch.next_offset == 110


def test_offsets_overflowing_int64() -> None:
    data = raw_batch(raw_record(), count=1, base_offset=2**63 - 1, last_offset_delta=1)
    reject(data, InvalidRecordLayoutError, "overflows int64")


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unsupported_compression(codec: int) -> None:
    reject(raw_batch(GOOD, count=2, attributes=codec), UnsupportedCompressionTypeError, "codec")


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_garbage(codec: int) -> None:
    reject(
        raw_batch(b"\x00garbage" * 5, count=2, attributes=codec),
        CorruptRecordError,
        r"section of \d+ bytes",
    )


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_section_truncated(codec: int) -> None:
    section = compress(codec, GOOD * 50)
    reject(
        raw_batch(section[:-4], count=100, attributes=codec),
        CorruptRecordError,
        r"section of \d+ bytes",
    )


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb(codec: int) -> None:
    data = encode_batch([(0, None, b"\x00" * 200_000)], compression=codec)
    assert len(data) < (12_000 if codec == 2 else 2000)  # snappy expands at most ~21 times
    reject(data, InvalidBatchLengthError, "decompression bomb guard", max_decompressed_size=100_000)
    assert len(decode_batch(data, max_decompressed_size=200_100)) == 1


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompressed_records_are_checked_too(codec: int) -> None:
    section = compress(codec, GOOD + b"\x00")
    reject(
        raw_batch(section, count=2, attributes=codec), RecordCountMismatchError, "1 bytes follow"
    )


def test_tampered_length_with_fixed_crc_is_caught() -> None:
    data = bytearray(raw_batch(GOOD, count=2))
    struct.pack_into(">i", data, 57, 1)  # record count 1: CRC fixed, bytes disagree
    reject(refresh_crc(data), RecordCountMismatchError, "but 9 bytes follow")
