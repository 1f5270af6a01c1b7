"""The in-place edits a storage node makes: offsets and epochs keep the CRC valid; switching to
LogAppendTime recomputes it."""

from __future__ import annotations

import struct

import pytest

from strom.errors import InvalidCrcError
from strom.records import (
    TimestampType,
    decode_batch,
    decode_batches,
    encode_batch,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
    validate_batch,
    walk_batches,
)
from strom.records.kernel import Kernel

CODECS = ["none", "gzip", "lz4", "zstd"]


def make(codec: str, kernel: Kernel, base_offset: int = 0) -> bytes:
    return encode_batch(
        [(1000, b"a", b"1"), (1005, None, b"2"), (990, b"c", None)],
        compression=codec,
        base_offset=base_offset,
        kernel=kernel,
    )


@pytest.mark.parametrize("codec", CODECS)
def test_patch_base_offset_keeps_crc(kernel: Kernel, codec: str) -> None:
    data = bytearray(make(codec, kernel))
    crc = validate_batch(data).crc
    patch_base_offset(data, 0, 7_000_000_000)
    header = validate_batch(data)
    assert header.crc == crc
    assert header.base_offset == 7_000_000_000
    assert [r.offset for r in decode_batch(data, kernel=kernel).records] == [
        7_000_000_000,
        7_000_000_001,
        7_000_000_002,
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_patch_leader_epoch_keeps_crc(kernel: Kernel, codec: str) -> None:
    data = bytearray(make(codec, kernel))
    crc = validate_batch(data).crc
    patch_leader_epoch(data, 0, 42)
    assert validate_batch(data).crc == crc
    assert decode_batch(data, kernel=kernel).partition_leader_epoch == 42


@pytest.mark.parametrize("codec", CODECS)
def test_set_log_append_time_recomputes_crc(kernel: Kernel, codec: str) -> None:
    data = bytearray(make(codec, kernel))
    before = validate_batch(data)
    set_log_append_time(data, 0, 1_800_000_000_000)
    after = validate_batch(data)
    assert after.crc != before.crc
    assert after.max_timestamp == 1_800_000_000_000
    assert after.is_log_append_time
    assert after.compression == before.compression
    batch = decode_batch(data, kernel=kernel)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records] == [1_800_000_000_000] * 3
    assert [r.value for r in batch.records] == [b"1", b"2", None]


def test_patching_inside_a_larger_buffer(kernel: Kernel) -> None:
    first, second = make("none", kernel), make("lz4", kernel)
    buf = bytearray(first + second)
    positions = [pos for pos, _ in walk_batches(buf)]
    assert positions == [0, len(first)]
    for i, pos in enumerate(positions):
        patch_base_offset(buf, pos, 100 * (i + 1))
        patch_leader_epoch(buf, pos, 3)
    set_log_append_time(buf, len(first), 5)
    batches = list(decode_batches(buf, kernel=kernel))
    assert [b.base_offset for b in batches] == [100, 200]
    assert [b.partition_leader_epoch for b in batches] == [3, 3]
    assert [b.timestamp_type for b in batches] == [
        TimestampType.CREATE_TIME,
        TimestampType.LOG_APPEND_TIME,
    ]
    assert bytes(buf[: len(first)]) != first  # patched in place
    assert validate_batch(buf, len(first)).crc != validate_batch(second).crc


def test_a_field_inside_the_crc_is_protected(kernel: Kernel) -> None:
    data = bytearray(make("none", kernel))
    struct.pack_into(">q", data, 35, 1)  # max_timestamp without recomputing the CRC
    with pytest.raises(InvalidCrcError):
        decode_batch(data, kernel=kernel)
