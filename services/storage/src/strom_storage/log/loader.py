"""Opening a partition directory: the clean-shutdown fast path and crash recovery.

Steps, in order:

1. Finish or discard transient files: ``*.tmp`` (a checkpoint write cut short) and
   ``*.deleted`` (segments dropped before the stop) are removed; ``*.cleaned`` (a compaction
   that did not finish) is removed; ``*.swap`` (a finished compaction not yet renamed) replaces
   the segments whose offsets it covers.
2. Open every ``*.log`` as a segment. Nothing is read and no index is mapped (indexes are
   lazy), so opening 100 segments costs 100 ``open`` + ``fstat`` calls.
3. After a clean shutdown (the ``.clean-shutdown`` marker exists) the log end offset is the next
   offset after the last batch of the active segment, found by scanning headers from its last
   index entry: no data is validated, no index rebuilt. The producer state comes from the
   snapshot written at close.
4. After an unclean stop, every segment from the one holding the recovery point on is
   recovered (``LogSegment.recover``: CRC of every batch, indexes rebuilt, a torn or corrupt
   tail truncated); a segment with a corrupt batch loses everything after it, including later
   segments. Older segments whose index files are missing or fail a sanity check get their
   indexes rebuilt. The recovered range is fsynced and the recovery point moved to the end.
   The producer state is the newest snapshot at or below the base of the first recovered
   segment, replayed forward from the batch headers of the tail; the transaction indexes are
   rebuilt for the replayed range (their entries need the producer state, and the ones written
   since the last flush may be lost).

Thread-safety: runs before the log is shared; not thread-safe.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from strom.records.header import BatchHeader
from strom_storage.log.checkpoints import OffsetCheckpointFile, fsync_dir
from strom_storage.log.config import LogConfig
from strom_storage.log.files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    HIGH_WATERMARK_FILE,
    INDEX_SUFFIX,
    LOG_START_OFFSET_FILE,
    LOG_SUFFIX,
    RECOVERY_POINT_FILE,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_path,
    offset_from_name,
)
from strom_storage.log.producer_state import CompletedTxn, EndTxnMarker, ProducerStateManager
from strom_storage.log.segment import LogSegment
from strom_storage.log.segments import LogSegments
from strom_storage.log.txn_index import AbortedTxn
from strom_storage.log.txn_markers import read_marker

__all__ = ["LoadedLog", "append_aborted", "load_log", "rebuild_producer_state"]


@dataclass
class LoadedLog:
    """What ``load_log`` found: segments and offsets ready for ``LocalLog`` and ``Log``."""

    segments: LogSegments
    log_start_offset: int
    recovery_point: int
    next_offset: int
    high_watermark: int
    producer_state: ProducerStateManager
    had_clean_shutdown: bool
    recovered_segments: int
    truncated_bytes: int


_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def _open_segment(
    directory: Path, base_offset: int, config: LogConfig, now_ms: int, suffix: str = ""
) -> LogSegment:
    return LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        created_ms=now_ms,
        writable=False,
        file_suffix=suffix,
    )


def _clean_transient_files(directory: Path, config: LogConfig, now_ms: int) -> None:
    names = sorted(os.listdir(directory))
    transient = (TMP_SUFFIX, DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
    if not any(name.endswith(transient) for name in names):
        return  # the common case: nothing to resolve, no directory fsync
    for name in names:
        if name.endswith((TMP_SUFFIX, DELETED_SUFFIX, CLEANED_SUFFIX)):
            (directory / name).unlink(missing_ok=True)
    for name in names:
        if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        base = offset_from_name(name)
        swap = _open_segment(directory, base, config, now_ms, SWAP_SUFFIX)
        last = swap.read_next_offset() - 1
        swap.close_handles()
        # The swap file replaces every original segment whose base lies in its range.
        for other in os.listdir(directory):
            if other.endswith(LOG_SUFFIX) and base <= offset_from_name(other) <= last:
                other_base = offset_from_name(other)
                for suffix in _SEGMENT_SUFFIXES:
                    file_path(directory, other_base, suffix).unlink(missing_ok=True)
        for suffix in _SEGMENT_SUFFIXES:
            swapped = file_path(directory, base, suffix + SWAP_SUFFIX)
            if swapped.exists():
                os.replace(swapped, file_path(directory, base, suffix))
    # Index files left from a swap whose .log was already renamed: the index is rebuilt.
    for name in os.listdir(directory):
        if name.endswith(SWAP_SUFFIX):
            (directory / name).unlink(missing_ok=True)
    fsync_dir(directory)


def load_log(directory: Path, config: LogConfig, *, now_ms: int) -> LoadedLog:
    """Open (creating if needed) the partition in ``directory`` (see module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    _clean_transient_files(directory, config, now_ms)

    segments = _open_segments(directory, config, now_ms)
    log_start = OffsetCheckpointFile(directory / LOG_START_OFFSET_FILE).read()
    checkpointed_recovery = OffsetCheckpointFile(directory / RECOVERY_POINT_FILE).read() or 0
    first = segments.first()
    if first is None:
        start = log_start or 0
        segment = _open_segment(directory, start, config, now_ms)
        segments.add(segment)
        first = segment
    log_start = max(log_start or 0, first.base_offset)

    recovery = _check_clean(segments) if clean else _recover(segments, checkpointed_recovery)
    next_offset = recovery.next_offset

    active = segments.last()
    assert active is not None
    for segment in segments.values():
        if segment is not active:
            segment.offset_index.trim_to_valid_size()
            segment.time_index.trim_to_valid_size()
    active.make_active()
    log_start = min(log_start, next_offset)

    hw = OffsetCheckpointFile(directory / HIGH_WATERMARK_FILE).read()
    high_watermark = min(max(hw if hw is not None else log_start, log_start), next_offset)

    producers = ProducerStateManager(
        directory, producer_id_expiration_ms=config.producer_id_expiration_ms
    )
    rebuild_producer_state(
        producers,
        segments,
        log_start,
        next_offset,
        high_watermark=high_watermark,
        snapshot_limit=recovery.snapshot_limit,
    )

    if clean:
        marker.unlink(missing_ok=True)
        fsync_dir(directory)
    return LoadedLog(
        segments=segments,
        log_start_offset=log_start,
        recovery_point=next_offset,
        next_offset=next_offset,
        high_watermark=high_watermark,
        producer_state=producers,
        had_clean_shutdown=clean,
        recovered_segments=recovery.recovered,
        truncated_bytes=recovery.truncated,
    )


def _open_segments(directory: Path, config: LogConfig, now_ms: int) -> LogSegments:
    """Every segment whose ``.log`` file is in ``directory``."""
    segments = LogSegments()
    for name in os.listdir(directory):
        if name.endswith(LOG_SUFFIX):
            try:
                base = offset_from_name(name)
            except ValueError:
                continue
            segments.add(_open_segment(directory, base, config, now_ms))
    return segments


@dataclass(frozen=True, slots=True)
class _Recovery:
    """What checking or recovering the segments found."""

    next_offset: int
    recovered: int = 0
    truncated: int = 0
    #: the producer-state snapshots at or above it are not trusted (None: all are)
    snapshot_limit: int | None = None


def _check_clean(segments: LogSegments) -> _Recovery:
    """After a clean shutdown: rebuild only missing indexes, and the active segment's when
    they fail their sanity check."""
    recovered = 0
    for segment in segments.values():
        if not _indexes_present(segment):
            segment.recover()
            recovered += 1
    active = segments.last()
    assert active is not None
    if not active.offset_index.sanity_check() or not active.time_index.sanity_check():
        active.recover()
        recovered += 1
    return _Recovery(active.read_next_offset(), recovered)


def _recover(segments: LogSegments, recovery_point: int) -> _Recovery:
    """After a crash: re-validate every segment from the one holding the recovery point,
    truncating the first torn one and deleting the segments after it (older segments only
    get missing or broken indexes rebuilt), then fsync what was recovered."""
    recovered, truncated = 0, 0
    floor = segments.floor(recovery_point)
    snapshot_limit = floor.base_offset if floor is not None else 0
    older = segments.values(end=floor.base_offset) if floor is not None else []
    for segment in older:
        if not _indexes_present(segment) or not (
            segment.offset_index.sanity_check() and segment.time_index.sanity_check()
        ):
            segment.recover()
            recovered += 1
    to_recover = segments.from_floor(recovery_point)
    for i, segment in enumerate(to_recover):
        cut = segment.recover()
        recovered += 1
        truncated += cut
        if cut:
            for later in to_recover[i + 1 :]:
                segments.remove(later.base_offset)
                truncated += later.size
                later.delete()
            break
    active = segments.last()
    assert active is not None
    next_offset = active.read_next_offset()
    for segment in segments.from_floor(recovery_point):
        segment.flush()
    return _Recovery(next_offset, recovered, truncated, snapshot_limit)


def _indexes_present(segment: LogSegment) -> bool:
    return segment.offset_index.path.exists() and segment.time_index.path.exists()


def rebuild_producer_state(
    producers: ProducerStateManager,
    segments: LogSegments,
    log_start_offset: int,
    log_end_offset: int,
    *,
    high_watermark: int,
    snapshot_limit: int | None = None,
) -> None:
    """Load the newest snapshot at or below the log end (and ``snapshot_limit``) and replay
    batch headers after it; the transaction index entries of the replayed range are rebuilt
    (dropped, then appended again for every ABORT marker replayed)."""
    producers.delete_snapshots_above(log_end_offset)
    limit = log_end_offset if snapshot_limit is None else min(snapshot_limit, log_end_offset)
    loaded = producers.load_latest_snapshot(limit)
    start = loaded if loaded is not None else log_start_offset
    if loaded is None:
        producers.reset(log_start_offset)
    producers.high_watermark = high_watermark
    if start >= log_end_offset:
        producers.map_end_offset = log_end_offset
        producers.on_high_watermark(high_watermark)
        return
    replayed = segments.from_floor(start)
    for segment in replayed:
        segment.txn_index.truncate_to(start)
    for segment in replayed:
        position = (
            segment.offset_index.lookup(start).position if segment.base_offset <= start else 0
        )
        for location in segment.batches(position):
            header = location.header
            if header.base_offset < start or header.base_offset >= log_end_offset:
                continue
            if not header.is_control:
                producers.update([header])
                continue
            marker = read_marker(segment.read_batch(location))
            for txn in producers.update([header], _constant(marker)):
                append_aborted(segment, txn)
    producers.map_end_offset = log_end_offset
    producers.on_high_watermark(high_watermark)


def _constant(marker: EndTxnMarker | None) -> Callable[[BatchHeader], EndTxnMarker | None]:
    return lambda _header: marker


def append_aborted(segment: LogSegment, txn: CompletedTxn) -> None:
    """Add ``txn`` to ``segment``'s transaction index if it was aborted."""
    if txn.aborted:
        segment.txn_index.append(
            AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)
        )
