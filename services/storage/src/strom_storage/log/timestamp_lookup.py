"""ListOffsets by timestamp over a snapshot of segments (not the hot path).

The time index and batch headers find the first batch whose max timestamp reaches the target
(or, for MAX_TIMESTAMP, the batch holding the largest timestamp); only that one batch is
decoded, to name the exact record (unless its first timestamp already qualifies).
Thread-safety: pure functions over segment reads (safe alongside appends).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strom.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    UnsupportedCompressionTypeError,
)
from strom.records.header import ATTR_DELETE_HORIZON, BatchHeader
from strom_storage.log.cleaner.batch_rewrite import decode_batch_records
from strom_storage.log.segment import LogSegment
from strom_storage.log.segments import LogSegments

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "OffsetAndTimestamp",
    "find_max_timestamp",
    "find_offset_for_timestamp",
    "lookup_offset",
]

#: ListOffsets' special timestamps (Kafka's): log start, end (HW for consumers), largest.
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """A ListOffsets answer: an offset and the timestamp found there (-1 when not relevant)."""

    offset: int
    timestamp: int


def lookup_offset(
    segments: LogSegments, timestamp: int, *, log_start: int, limit: int
) -> OffsetAndTimestamp | None:
    """ListOffsets over ``segments`` between ``log_start`` and ``limit``: the earliest offset
    whose record timestamp is >= ``timestamp``, or the log start (``EARLIEST_TIMESTAMP``), the
    limit (``LATEST_TIMESTAMP``), the first record with the largest timestamp
    (``MAX_TIMESTAMP``). None when no record qualifies."""
    if timestamp == EARLIEST_TIMESTAMP:
        return OffsetAndTimestamp(log_start, -1)
    if timestamp == LATEST_TIMESTAMP:
        return OffsetAndTimestamp(limit, -1)
    if timestamp == MAX_TIMESTAMP:
        return find_max_timestamp(segments.values(), log_start=log_start, limit=limit)
    if timestamp < 0:
        raise OffsetOutOfRangeError(f"unsupported ListOffsets timestamp {timestamp}")
    return find_offset_for_timestamp(segments.values(), timestamp, log_start=log_start, limit=limit)


def find_max_timestamp(
    segments: Sequence[LogSegment], *, log_start: int, limit: int
) -> OffsetAndTimestamp | None:
    """The first record with the largest timestamp below ``limit`` (KIP-734's MAX_TIMESTAMP):
    segment maxima and batch headers find its batch, which alone is decoded."""
    best: OffsetAndTimestamp | None = None  # the batch's base offset
    best_segment: LogSegment | None = None
    for i, segment in enumerate(segments):
        if segment.base_offset >= limit:
            break
        whole = i + 1 < len(segments) and segments[i + 1].base_offset <= limit
        if whole:
            ts, offset = segment.max_timestamp, segment.offset_of_max_timestamp
        else:  # the segment holding the limit: only batches below it count
            ts, offset = -1, -1
            for location in segment.batches():
                header = location.header
                if header.base_offset >= limit:
                    break
                if header.max_timestamp > ts:
                    ts, offset = header.max_timestamp, header.base_offset
        if ts >= 0 and (best is None or ts > best.timestamp):
            best, best_segment = OffsetAndTimestamp(offset, ts), segment
    if best is None or best_segment is None:
        return None
    offset = _first_record_at(best_segment, best.offset, best.timestamp, limit)
    return OffsetAndTimestamp(max(offset, log_start), best.timestamp)


def _first_record_at(segment: LogSegment, base_offset: int, timestamp: int, limit: int) -> int:
    """The offset of the first record stamped ``timestamp`` in the batch at ``base_offset``
    (decodes that batch; the base offset when its records cannot tell)."""
    location = segment.translate_offset(base_offset)
    if location is None or location.header.base_offset != base_offset:
        return base_offset
    if location.header.is_log_append_time:  # every record carries the batch's time
        return base_offset
    try:
        _, records = decode_batch_records(segment.read_batch(location))
    except (CorruptRecordError, UnsupportedCompressionTypeError):
        return base_offset  # records the hot path never decoded may be malformed
    for record in records:
        if record.timestamp == timestamp and record.offset < limit:
            return record.offset
    return base_offset


def find_offset_for_timestamp(
    segments: Sequence[LogSegment], timestamp: int, *, log_start: int, limit: int
) -> OffsetAndTimestamp | None:
    """The first record at or above ``log_start`` and below ``limit`` with a timestamp >=
    ``timestamp``; None when there is none."""
    for segment in segments:
        if segment.max_timestamp < timestamp and segment is not segments[-1]:
            continue
        found = segment.find_offset_by_timestamp(timestamp, log_start)
        if found is None:
            continue
        if found.offset >= limit:
            return None
        return _refine_to_record(segment, found.header, found.offset, timestamp)
    return None


def _refine_to_record(
    segment: LogSegment, header: BatchHeader, offset: int, timestamp: int
) -> OffsetAndTimestamp:
    """Narrow a batch-level match to the first qualifying record (decodes one batch)."""
    if header.is_log_append_time:
        return OffsetAndTimestamp(offset, header.max_timestamp)
    if header.first_timestamp >= timestamp and not header.attributes & ATTR_DELETE_HORIZON:
        return OffsetAndTimestamp(offset, header.first_timestamp)
    location = segment.translate_offset(header.base_offset)
    if location is None:
        return OffsetAndTimestamp(offset, header.max_timestamp)
    try:
        _, records = decode_batch_records(segment.read_batch(location))
    except (CorruptRecordError, UnsupportedCompressionTypeError):
        # Records the hot path never decoded may be malformed: answer with the batch.
        return OffsetAndTimestamp(offset, header.max_timestamp)
    for record in records:
        if record.offset >= offset and record.timestamp >= timestamp:
            return OffsetAndTimestamp(record.offset, record.timestamp)
    return OffsetAndTimestamp(offset, header.max_timestamp)
