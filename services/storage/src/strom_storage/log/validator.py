"""Validation of appended bytes and offset assignment, on batch headers only (rule 1; the one
exception: recompression to a topic's ``compression.type``, as Kafka's broker does).

A leader append is checked whole before anything is written, so a rejected request leaves the
log untouched: every batch's header and CRC-32C (``walk_batches``), its size against
``max.message.bytes``, its codec, record count and timestamps; the request's total size against
``segment.bytes``. Offsets (and the leader epoch) are then patched into the headers *in place*:
the request's buffer becomes the segment's bytes. A LogAppendTime topic also stamps the max
timestamp, which recomputes the batch CRC.

Thread-safety: pure functions over the caller's buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strom.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    RecordCountMismatchError,
    RecordListTooLargeError,
)
from strom.records import recompress_batch
from strom.records.compression import check_codec
from strom.records.header import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BatchHeader,
    patch_base_offset,
    patch_leader_epoch,
    read_header,
    set_log_append_time,
    walk_batches,
)
from strom_storage.log.config import LogConfig
from strom_storage.log.scattered import ScatteredBatches

__all__ = [
    "AssignedBatches",
    "assign_offsets",
    "finalize_leader_batches",
    "offsets_by_prefix",
    "recompress_batches",
    "split_by_size",
    "validate_follower_batches",
    "validate_leader_batches",
]

NO_TIMESTAMP = -1
_TXN_OR_CONTROL = ATTR_TRANSACTIONAL | ATTR_CONTROL


@dataclass(frozen=True, slots=True)
class AssignedBatches:
    """Batches after offset assignment: their positions and final headers."""

    batches: list[tuple[int, BatchHeader]]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int


def _common_checks(
    data: bytes | bytearray | memoryview, config: LogConfig, *, leader: bool = True
) -> list[tuple[int, BatchHeader]]:
    batches = walk_batches(data)
    if not batches:
        raise CorruptRecordError("the request holds no record batch")
    if not leader:
        return batches  # the leader checked sizes; a follower must not diverge on config
    for pos, header in batches:
        if header.size > config.max_message_bytes:
            raise MessageTooLargeError(
                f"batch at byte {pos} is {header.size} bytes, above max.message.bytes "
                f"{config.max_message_bytes}"
            )
        check_codec(header.compression)  # UnsupportedCompressionTypeError (snappy, 5-7)
    if len(data) > config.segment_bytes:
        raise RecordListTooLargeError(
            f"{len(data)} bytes in one append, above segment.bytes {config.segment_bytes}"
        )
    return batches


def validate_leader_batches(
    data: bytes | bytearray | memoryview, config: LogConfig, now_ms: int
) -> list[tuple[int, BatchHeader]]:
    """Check a producer's batches (see module docstring); raises a ``strom.errors`` class."""
    batches = _common_checks(data, config)
    for pos, header in batches:
        if header.attributes & _TXN_OR_CONTROL:
            if header.is_control:
                raise InvalidRecordError(
                    f"batch at byte {pos}: producers may not write control batches"
                )
            if header.producer_id < 0:
                raise InvalidRecordError(
                    f"batch at byte {pos}: a transactional batch needs a producer id"
                )
        if header.record_count != header.last_offset_delta + 1 or header.record_count == 0:
            raise RecordCountMismatchError(
                f"batch at byte {pos}: {header.record_count} records but last offset delta "
                f"{header.last_offset_delta}"
            )
        if not config.log_append_time:
            _check_timestamp(pos, header, config, now_ms)
    return batches


def recompress_batches(
    data: bytes | bytearray | memoryview,
    batches: Sequence[tuple[int, BatchHeader]],
    config: LogConfig,
) -> tuple[bytearray, list[tuple[int, BatchHeader]]] | None:
    """The batches in the topic's ``compression.type`` codec, as Kafka's broker stores them;
    None when every batch already has it (or the topic keeps the producer's codec).

    The one place a leader touches records sections (decompressing and compressing them, never
    decoding a record); a recompressed batch must still fit ``max.message.bytes``.
    """
    codec = config.recompress_to
    if codec is None or all(h.compression == codec for _, h in batches):
        return None
    level = config.compression_level(codec)
    out = bytearray()
    headers: list[tuple[int, BatchHeader]] = []
    for pos, header in batches:
        if header.compression == codec:
            batch: bytes | bytearray | memoryview = memoryview(data)[pos : pos + header.size]
        else:
            batch = recompress_batch(data, header, pos, codec=codec, level=level)
            if len(batch) > config.max_message_bytes:
                raise MessageTooLargeError(
                    f"batch at byte {pos} is {len(batch)} bytes once recompressed to "
                    f"compression.type {config.compression_type}, above max.message.bytes "
                    f"{config.max_message_bytes}"
                )
        headers.append((len(out), read_header(batch)))
        out += batch
    if len(out) > config.segment_bytes:
        raise RecordListTooLargeError(
            f"{len(out)} bytes in one append once recompressed, above segment.bytes "
            f"{config.segment_bytes}"
        )
    return out, headers


def _check_timestamp(pos: int, header: BatchHeader, config: LogConfig, now_ms: int) -> None:
    for ts in (header.first_timestamp, header.max_timestamp):
        if ts == NO_TIMESTAMP:
            continue
        if now_ms - ts > config.timestamp_before_max_ms:
            raise InvalidTimestampError(
                f"batch at byte {pos}: timestamp {ts} is more than "
                f"message.timestamp.before.max.ms before the broker's time {now_ms}"
            )
        if ts - now_ms > config.timestamp_after_max_ms:
            raise InvalidTimestampError(
                f"batch at byte {pos}: timestamp {ts} is more than "
                f"message.timestamp.after.max.ms after the broker's time {now_ms}"
            )


def validate_follower_batches(
    data: bytes | bytearray | memoryview, config: LogConfig, log_end_offset: int
) -> list[tuple[int, BatchHeader]]:
    """Check replicated batches: header, CRC, offsets increasing from the log end."""
    batches = _common_checks(data, config, leader=False)
    expected = log_end_offset
    for pos, header in batches:
        if header.base_offset < expected:
            raise CorruptRecordError(
                f"batch at byte {pos}: base offset {header.base_offset} is below the expected "
                f"next offset {expected}"
            )
        expected = header.next_offset
    return batches


def assign_offsets(
    buf: bytearray,
    batches: Sequence[tuple[int, BatchHeader]],
    *,
    next_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> AssignedBatches:
    """Patch base offsets and leader epochs in place (and the append time if given)."""
    out: list[tuple[int, BatchHeader]] = []
    offset = next_offset
    max_ts, max_ts_offset, records = NO_TIMESTAMP, next_offset, 0
    for pos, _ in batches:
        patch_base_offset(buf, pos, offset)
        patch_leader_epoch(buf, pos, leader_epoch)
        if log_append_time_ms is not None:
            set_log_append_time(buf, pos, log_append_time_ms)
        header = read_header(buf, pos)
        out.append((pos, header))
        if header.max_timestamp > max_ts:
            max_ts, max_ts_offset = header.max_timestamp, offset
        records += header.record_count
        offset = header.next_offset
    return AssignedBatches(out, next_offset, offset - 1, max_ts, max_ts_offset, records)


def offsets_by_prefix(
    data: bytes | bytearray | memoryview,
    batches: Sequence[tuple[int, BatchHeader]],
    *,
    next_offset: int,
    leader_epoch: int,
) -> tuple[ScatteredBatches, list[tuple[int, BatchHeader]]]:
    """``assign_offsets`` without touching ``data``: the batches to write (new prefixes, the
    rest of each batch from ``data``) and their final headers. Not for LogAppendTime, which
    rewrites fields under the CRC."""
    out: list[tuple[int, BatchHeader]] = []
    offset = next_offset
    for pos, header in batches:
        out.append((pos, header._replace(base_offset=offset, partition_leader_epoch=leader_epoch)))
        offset += header.last_offset_delta + 1
    return ScatteredBatches.with_new_prefixes(data, batches, [h for _, h in out]), out


def finalize_leader_batches(
    data: bytes | bytearray | memoryview,
    batches: Sequence[tuple[int, BatchHeader]],
    config: LogConfig,
    *,
    now_ms: int,
    next_offset: int,
    leader_epoch: int,
) -> tuple[bytearray | ScatteredBatches, list[tuple[int, BatchHeader]], int | None]:
    """A leader's validated batches made final: recompressed when the topic's
    ``compression.type`` asks, offsets and the leader epoch assigned, the append time stamped
    for LogAppendTime topics. Returns (what to write, its batches, the append time or None).

    The records are never copied: a ``bytearray`` is patched in place, other buffers are
    written with new header prefixes beside them (except for LogAppendTime, which rewrites
    fields under the CRC on a copy, and for recompressed batches).
    """
    recompressed = recompress_batches(data, batches, config)
    if recompressed is not None:
        data, batches = recompressed
    append_time = now_ms if config.log_append_time else None
    if append_time is None and not isinstance(data, bytearray):
        # The common case: no copy of the records, new prefixes written beside them.
        scattered, final = offsets_by_prefix(
            data, batches, next_offset=next_offset, leader_epoch=leader_epoch
        )
        return scattered, final, None
    buf = data if isinstance(data, bytearray) else bytearray(data)
    assigned = assign_offsets(
        buf,
        batches,
        next_offset=next_offset,
        leader_epoch=leader_epoch,
        log_append_time_ms=append_time,
    )
    return buf, assigned.batches, append_time


def summarize(batches: Sequence[tuple[int, BatchHeader]]) -> AssignedBatches:
    """Offsets and timestamps of batches whose offsets are already set (follower appends)."""
    max_ts, max_ts_offset, records = NO_TIMESTAMP, batches[0][1].base_offset, 0
    for _, header in batches:
        if header.max_timestamp > max_ts:
            max_ts, max_ts_offset = header.max_timestamp, header.base_offset
        records += header.record_count
    return AssignedBatches(
        list(batches),
        batches[0][1].base_offset,
        batches[-1][1].last_offset,
        max_ts,
        max_ts_offset,
        records,
    )


def split_by_size(
    batches: list[tuple[int, BatchHeader]], max_size: int
) -> list[tuple[int, int, list[tuple[int, BatchHeader]]]]:
    """Split batches into runs of at most ``max_size`` bytes (a longer batch alone), each as
    (start, end, batches with positions relative to start)."""
    out: list[tuple[int, int, list[tuple[int, BatchHeader]]]] = []
    start, current = 0, list[tuple[int, BatchHeader]]()
    for pos, header in batches:
        if current and pos + header.size - start > max_size:
            out.append((start, pos, current))
            start, current = pos, []
        current.append((pos - start, header))
    end = batches[-1][0] + batches[-1][1].size
    out.append((start, end, current))
    return out
