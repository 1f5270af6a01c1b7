"""The local files of one partition: its segments, log end offset and recovery point.

``LocalLog`` knows files and offsets, nothing of producers, high watermarks or retention
policy: it appends validated batches to the active segment, rolls, reads raw byte ranges and
the aborted transactions of its ``.txnindex`` files, truncates, flushes up to an offset (also
with the fsyncs outside the owner's lock: ``flush_outside``), swaps in cleaned segments,
deletes segments (after ``file.delete.delay.ms``, by renaming them ``*.deleted`` first so a
concurrent reader's descriptor stays valid) and knows whether its files are ``closed``.

Thread-safety: mutating methods are *not* thread-safe; the owning ``Log`` calls them under its
lock (``flush_outside`` takes that lock itself, around the fsyncs). ``read`` and ``end`` may be
called from any thread without the lock: the log end is published as one immutable ``LogEnd``
after each write, and readers never read past it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from strom.errors import StorageError
from strom.records.header import LOG_OVERHEAD, BatchHeader, read_header
from strom_storage.log.checkpoints import fsync_dir
from strom_storage.log.config import LogConfig
from strom_storage.log.files import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from strom_storage.log.scattered import ScatteredBatches
from strom_storage.log.segment import LogSegment
from strom_storage.log.segments import LogSegments
from strom_storage.log.txn_index import AbortedTxn

__all__ = ["LocalLog", "LogEnd"]

_OFFSET_AND_LENGTH = struct.Struct(">qi")


class LogEnd(NamedTuple):
    """The log end offset with the active segment and the byte position it ends at."""

    offset: int
    segment_base: int
    position: int


@dataclass(frozen=True, slots=True)
class _FlushPlan:
    """A flush to ``target`` taken under the owner's lock and run outside it."""

    target: int
    segments: list[LogSegment]
    #: ``LocalLog._truncations`` when planned: a truncation in between voids the plan
    generation: int

    def run(self) -> None:
        """fsync the segments (no lock needed; a segment deleted meanwhile needs none)."""
        for segment in self.segments:
            try:
                segment.flush()
            except StorageError:
                if not segment.closed:
                    raise


class LocalLog:
    """Segments on disk plus the log end offset (see module docstring).

    Thread-safety: not thread-safe for writes (the owning ``Log`` holds its lock); ``read`` and
    ``end`` are safe from any thread.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: LogSegments,
        *,
        recovery_point: int,
        next_offset: int,
    ) -> None:
        self.directory = directory
        self.config = config
        self.segments = segments
        self.recovery_point = recovery_point
        active = self.active_segment
        self._end = LogEnd(next_offset, active.base_offset, active.size)
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.last_flush_ms = 0
        #: the base of the segment the last roll started: maintenance fsyncs what is below it
        self._roll_flush_to: int | None = None
        #: bumped by every truncation (a flush planned before one must not move the recovery
        #: point)
        self._truncations = 0
        self._new_files = False  # a segment was created since the directory was last fsynced
        #: set once the files are closed or deleted (``close``, ``close_handles``, ``delete_all``)
        self.closed = False

    # -- state --------------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        segment = self.segments.last()
        if segment is None:
            raise StorageError(f"log {self.directory} has no segment")
        return segment

    @property
    def end(self) -> LogEnd:
        return self._end

    @property
    def log_end_offset(self) -> int:
        return self._end.offset

    @property
    def unflushed_messages(self) -> int:
        return self._end.offset - self.recovery_point

    def new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        """A new, empty, writable segment file (not yet in the map)."""
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=now_ms,
            writable=True,
        )

    # -- writing ------------------------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview | ScatteredBatches,
        batches: Sequence[tuple[int, BatchHeader]],
    ) -> None:
        """Write validated batches (offsets already final) to the active segment."""
        segment = self.active_segment
        segment.append(data, batches)
        self._end = LogEnd(batches[-1][1].next_offset, segment.base_offset, segment.size)

    def maybe_roll(
        self,
        batch_bytes: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        now_ms: int,
    ) -> LogSegment | None:
        """Roll when the append would not fit the active segment's limits.

        The new segment starts at the append's first offset (above the log end only when a
        follower's batches skip offsets, as compacted data does).
        """
        segment = self.active_segment
        if segment.should_roll(
            batch_bytes=batch_bytes,
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            now_ms=now_ms,
            segment_bytes=self.config.segment_bytes,
            segment_ms=self.config.segment_ms,
        ):
            return self.roll(now_ms, base_offset=first_offset)
        return None

    def roll(self, now_ms: int, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op when the active is empty)."""
        active = self.active_segment
        next_offset = (
            self._end.offset if base_offset is None else max(base_offset, self._end.offset)
        )
        if active.size == 0 and active.base_offset == next_offset:
            return active
        if next_offset in self.segments:
            raise StorageError(f"segment {next_offset} already exists in {self.directory}")
        active.on_become_inactive()
        segment = self.new_segment(next_offset, now_ms)
        self.segments.add(segment)
        self._end = LogEnd(self._end.offset, segment.base_offset, 0)
        self._new_files = True
        self._roll_flush_to = segment.base_offset
        return segment

    def flush(self, up_to_offset: int | None, now_ms: int) -> None:
        """fsync every segment holding offsets in [recovery point, ``up_to_offset``) (None: the
        log end); ``now_ms`` is the last flush time ``flush.ms`` counts from."""
        target = self._flush_target(up_to_offset)
        if target is not None:
            for segment in self._segments_to_flush(target):
                segment.flush()
            self._mark_flushed(target)
        self.last_flush_ms = now_ms

    def flush_outside(
        self, owner_lock: AbstractContextManager[object], up_to_offset: int | None, now_ms: int
    ) -> None:
        """``flush`` with the fsyncs outside ``owner_lock`` (held only to plan the flush and to
        complete it), so the owner's appends go on meanwhile. The recovery point moves only if
        no truncation came in between; nothing happens once the files are closed."""
        with owner_lock:
            if self.closed:
                return
            plan = self._flush_plan(up_to_offset)
        if plan is None:
            return
        plan.run()
        with owner_lock:
            if not self.closed:
                self._flushed(plan, now_ms)

    def _flush_target(self, up_to_offset: int | None) -> int | None:
        """The offset a flush to ``up_to_offset`` would reach; None when nothing is unflushed."""
        target = self._end.offset if up_to_offset is None else min(up_to_offset, self._end.offset)
        return target if target > self.recovery_point else None

    def _segments_to_flush(self, target: int) -> list[LogSegment]:
        """The segments holding offsets in [recovery point, ``target``)."""
        return [s for s in self.segments.from_floor(self.recovery_point) if s.base_offset < target]

    def _mark_flushed(self, target: int) -> None:
        """After the segments below ``target`` were fsynced: make new file names durable and
        move the recovery point."""
        if self._new_files:
            fsync_dir(self.directory)  # make the new segment files' names durable too
            self._new_files = False
        self.recovery_point = max(self.recovery_point, min(target, self._end.offset))

    def due_flushes(self, now_ms: int) -> list[int | None]:
        """The flushes periodic upkeep owes at ``now_ms``, each an ``up_to_offset``: below the
        segment the last roll started (once per roll), and the log end (None) when
        ``flush.ms`` has passed since the last flush with messages unflushed."""
        due: list[int | None] = []
        if self._roll_flush_to is not None:
            due.append(self._roll_flush_to)
            self._roll_flush_to = None
        if self.unflushed_messages > 0 and now_ms - self.last_flush_ms >= self.config.flush_ms:
            due.append(None)
        return due

    def _flush_plan(self, up_to_offset: int | None) -> _FlushPlan | None:
        """A flush to ``up_to_offset`` to run outside the owner's lock (None: nothing to do);
        ``_flushed`` completes it."""
        target = self._flush_target(up_to_offset)
        if target is None:
            return None
        return _FlushPlan(target, self._segments_to_flush(target), self._truncations)

    def _flushed(self, plan: _FlushPlan, now_ms: int) -> None:
        """After ``plan`` ran: move the recovery point, unless a truncation came in between."""
        if plan.generation == self._truncations:
            self._mark_flushed(plan.target)
            self.last_flush_ms = now_ms

    def recovery_floor(self, checkpointed: int) -> int:
        """The base of the segment a crash recovery would start re-validating from (the one
        holding the recovery point, as ``checkpointed`` too)."""
        floor = self.segments.floor(min(self.recovery_point, checkpointed))
        return floor.base_offset if floor is not None else 0

    # -- reading ------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None,
        min_one_batch: bool,
        end: LogEnd | None = None,
    ) -> bytes | memoryview:
        """Raw whole batches from one segment, starting with the batch holding ``start_offset``.

        Like Kafka, one call reads from one segment; the next fetch continues in the next.
        """
        end = self._end if end is None else end
        limit = end.offset if max_offset is None else min(max_offset, end.offset)
        if start_offset >= limit:
            return b""
        for segment in self.segments.from_floor(start_offset):
            if segment.base_offset >= limit:
                break
            max_position = end.position if segment.base_offset == end.segment_base else None
            result = segment.read(
                start_offset,
                max_bytes,
                max_position=max_position,
                max_offset=limit,
                min_one_batch=min_one_batch,
            )
            if result is not None:
                return result[1]
        return b""

    def collect_aborted(
        self, fetch_offset: int, records: bytes | memoryview
    ) -> tuple[tuple[int, int], ...]:
        """(producer id, first offset) of the aborted transactions overlapping ``records``
        (whole batches read from ``fetch_offset``), from the transaction indexes."""
        segments = self.segments.from_floor(fetch_offset)
        if all(s.txn_index.is_empty for s in segments):
            return ()
        upper = _next_offset_after(records)
        found: list[AbortedTxn] = []
        # The marker of a transaction overlapping the batches may lie in any later segment.
        for segment in segments:
            txns, complete = segment.txn_index.collect(fetch_offset, upper)
            found.extend(txns)
            if complete:
                break
        return tuple((t.producer_id, t.first_offset) for t in found)

    # -- truncation and deletion --------------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int) -> list[LogSegment]:
        """Drop every batch whose base offset is >= ``offset``; returns segments removed whole."""
        if offset >= self._end.offset:
            return []
        self._truncations += 1
        first = self.segments.first()
        if first is None or offset <= first.base_offset:
            removed = self.segments.values()
            self.truncate_fully_and_start_at(offset, now_ms)
            return removed
        removed = self.segments.values(start=offset)
        for segment in removed:
            self.segments.remove(segment.base_offset)
        self._delete_now(removed)
        active = self.active_segment
        active.make_active()
        active.truncate_to(offset)
        next_offset = active.read_next_offset() if active.size else active.base_offset
        self._end = LogEnd(next_offset, active.base_offset, active.size)
        self.recovery_point = min(self.recovery_point, next_offset)
        return removed

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """Delete every segment and start empty at ``offset``."""
        self._truncations += 1
        self._roll_flush_to = None
        old = self.segments.values()
        self.segments.clear()
        self._delete_now(old)
        segment = self.new_segment(offset, now_ms)
        self.segments.add(segment)
        self._end = LogEnd(offset, offset, 0)
        self.recovery_point = offset

    def remove_segments(self, segments: Sequence[LogSegment], now_ms: int) -> None:
        """Take segments out of the map and schedule their files for deletion."""
        for segment in segments:
            self.segments.remove(segment.base_offset)
            try:
                segment.rename_suffix("", DELETED_SUFFIX)
            except OSError as exc:
                raise StorageError(f"cannot rename {segment.log_path}: {exc}") from exc
            self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))
        if segments:
            self.delete_pending(now_ms)

    def replace_segments(self, old: Sequence[LogSegment], cleaned: LogSegment, now_ms: int) -> bool:
        """Swap a cleaned segment (files ``*.cleaned``) in for ``old`` (the cleaner's commit).

        Crash-safe order: the cleaned files are fsynced and renamed ``*.swap``, the old ones
        renamed ``*.deleted``, then the swap files take the final names (the loader completes
        an interrupted swap). Returns False, deleting the cleaned files, when ``old`` is no
        longer a run of inactive segments here (retention or truncation got there first).
        """
        active = self.active_segment
        if any(self.segments.get(s.base_offset) is not s or s is active for s in old):
            cleaned.delete()
            return False
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.close_handles()
        cleaned.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.directory)
        self.remove_segments(old, now_ms)
        cleaned.rename_suffix(SWAP_SUFFIX, "")
        fsync_dir(self.directory)
        replacement = LogSegment(
            self.directory,
            cleaned.base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=now_ms,
            writable=False,
        )
        self.segments.add(replacement)
        return True

    def delete_pending(self, now_ms: int, *, force: bool = False) -> int:
        """Delete the files of removed segments whose delay has passed; returns how many."""
        keep: list[tuple[int, LogSegment]] = []
        done = 0
        for deadline, segment in self._pending_deletes:
            if force or deadline <= now_ms:
                segment.delete()
                done += 1
            else:
                keep.append((deadline, segment))
        self._pending_deletes = keep
        return done

    def _delete_now(self, segments: Sequence[LogSegment]) -> None:
        for segment in segments:
            segment.delete()
        if segments:
            fsync_dir(self.directory)

    def close(self) -> None:
        """Close every segment (trimming indexes) and delete pending files."""
        self.delete_pending(0, force=True)
        for segment in self.segments.values():
            segment.close()
        self.closed = True

    def close_handles(self) -> None:
        """Close the files without flushing (a simulated crash)."""
        for segment in self.segments.values():
            segment.close_handles()
        self.closed = True

    def delete_all(self) -> None:
        """Close and remove every file of the partition, and the directory."""
        self.delete_pending(0, force=True)
        for segment in self.segments.values():
            segment.delete()
        self.segments.clear()
        for name in os.listdir(self.directory):
            (self.directory / name).unlink(missing_ok=True)
        self.directory.rmdir()
        self.closed = True


def _next_offset_after(records: bytes | memoryview) -> int:
    """The offset after the last of the whole batches in ``records``."""
    position, end, last = 0, len(records), -1
    while position + LOG_OVERHEAD <= end:
        _, length = _OFFSET_AND_LENGTH.unpack_from(records, position)
        if position + length + LOG_OVERHEAD > end:
            break
        last = position
        position += length + LOG_OVERHEAD
    return read_header(records, last).next_offset if last >= 0 else 0
