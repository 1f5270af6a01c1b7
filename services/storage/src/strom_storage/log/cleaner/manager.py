"""Choosing which compacted log to clean, and running cleaning passes on it.

For each log with ``cleanup.policy`` containing ``compact`` the cleaner keeps a *first dirty
offset* in ``<partition dir>/cleaner-offset-checkpoint`` (format: ``checkpoints.py``). The
cleanable range ends at the *first uncleanable offset*: the smallest of the active segment's
base offset, the last stable offset (at most the high watermark), and the base of the first
segment whose largest timestamp is younger than ``min.compaction.lag.ms``. With segment sizes
counted whole, the *dirty ratio* is

    dirty bytes (segments from the one holding the first dirty offset, below the uncleanable)
    / all bytes below the uncleanable offset

and a log is cleaned when it reaches ``min.cleanable.dirty.ratio``, or when its first dirty
batch is older than ``max.compaction.lag.ms``; the dirtiest log first.
A pass (``compactor``) advances the first dirty offset to where its offset map stopped, so a
log with more keys than the map holds is finished over several passes.

Thread-safety: ``clean_logs`` and ``clean`` serialise on the cleaner's lock (one pass at a
time, one offset map); they run in the log manager's worker thread, alongside appends and reads
on the same logs (see ``compactor``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from strom.errors import CorruptRecordError
from strom_storage.log.checkpoints import OffsetCheckpointFile
from strom_storage.log.cleaner.compactor import (
    AbortedRanges,
    CleanStats,
    build_offset_map,
    clean_segments,
    group_segments_by_size,
)
from strom_storage.log.cleaner.offset_map import OffsetMap
from strom_storage.log.log import Log

__all__ = ["CLEANER_CHECKPOINT_FILE", "CleanableRange", "CleanerTotals", "LogCleaner"]

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
#: Kafka's log.cleaner.dedupe.buffer.size default.
DEFAULT_DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanableRange:
    """A log's clean/dirty split at one moment."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    #: Max timestamp of the first dirty batch (-1 if unknown): max.compaction.lag.ms uses it.
    first_dirty_timestamp: int = -1

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass
class CleanerTotals:
    """What every pass since start did, for the node's metrics."""

    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0


class LogCleaner:
    """Runs compaction passes over compacted logs (see module docstring).

    Thread-safety: thread-safe; passes serialise on the cleaner's lock.
    """

    def __init__(self, *, dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES) -> None:
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self._offset_map: OffsetMap | None = None
        self._lock = threading.Lock()
        self.totals = CleanerTotals()
        #: Logs whose pass failed (e.g. a batch with a valid CRC but malformed records, which
        #: the hot path never decodes): skipped until the node restarts, as Kafka does.
        self.uncleanable: set[Path] = set()

    def _map(self) -> OffsetMap:
        if self._offset_map is None:
            self._offset_map = OffsetMap(self.dedupe_buffer_bytes)
        else:
            self._offset_map.clear()
        return self._offset_map

    @staticmethod
    def _checkpoint(log: Log) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(log.directory / CLEANER_CHECKPOINT_FILE)

    def cleanable_range(self, log: Log, now_ms: int) -> CleanableRange:
        """The clean and dirty sections of ``log`` now."""
        segments = log.segments()
        first_dirty = max(self._checkpoint(log).read() or 0, log.log_start_offset)
        uncleanable = min(segments[-1].base_offset, log.last_stable_offset)
        lag = log.config.min_compaction_lag_ms
        if lag > 0:
            for segment in segments[:-1]:
                if segment.largest_timestamp() > now_ms - lag:
                    uncleanable = min(uncleanable, segment.base_offset)
                    break
        clean = dirty = 0
        for i, segment in enumerate(segments[:-1]):
            if segment.base_offset >= uncleanable:
                break
            end = segments[i + 1].base_offset
            if end <= first_dirty:
                clean += segment.size
            else:
                dirty += segment.size
        first_dirty = min(first_dirty, uncleanable)
        first_ts = -1
        holder = next(
            (s for i, s in enumerate(segments[:-1]) if segments[i + 1].base_offset > first_dirty),
            None,
        )
        if dirty and holder is not None:
            location = holder.translate_offset(first_dirty)
            first_ts = location.header.max_timestamp if location is not None else -1
        return CleanableRange(first_dirty, uncleanable, clean, dirty, first_ts)

    @staticmethod
    def _due(log: Log, cleanable: CleanableRange, now_ms: int) -> bool:
        """Dirty enough (min.cleanable.dirty.ratio) or waited too long (max.compaction.lag.ms)."""
        if not cleanable.dirty_bytes:
            return False
        if cleanable.dirty_ratio >= log.config.min_cleanable_dirty_ratio:
            return True
        lag = log.config.max_compaction_lag_ms
        first_ts = cleanable.first_dirty_timestamp
        return first_ts >= 0 and now_ms - first_ts > lag

    def clean_logs(self, logs: Sequence[Log], now_ms: int) -> int:
        """One pass on every compacted log at or above its dirty ratio, dirtiest first."""
        candidates = []
        for log in logs:
            if log.closed or not log.config.compact or log.directory in self.uncleanable:
                continue
            cleanable = self.cleanable_range(log, now_ms)
            if self._due(log, cleanable, now_ms):
                candidates.append((cleanable.dirty_ratio, log))
        candidates.sort(key=lambda c: -c[0])
        done = 0
        for _, log in candidates:
            try:
                if self.clean(log, now_ms) is not None:
                    done += 1
            except CorruptRecordError:
                _logger.exception("marking %s uncleanable", log.directory)
                self.uncleanable.add(log.directory)
        return done

    def clean(self, log: Log, now_ms: int) -> CleanStats | None:
        """One compaction pass on ``log`` whatever its dirty ratio; None when nothing is dirty."""
        with self._lock:
            cleanable = self.cleanable_range(log, now_ms)
            start, upper = cleanable.first_dirty_offset, cleanable.first_uncleanable_offset
            if start >= upper:
                return None
            offset_map = self._map()
            segments = log.segments()
            aborted = AbortedRanges.of(segments)
            end = build_offset_map(segments, start, upper, offset_map, aborted)
            config = log.config
            to_clean = [s for s in segments[:-1] if s.base_offset < end]
            groups = group_segments_by_size(
                to_clean,
                max_size=config.segment_bytes,
                max_index_entries=config.segment_index_bytes // 8,
            )
            stats = CleanStats(end_offset=end)
            retain = frozenset(
                entry.batches[-1].first_offset
                for entry in log.producer_state.producers.values()
                if entry.batches
            )
            for group in groups:
                cleaned = clean_segments(
                    group,
                    offset_map,
                    end_offset=end,
                    now_ms=now_ms,
                    delete_retention_ms=config.delete_retention_ms,
                    index_interval_bytes=config.index_interval_bytes,
                    max_index_size=config.segment_index_bytes,
                    stats=stats,
                    retain_batches=retain,
                    aborted=aborted,
                )
                if not log.replace_segments(group, cleaned):
                    return stats  # the log changed under us (retention, truncation): retry later
                stats.segments_in += len(group)
                stats.segments_out += 1
                stats.groups.append([s.base_offset for s in group])
            self._checkpoint(log).write(end)
            self._count(stats)
            return stats

    def _count(self, stats: CleanStats) -> None:
        totals = self.totals
        totals.passes += 1
        totals.bytes_read += stats.bytes_in
        totals.bytes_written += stats.bytes_out
        totals.records_removed += stats.records_removed
