"""The fixed 61-byte header of a v2 record batch, and the in-place edits a storage node makes.

This module is all a storage node needs on the hot path (design rule 1): it reads and checks
headers and CRCs, and patches the base offset and leader epoch without touching the records.

Layout (big-endian, Kafka's v2 ``DefaultRecordBatch``)::

    offset size field
         0    8 base_offset              first record's offset (assigned by the leader)
         8    4 batch_length             bytes after this field: total size - 12
        12    4 partition_leader_epoch   epoch of the leader that appended it (set by the leader)
        16    1 magic                    2
        17    4 crc                      CRC-32C of bytes 21..end (attributes to last record)
        21    2 attributes               bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4,
                                         4 zstd), bit 3 timestamp type (1 LogAppendTime),
                                         bit 4 transactional, bit 5 control, bit 6 delete horizon
        23    4 last_offset_delta        last record's offset minus base_offset
        27    8 first_timestamp          base timestamp of the records' deltas (ms)
        35    8 max_timestamp            largest record timestamp (or the append time)
        43    8 producer_id              -1 when not idempotent
        51    2 producer_epoch           -1 when not idempotent
        53    4 base_sequence            first record's sequence, -1 when not idempotent
        57    4 record_count
        61    - records                  varint-encoded, possibly compressed as one block

The CRC starts after the fields a leader rewrites (base offset, length, leader epoch, magic),
so assigning offsets needs no recomputation. Only a LogAppendTime topic, which rewrites
``max_timestamp`` and the attributes, recomputes it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from strom.errors import (
    InvalidBatchLengthError,
    InvalidCrcError,
    TruncatedBatchError,
    UnsupportedMagicError,
)
from strom.records.crc import crc32c

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "CRC_START",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAX_BATCH_SIZE",
    "BatchHeader",
    "patch_base_offset",
    "patch_leader_epoch",
    "read_header",
    "set_log_append_time",
    "validate_batch",
    "walk_batches",
]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: what batch_length does not count
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
CRC_START = ATTRIBUTES_OFFSET
MAX_TIMESTAMP_OFFSET = 35
LEADER_EPOCH_OFFSET = 12
MAGIC = 2
#: Upper bound on one batch, whatever a topic's max.message.bytes says (guards length fields).
MAX_BATCH_SIZE = 1 << 30

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    """The fields of a batch header, as read from the bytes."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at 2**31 as Kafka's does; -1 if none."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_header(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, origin: int = 0
) -> BatchHeader:
    """Parse and sanity-check the header at ``pos``; does not check the CRC.

    Raises ``TruncatedBatchError`` when ``buf`` ends inside the header or the batch,
    ``InvalidBatchLengthError`` for a length shorter than a header or above ``MAX_BATCH_SIZE``,
    ``UnsupportedMagicError`` for a magic byte other than 2. ``origin`` is where ``buf`` starts
    in a larger file (a tool reading a segment piecewise): messages name byte ``origin + pos``.
    """
    available = len(buf) - pos
    if available < HEADER_SIZE:
        raise TruncatedBatchError(
            f"batch at byte {origin + pos}: {available} bytes left, "
            f"a batch header needs {HEADER_SIZE}"
        )
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise UnsupportedMagicError(
            f"batch at byte {origin + pos}: magic {header.magic}, expected {MAGIC}"
        )
    size = header.batch_length + LOG_OVERHEAD
    if size < HEADER_SIZE or size > MAX_BATCH_SIZE:
        raise InvalidBatchLengthError(
            f"batch at byte {origin + pos}: length field {header.batch_length} is out of range"
        )
    if size > available:
        raise TruncatedBatchError(
            f"batch at byte {origin + pos}: header says {size} bytes, only {available} remain"
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise InvalidBatchLengthError(
            f"batch at byte {origin + pos}: negative last offset delta or record count"
        )
    return header


def validate_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, origin: int = 0
) -> BatchHeader:
    """``read_header`` plus the CRC-32C check; raises ``InvalidCrcError`` on a mismatch."""
    header = read_header(buf, pos, origin=origin)
    actual = crc32c(memoryview(buf)[pos + CRC_START : pos + header.size])
    if actual != header.crc:
        raise InvalidCrcError(
            f"batch at byte {origin + pos} (base offset {header.base_offset}): "
            f"CRC-32C is {actual:#010x}, header says {header.crc:#010x}"
        )
    return header


def walk_batches(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True
) -> list[tuple[int, BatchHeader]]:
    """Positions and headers of the concatenated batches filling ``buf`` exactly.

    Every batch is checked (and its CRC when ``check_crc``); a buffer with trailing bytes that do
    not form a whole batch is rejected, so callers never accept part of a request.
    """
    check = validate_batch if check_crc else read_header
    batches: list[tuple[int, BatchHeader]] = []
    pos, end = 0, len(buf)
    while pos < end:
        header = check(buf, pos)
        batches.append((pos, header))
        pos += header.size
    return batches


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Overwrite the base offset of the batch at ``pos`` (outside the CRC: no recomputation)."""
    _INT64.pack_into(buf, pos, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Overwrite the partition leader epoch of the batch at ``pos`` (outside the CRC)."""
    _INT32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch at ``pos`` LogAppendTime with ``timestamp_ms`` and recompute its CRC."""
    header = read_header(buf, pos)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, header.attributes | ATTR_TIMESTAMP_TYPE)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    crc = crc32c(memoryview(buf)[pos + CRC_START : pos + header.size])
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
