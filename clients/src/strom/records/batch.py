"""Encode and decode whole v2 record batches, byte-compatible with Kafka's DefaultRecordBatch.

A batch is a 61-byte header followed by the records section (see ``header.py`` for the header
fields and ``record.py`` for one record)::

    offset size field                   written by BatchBuilder as
         0    8 base_offset             base_offset option (a leader rewrites it)
         8    4 batch_length            total size - 12
        12    4 partition_leader_epoch  option, -1 (a leader rewrites it)
        16    1 magic                   2
        17    4 crc                     CRC-32C (Castagnoli) of bytes 21..end
        21    2 attributes              compression | 0x08 LogAppendTime | 0x10 transactional
                                        | 0x20 control
        23    4 last_offset_delta       record_count - 1
        27    8 first_timestamp         the first record's timestamp (base of the deltas)
        35    8 max_timestamp           the largest record timestamp
        43    8 producer_id             option, -1
        51    2 producer_epoch          option, -1
        53    4 base_sequence           option, -1
        57    4 record_count
        61    - records                 compressed as one stream when compression != none

The CRC covers the (compressed) records, so it is computed last. Reading validates the header
and the CRC, decompresses (bounded), then decodes every record strictly: a batch either decodes
completely or raises a ``CorruptRecordError`` subclass (``UnsupportedCompressionTypeError`` for
unknown codecs); never a partial batch.

The per-record loops run in the kernel bound at import (``kernel.ACTIVE``: the C twin when it
is built, else pure Python); every function takes ``kernel=`` to pick one explicitly.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum
from typing import Any, NamedTuple

from strom.errors import ConfigurationError, InvalidBatchLengthError
from strom.records._protocols import BytesLike, Header, HeaderIn
from strom.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    check_codec,
    compress,
    decompress,
)
from strom.records.crc import crc32c
from strom.records.header import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAX_BATCH_SIZE,
    BatchHeader,
    validate_batch,
)
from strom.records.kernel import ACTIVE, Kernel
from strom.records.record import Record, encode_records

__all__ = [
    "BatchBuilder",
    "BatchColumns",
    "DecodedBatch",
    "TimestampType",
    "decode_batch",
    "decode_batches",
    "decode_columns",
    "encode_batch",
    "iter_records",
    "rebuild_batch",
    "recompress_batch",
]

_UINT32 = struct.Struct(">I")
_INT32 = struct.Struct(">i")
_LENGTH_OFFSET = 8
_HEADER_UP_TO_MAGIC = 17  # what a reader needs to tell a cut-off batch from a corrupt one

_RANGES = {
    "base_offset": 64,
    "partition_leader_epoch": 32,
    "producer_id": 64,
    "producer_epoch": 16,
    "base_sequence": 32,
}


class TimestampType(IntEnum):
    """Attribute bit 3: what the record timestamps mean."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchBuilder:
    """Accumulates records into one v2 batch; ``build()`` returns its bytes.

    ::

        builder = BatchBuilder(compression=Compression.LZ4)
        builder.append(now_ms, b"key", b"value", [("trace", b"abc")])
        if builder.estimated_size() >= batch_size: ...
        data = builder.build()

    ``compression`` takes a ``Compression``, its code or Kafka's name (``"lz4"``); codes 5-7
    raise ``UnsupportedCompressionTypeError``. ``compression_level`` None uses the codec's
    default (lz4 fast, zstd 3, gzip 6). ``log_append_time`` sets the timestamp-type bit;
    ``max_timestamp`` then still holds the largest record timestamp until a broker stamps the
    append time with ``header.set_log_append_time``. Not thread-safe.
    """

    __slots__ = (
        "_append",
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_built",
        "_compression",
        "_level",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_writer",
    )

    def __init__(
        self,
        *,
        compression: Compression | int | str = Compression.NONE,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        log_append_time: bool = False,
        compression_level: int | None = None,
        kernel: Kernel | None = None,
    ) -> None:
        codec = check_codec(Compression.from_name(compression))
        options = {
            "base_offset": base_offset,
            "partition_leader_epoch": partition_leader_epoch,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "base_sequence": base_sequence,
        }
        for name, value in options.items():
            bits = _RANGES[name]
            if not isinstance(value, int) or not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                raise ConfigurationError(f"{name}={value!r} is not an int{bits}")
        if compression_level is not None and not isinstance(compression_level, int):
            raise ConfigurationError(f"compression_level={compression_level!r} is not an int")
        self._compression = codec
        self._level = compression_level
        self._base_offset = base_offset
        self._partition_leader_epoch = partition_leader_epoch
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._attributes = (
            int(codec)
            | (ATTR_TIMESTAMP_TYPE if log_append_time else 0)
            | (ATTR_TRANSACTIONAL if is_transactional else 0)
            | (ATTR_CONTROL if is_control else 0)
        )
        self._writer = (kernel or ACTIVE).writer()
        self._append = self._writer.append
        self._built: bytes | None = None

    def append(
        self,
        timestamp_ms: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[HeaderIn] | None = None,
    ) -> int:
        """Append one record; returns its offset delta (0, 1, 2, ...).

        ``key``/``value`` None are null (distinct from ``b""``); ``headers`` are
        ``(str, bytes | None)`` pairs. Raises ``TypeError``/``ValueError`` for bad arguments,
        ``RuntimeError`` after ``build()``; a failed append adds nothing.
        """
        return self._append(timestamp_ms, key, value, headers)

    def append_many(
        self,
        timestamps: Sequence[int],
        keys: Sequence[BytesLike | None],
        values: Sequence[BytesLike | None],
        headers: Sequence[Sequence[HeaderIn] | None] | None = None,
    ) -> int:
        """Append records from parallel sequences, all or none; returns the first offset delta."""
        return self._writer.append_many(timestamps, keys, values, headers)

    @property
    def record_count(self) -> int:
        """Records appended so far."""
        return self._writer.record_count

    @property
    def compression(self) -> Compression:
        return self._compression

    def estimated_size(self) -> int:
        """Size of the batch so far, uncompressed (header included); O(1)."""
        return HEADER_SIZE + self._writer.size

    def build(self) -> bytes:
        """The complete batch with its CRC; later appends are refused. Idempotent."""
        if self._built is not None:
            return self._built
        writer = self._writer
        count = writer.record_count
        if count == 0:
            raise ValueError("a batch needs at least one record")
        records = writer.getvalue()
        if self._compression:
            records = compress(self._compression, records, self._level)
        built = _assemble(
            records,
            base_offset=self._base_offset,
            partition_leader_epoch=self._partition_leader_epoch,
            attributes=self._attributes,
            last_offset_delta=count - 1,
            first_timestamp=writer.first_timestamp,
            max_timestamp=writer.max_timestamp,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._base_sequence,
            record_count=count,
        )
        writer.close()
        self._built = built
        return built


def _assemble(
    records: bytes,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    first_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
) -> bytes:
    """Header (with its CRC) + the records section: the one place a batch is put together."""
    size = HEADER_SIZE + len(records)
    if size > MAX_BATCH_SIZE:
        raise ValueError(f"batch of {size} bytes exceeds the limit of {MAX_BATCH_SIZE}")
    header = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        header,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        first_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    crc = crc32c(records, crc32c(memoryview(header)[CRC_START:]))
    _UINT32.pack_into(header, CRC_OFFSET, crc)
    return b"".join((header, records))


def rebuild_batch(
    header: BatchHeader, records: Sequence[Record], *, delete_horizon: int | None = None
) -> bytes:
    """A batch like ``header``'s holding only ``records`` (a subset of its own), for log
    compaction.

    Keeps the base offset and last offset delta (the batch's offset range), every record's
    offset and timestamp, the leader epoch, producer id/epoch/base sequence, attributes and
    codec, and the max timestamp; only the record count and records section change. With
    ``delete_horizon`` (or when ``header`` already has one) the delete-horizon attribute is set
    and the horizon is stored in the first-timestamp field, the base of the record timestamp
    deltas (Kafka's convention), so decoding yields the same timestamps.
    """
    attributes = header.attributes
    if delete_horizon is None and attributes & ATTR_DELETE_HORIZON:
        delete_horizon = header.first_timestamp
    if delete_horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
        base_timestamp = delete_horizon
    else:
        base_timestamp = records[0].timestamp if records else header.first_timestamp
    section = encode_records(records, header.base_offset, base_timestamp)
    if header.compression:
        section = compress(Compression(header.compression), section)
    return _assemble(
        section,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        first_timestamp=base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=len(records),
    )


def recompress_batch(
    buf: BytesLike,
    header: BatchHeader,
    pos: int = 0,
    *,
    codec: int,
    level: int | None = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """The batch at ``pos`` (whose checked ``header`` is given) with its records section in
    ``codec``: a broker's recompression to a topic's ``compression.type``.

    The records section is decompressed and compressed again as one stream, its records are
    not decoded; every header field but the codec bits, the length and the CRC is kept. Raises
    ``CorruptRecordError`` for a section that does not decompress, ``InvalidBatchLengthError``
    beyond ``max_decompressed_size``, ``UnsupportedCompressionTypeError`` for codes 5-7.
    """
    kind = check_codec(codec)
    section: BytesLike = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression:
        section = decompress(header.compression, section, max_decompressed_size)
    records = compress(kind, section, level) if kind else bytes(section)
    try:
        return _assemble(
            records,
            base_offset=header.base_offset,
            partition_leader_epoch=header.partition_leader_epoch,
            attributes=(header.attributes & ~ATTR_COMPRESSION_MASK) | kind,
            last_offset_delta=header.last_offset_delta,
            first_timestamp=header.first_timestamp,
            max_timestamp=header.max_timestamp,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            record_count=header.record_count,
        )
    except ValueError as exc:
        raise InvalidBatchLengthError(
            f"batch at byte {pos} recompressed to {kind.name.lower()}: {exc}"
        ) from None


def encode_batch(
    records: Iterable[tuple[Any, ...]],
    **builder_options: Any,
) -> bytes:
    """One batch from ``(timestamp_ms, key, value[, headers])`` tuples; options as BatchBuilder."""
    builder = BatchBuilder(**builder_options)
    append = builder.append
    for record in records:
        append(*record)
    return builder.build()


class DecodedBatch:
    """A decoded batch: its ``header`` (``BatchHeader``) and ``records`` (``list[Record]``).

    Iterating yields the records; the properties read the header.
    """

    __slots__ = ("header", "records")

    def __init__(self, header: BatchHeader, records: list[Record]) -> None:
        self.header = header
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DecodedBatch):
            return NotImplemented
        return self.header == other.header and self.records == other.records

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"DecodedBatch(base_offset={self.header.base_offset}, records={len(self.records)}, "
            f"compression={self.compression.name.lower()}, "
            f"timestamp_type={self.timestamp_type.name})"
        )

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def size(self) -> int:
        """Bytes of the batch, header included."""
        return self.header.size

    @property
    def compression(self) -> Compression:
        return Compression(self.header.attributes & ATTR_COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(self.header.is_log_append_time)

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def first_timestamp(self) -> int:
        return self.header.first_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp


class BatchColumns(NamedTuple):
    """A decoded batch as parallel lists (for columnar consumers such as Arrow builders)."""

    header: BatchHeader
    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[tuple[Header, ...]]


def _section(
    buf: BytesLike, pos: int, max_decompressed_size: int
) -> tuple[BatchHeader, BytesLike, int, int, int | None]:
    """Validate the batch at ``pos``; return its header, the (decompressed) records section
    as ``(buffer, start, end)`` and the timestamp override of a LogAppendTime batch."""
    header = validate_batch(buf, pos)
    start = pos + HEADER_SIZE
    end = pos + header.size
    codec = header.attributes & ATTR_COMPRESSION_MASK
    section: BytesLike = buf
    if codec:
        section = decompress(codec, memoryview(buf)[start:end], max_decompressed_size)
        start, end = 0, len(section)
    override = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
    return header, section, start, end, override


def decode_batch(
    buf: BytesLike,
    pos: int = 0,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    kernel: Kernel | None = None,
) -> DecodedBatch:
    """Validate (header, CRC), decompress and decode the whole batch starting at ``pos``.

    Raises a ``CorruptRecordError`` subclass for any inconsistency, or
    ``UnsupportedCompressionTypeError``. Bytes after the batch are not looked at.
    """
    header, section, start, end, override = _section(buf, pos, max_decompressed_size)
    records = (kernel or ACTIVE).decode_records(
        section,
        start,
        end,
        header.record_count,
        header.base_offset,
        header.first_timestamp,
        header.last_offset_delta,
        override,
    )
    return DecodedBatch(header, records)


def _positions(buf: BytesLike, allow_truncated_tail: bool) -> Iterator[int]:
    """Start of each batch in ``buf``; stops early at a cut-off last batch when allowed."""
    pos, end = 0, len(buf)
    while pos < end:
        if allow_truncated_tail:
            remaining = end - pos
            if remaining < _HEADER_UP_TO_MAGIC:
                return
            size = _INT32.unpack_from(buf, pos + _LENGTH_OFFSET)[0] + LOG_OVERHEAD
            if HEADER_SIZE <= size <= MAX_BATCH_SIZE and size > remaining:
                return
        yield pos
        # The length was checked by validate_batch inside the decode that ran in between.
        pos += _INT32.unpack_from(buf, pos + _LENGTH_OFFSET)[0] + LOG_OVERHEAD


def decode_batches(
    buf: BytesLike,
    *,
    allow_truncated_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    kernel: Kernel | None = None,
) -> Iterator[DecodedBatch]:
    """Decode the concatenated batches filling ``buf``, lazily, in order.

    A buffer ending inside a batch raises ``TruncatedBatchError`` unless
    ``allow_truncated_tail`` (a fetch response cut at ``max_bytes`` may end that way; Kafka's
    consumers skip such a tail too).
    """
    for pos in _positions(buf, allow_truncated_tail):
        yield decode_batch(buf, pos, max_decompressed_size=max_decompressed_size, kernel=kernel)


def iter_records(
    buf: BytesLike,
    *,
    allow_truncated_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    kernel: Kernel | None = None,
) -> Iterator[Record]:
    """Every record of every batch in ``buf``, in order (a batch is checked before any of its
    records is yielded)."""
    for batch in decode_batches(
        buf,
        allow_truncated_tail=allow_truncated_tail,
        max_decompressed_size=max_decompressed_size,
        kernel=kernel,
    ):
        yield from batch.records


def decode_columns(
    buf: BytesLike,
    *,
    allow_truncated_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    kernel: Kernel | None = None,
) -> list[BatchColumns]:
    """Decode the batches in ``buf`` as parallel lists per batch (no ``Record`` objects)."""
    decode = (kernel or ACTIVE).decode_columns
    result = []
    for pos in _positions(buf, allow_truncated_tail):
        header, section, start, end, override = _section(buf, pos, max_decompressed_size)
        columns = decode(
            section,
            start,
            end,
            header.record_count,
            header.base_offset,
            header.first_timestamp,
            header.last_offset_delta,
            override,
        )
        result.append(BatchColumns(header, *columns))
    return result
