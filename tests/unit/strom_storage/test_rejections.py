"""A rejected append leaves the log untouched, bytes on disk included."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from storage_batches import make_batch, simple_batch

from strom.errors import (
    CorruptRecordError,
    InvalidCrcError,
    InvalidTimestampError,
    MessageTooLargeError,
    OutOfOrderSequenceNumberError,
    RecordListTooLargeError,
    TruncatedBatchError,
    UnsupportedCompressionTypeError,
)
from strom.records.crc import crc32c
from strom_storage.log import Log


def _disk_state(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix == ".log"}


@pytest.fixture
def log(open_log: Callable[..., Log]) -> Log:
    log = open_log(max_message_bytes=500, segment_bytes=2000)
    log.append_as_leader(simple_batch(2))
    log.append_as_leader(make_batch([(None, b"x", 1)], producer_id=9, producer_epoch=0,
                                    base_sequence=0))  # fmt: skip
    return log


def _with_codec(batch: bytes, codec: int) -> bytes:
    data = bytearray(batch)
    data[22] = (data[22] & ~0x07) | codec  # attributes low byte, CRC recomputed below
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def _corrupt_crc() -> bytes:
    data = bytearray(simple_batch(2))
    data[-1] ^= 0x01
    return bytes(data)


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (_corrupt_crc(), InvalidCrcError),
        (simple_batch(2)[:-3], TruncatedBatchError),
        (simple_batch(1) + simple_batch(1)[:30], TruncatedBatchError),
        (simple_batch(1, value_size=600), MessageTooLargeError),
        (b"".join(simple_batch(1, value_size=400) for _ in range(5)), RecordListTooLargeError),
        (b"", CorruptRecordError),
        (
            make_batch([(None, b"x", 1)], producer_id=9, producer_epoch=0, base_sequence=5),
            OutOfOrderSequenceNumberError,
        ),
        (_with_codec(simple_batch(1), 5), UnsupportedCompressionTypeError),
    ],
    ids=["crc", "torn", "torn-second", "too-large", "too-much", "empty", "sequence-gap", "codec-5"],
)
def test_rejected_append_writes_nothing(log: Log, payload: bytes, error: type[Exception]) -> None:
    before = _disk_state(log.directory)
    end = log.log_end_offset
    with pytest.raises(error):
        log.append_as_leader(payload)
    assert _disk_state(log.directory) == before
    assert log.log_end_offset == end
    # The log still works afterwards.
    assert log.append_as_leader(simple_batch(1)).first_offset == end


def test_valid_batch_followed_by_corrupt_one_is_rejected_whole(log: Log) -> None:
    before = _disk_state(log.directory)
    with pytest.raises(InvalidCrcError):
        log.append_as_leader(simple_batch(1) + _corrupt_crc())
    assert _disk_state(log.directory) == before


def test_timestamp_bounds(open_log: Callable[..., Log]) -> None:
    log = open_log(message_timestamp_before_max_ms=1000)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(simple_batch(1, ts=1))
    assert log.log_end_offset == 0


def test_log_append_time_stamps_the_batch(open_log: Callable[..., Log]) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(simple_batch(1, ts=5))
    assert info.log_append_time > 1_000_000
    log.update_high_watermark(1)
    from strom.records.header import walk_batches

    header = walk_batches(log.reader.read(0, 1000).records)[0][1]  # CRC still valid
    assert header.is_log_append_time and header.max_timestamp == info.log_append_time
