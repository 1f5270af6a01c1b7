"""One log segment: a ``.log`` file of record batches plus its two sparse indexes.

The ``.log`` file is the concatenation of v2 record batches exactly as they travel on the wire
(see ``strom.records.header`` for the 61-byte batch header); there is no per-segment header or
footer. Batches are in offset order, offsets increase strictly from the segment's base offset
(the number in the file name), and every byte of the file belongs to a whole batch once the
segment has been recovered. Reads return raw byte ranges of whole batches through ``os.pread``:
the segment never holds data in memory and never decodes records.

Aborted transactions whose ABORT marker lies in the segment are listed in its ``.txnindex``
(``TransactionIndex``, written by the log, which knows the transactions).

Index entries (``OffsetIndex``, ``TimeIndex``) are added for the first batch after every
``index.interval.bytes`` of appended data; a lookup lands on an indexed batch and the segment
scans the 61-byte headers forward from there.

Thread-safety: ``append``, ``truncate_to``, ``recover``, ``on_become_inactive``, ``close`` and
``delete`` are serialised by the owning log. The read side (``read``, ``translate_offset``,
``find_offset_by_timestamp``, ``batches``) may run concurrently in other threads: ``os.pread``
on a descriptor that stays open until the segment is closed or deleted (the log delays deletion
of segments it drops, see ``file.delete.delay.ms``), and the indexes lock themselves. A reader
racing an append sees either none or all of a batch, because it is bounded by a position and
an offset that the log publishes after the write.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from strom.errors import CorruptRecordError, StorageError
from strom.records.header import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAX_BATCH_SIZE,
    BatchHeader,
    validate_batch,
)
from strom_storage.log.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_path,
)
from strom_storage.log.offset_index import OffsetIndex
from strom_storage.log.scattered import ScatteredBatches, write_all
from strom_storage.log.time_index import TimeIndex
from strom_storage.log.txn_index import TransactionIndex

__all__ = ["BatchLocation", "LogSegment", "TimestampAndOffset"]

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_MAX_RELATIVE = 0x7FFFFFFF


class BatchLocation(NamedTuple):
    """Where a batch sits in a segment file, with its header."""

    position: int
    header: BatchHeader


class TimestampAndOffset(NamedTuple):
    """Answer of a timestamp lookup: a batch's max timestamp, and the found offset."""

    timestamp: int
    offset: int
    header: BatchHeader


class LogSegment:
    """A segment's files and the operations on them (see the module docstring).

    Thread-safety: writes are serialised by the owning log; reads may run in any thread.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        writable: bool,
        file_suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.log_path = file_path(directory, base_offset, LOG_SUFFIX + file_suffix)
        self.offset_index = OffsetIndex(
            file_path(directory, base_offset, INDEX_SUFFIX + file_suffix),
            base_offset,
            max_index_size=max_index_size,
            writable=writable,
        )
        self.time_index = TimeIndex(
            file_path(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix),
            base_offset,
            max_index_size=max_index_size,
            writable=writable,
        )
        self.txn_index = TransactionIndex(
            file_path(directory, base_offset, TXN_INDEX_SUFFIX + file_suffix), base_offset
        )
        try:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            self._size = os.fstat(self._fd).st_size
        except OSError as exc:
            raise StorageError(f"cannot open segment {self.log_path}: {exc}") from exc
        self._closed = False
        self._bytes_since_last_index_entry = 0
        # (max timestamp, offset of the first batch reaching it); None until loaded lazily.
        self._max_ts_and_offset: tuple[int, int] | None = None if self._size else (-1, base_offset)
        self._rolling_timestamp: int | None = None

    # -- properties ---------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the ``.log`` file."""
        return self._size

    @property
    def closed(self) -> bool:
        return self._closed

    def _load_max_timestamp(self) -> tuple[int, int]:
        if self._max_ts_and_offset is None:
            last = self.time_index.last_entry()
            self._max_ts_and_offset = (last.timestamp, last.offset)
        return self._max_ts_and_offset

    @property
    def max_timestamp(self) -> int:
        """Largest batch max-timestamp appended (-1 when none is known)."""
        return self._load_max_timestamp()[0]

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._load_max_timestamp()[1]

    def largest_timestamp(self) -> int:
        """What time retention compares: the max timestamp, or the file's mtime if unknown."""
        ts = self.max_timestamp
        if ts > 0:
            return ts
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return self.created_ms

    def rolling_timestamp(self) -> int | None:
        """Max timestamp of the first batch (what segment.ms counts from), None when empty."""
        if self._rolling_timestamp is None and self._size >= HEADER_SIZE:
            header = self._read_header_at(0)
            if header is not None and header.max_timestamp >= 0:
                self._rolling_timestamp = header.max_timestamp
        return self._rolling_timestamp

    # -- writing ------------------------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview | ScatteredBatches,
        batches: Sequence[tuple[int, BatchHeader]],
    ) -> None:
        """Append whole validated batches (positions relative to ``data``) and index them."""
        if not batches:
            return
        last_offset = batches[-1][1].last_offset
        if last_offset - self.base_offset > _MAX_RELATIVE:
            raise StorageError(f"offset {last_offset} overflows segment {self.base_offset}")
        start = self._size
        parts = data.parts if isinstance(data, ScatteredBatches) else (data,)
        try:
            written = write_all(self._fd, parts)
        except OSError as exc:
            # Drop a partial write so the file keeps ending on a batch boundary.
            self._truncate_file(start)
            raise StorageError(f"write to {self.log_path} failed: {exc}") from exc
        self._size = start + written
        max_ts, max_off = self._load_max_timestamp()
        for pos, header in batches:
            if self._rolling_timestamp is None and start == 0 and pos == 0:
                self._rolling_timestamp = header.max_timestamp
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.base_offset
            if self._bytes_since_last_index_entry > self.index_interval_bytes and not (
                self.offset_index.is_full or self.time_index.is_full
            ):  # a full index only makes lookups scan further; the data is already written
                self.offset_index.append(header.base_offset, start + pos)
                self.time_index.maybe_append(max_ts, max_off)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += header.size
        self._max_ts_and_offset = (max_ts, max_off)

    def _truncate_file(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
        except OSError as exc:
            raise StorageError(f"truncate of {self.log_path} failed: {exc}") from exc
        self._size = size

    def should_roll(
        self,
        *,
        batch_bytes: int,
        last_offset: int,
        max_timestamp: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Whether an append of ``batch_bytes`` ending at ``last_offset`` needs a new segment.

        Time-based rolling compares, as Kafka does, the incoming batches' max timestamp with the
        first batch's (both record time), or the clock with the creation time when the
        segment's batches carry no timestamp.
        """
        if self._size == 0:
            return False
        if self._size + batch_bytes > segment_bytes:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if last_offset - self.base_offset > _MAX_RELATIVE:
            return True
        rolling = self.rolling_timestamp()
        if rolling is not None and rolling >= 0:
            return max_timestamp - rolling > segment_ms
        return now_ms - self.created_ms > segment_ms

    def on_become_inactive(self) -> None:
        """On roll: record the final max timestamp and trim both indexes to their entries."""
        max_ts, max_off = self._load_max_timestamp()
        if self.time_index.writable and max_ts >= 0:
            last = self.time_index.last_entry()
            if max_ts > last.timestamp and not self.time_index.is_full:
                self.time_index.maybe_append(max_ts, max_off)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def make_active(self) -> None:
        """Let the indexes grow again (when truncation makes an old segment the active one)."""
        self.offset_index.make_writable()
        self.time_index.make_writable()

    def flush(self) -> None:
        """fsync the data file and msync the indexes."""
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise StorageError(f"fsync of {self.log_path} failed: {exc}") from exc
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    # -- reading ------------------------------------------------------------------------------

    def _pread(self, size: int, position: int) -> bytes:
        try:
            return os.pread(self._fd, size, position)
        except OSError as exc:
            raise StorageError(f"read of {self.log_path} failed: {exc}") from exc

    def _read_header_at(self, position: int, end: int | None = None) -> BatchHeader | None:
        """The header at ``position`` if a whole, well-formed batch lies before ``end``."""
        limit = self._size if end is None else end
        if position + HEADER_SIZE > limit:
            return None
        buf = self._pread(HEADER_SIZE, position)
        if len(buf) < HEADER_SIZE:
            return None
        header = _parse_header(buf)
        if header is None or position + header.size > limit:
            return None
        return header

    def batches(self, start_position: int = 0, end: int | None = None) -> Iterator[BatchLocation]:
        """Headers of the batches from ``start_position`` (header reads only, no CRC check)."""
        position = start_position
        while True:
            header = self._read_header_at(position, end)
            if header is None:
                return
            yield BatchLocation(position, header)
            position += header.size

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchLocation | None:
        """The batch holding ``offset`` (or the first after it), searching from the index."""
        entry = self.offset_index.lookup(offset)
        start = max(entry.position, starting_position)
        for location in self.batches(start):
            if location.header.last_offset >= offset:
                return location
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (scans forward from the last index entry)."""
        next_offset = self.base_offset
        for location in self.batches(self.offset_index.last_entry().position):
            next_offset = location.header.next_offset
        return next_offset

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_position: int | None = None,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> tuple[int, bytes | memoryview] | None:
        """Raw bytes of whole batches from the one holding ``start_offset``.

        Stops before ``max_bytes`` would be exceeded, at ``max_position`` (a byte position) and
        before any batch whose base offset is ``max_offset`` or more. With ``min_one_batch`` the
        first batch is returned whole even when it exceeds ``max_bytes``. Returns (file
        position, bytes), or None when no batch here holds ``start_offset`` or later.
        """
        end = self._size if max_position is None else min(max_position, self._size)
        location = self.translate_offset(start_offset)
        if location is None or location.position >= end:
            return None
        position, first = location
        if max_offset is not None and first.base_offset >= max_offset:
            return position, b""
        if position + first.size > end:
            return position, b""
        if first.size > max_bytes:
            if not min_one_batch:
                return position, b""
            return position, self._pread(first.size, position)
        want = min(max_bytes, end - position)
        data = self._pread(want, position)
        cut = _whole_batches_prefix(data, max_offset)
        # A view, not a copy: a fetch cut short of its limit must not copy a MiB to drop a tail.
        return position, memoryview(data)[:cut] if cut < len(data) else data

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> TimestampAndOffset | None:
        """The first batch at or after ``starting_offset`` whose max timestamp is >= ``timestamp``.

        The offset returned is the batch's base offset or ``starting_offset``, whichever is
        larger; the log refines it to a record when it may decode the batch.
        """
        ts_entry = self.time_index.lookup(timestamp)
        start_offset = max(ts_entry.offset, starting_offset)
        position = self.offset_index.lookup(start_offset).position
        for location in self.batches(position):
            header = location.header
            if header.last_offset < starting_offset:
                continue
            if header.max_timestamp >= timestamp:
                return TimestampAndOffset(
                    header.max_timestamp, max(header.base_offset, starting_offset), header
                )
        return None

    def read_batch(self, location: BatchLocation) -> bytes:
        """The whole batch at ``location``."""
        return self._pread(location.header.size, location.position)

    # -- recovery and truncation --------------------------------------------------------------

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Validate every batch (header and CRC), rebuild the indexes, cut a bad tail.

        Returns the number of bytes truncated. ``on_batch`` sees every valid header in order
        (the producer-state rebuild uses it).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._bytes_since_last_index_entry = 0
        self._max_ts_and_offset = (-1, self.base_offset)
        self._rolling_timestamp = None
        position, size = 0, self._size
        next_offset = self.base_offset
        max_ts, max_off = -1, self.base_offset
        while position < size:
            header = self._read_header_at(position, size)
            if header is None or header.base_offset < next_offset:
                break
            if header.last_offset - self.base_offset > _MAX_RELATIVE:
                break
            batch = self._pread(header.size, position)
            try:
                validate_batch(batch, 0)
            except CorruptRecordError:
                break
            if position == 0:
                self._rolling_timestamp = header.max_timestamp
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.base_offset
            if self._bytes_since_last_index_entry > self.index_interval_bytes and not (
                self.offset_index.is_full or self.time_index.is_full
            ):
                self.offset_index.append(header.base_offset, position)
                self.time_index.maybe_append(max_ts, max_off)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += header.size
            if on_batch is not None:
                on_batch(header)
            next_offset = header.next_offset
            position += header.size
        self._max_ts_and_offset = (max_ts, max_off)
        truncated = size - position
        if truncated:
            self._truncate_file(position)
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset``; returns bytes removed.

        A batch holding ``offset`` in its middle goes whole (as in Kafka): nothing at or above
        ``offset`` may survive, so a follower never keeps records its leader lacks.
        """
        position, cut = self._size, offset
        for location in self.batches(self.offset_index.lookup(offset).position):
            if location.header.last_offset >= offset:
                position, cut = location.position, min(offset, location.header.base_offset)
                break
        removed = self._size - position
        self.offset_index.truncate_to(cut)
        self.time_index.truncate_to(cut)
        self.txn_index.truncate_to(cut)
        if removed:
            self._truncate_file(position)
        self._rolling_timestamp = None if position == 0 else self._rolling_timestamp
        # Recompute the max timestamp from the trimmed time index plus a scan of the tail.
        last = self.time_index.last_entry()
        max_ts, max_off = last.timestamp, last.offset
        self._bytes_since_last_index_entry = 0
        for location in self.batches(self.offset_index.last_entry().position):
            header = location.header
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.base_offset
            self._bytes_since_last_index_entry += header.size
        self._max_ts_and_offset = (max_ts, max_off)
        return removed

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Record the final max timestamp, trim the indexes and close the data file."""
        if self._closed:
            return
        if self.time_index.writable or self.offset_index.writable:
            self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.flush()
        self.txn_index.close()
        os.close(self._fd)
        self._closed = True

    def close_handles(self) -> None:
        """Close without touching the files (after a rename to .deleted, or a simulated crash)."""
        if self._closed:
            return
        self.offset_index.release()
        self.time_index.release()
        self.txn_index.close()
        os.close(self._fd)
        self._closed = True

    def rename_suffix(self, old: str, new: str) -> None:
        """Rename all the files from suffix ``old`` to ``new`` (e.g. "" -> ".deleted")."""
        for attr_path, setter in (
            (self.log_path, self._set_log_path),
            (self.offset_index.path, self.offset_index.rename),
            (self.time_index.path, self.time_index.rename),
            (self.txn_index.path, self.txn_index.rename),
        ):
            name = attr_path.name
            base = name[: len(name) - len(old)] if old else name
            setter(attr_path.with_name(base + new))

    def _set_log_path(self, new_path: Path) -> None:
        if self.log_path.exists():
            os.replace(self.log_path, new_path)
        self.log_path = new_path

    def delete(self) -> None:
        """Close and remove the files."""
        self.close_handles()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size})"


def _parse_header(buf: bytes) -> BatchHeader | None:
    """Parse and sanity-check a 61-byte header without needing the rest of the batch."""
    header = BatchHeader._make(HEADER.unpack_from(buf, 0))
    if (
        header.magic != MAGIC
        or not HEADER_SIZE <= header.size <= MAX_BATCH_SIZE
        or header.last_offset_delta < 0
        or header.record_count < 0
    ):
        return None
    return header


def _whole_batches_prefix(data: bytes, max_offset: int | None) -> int:
    """Length of the longest prefix of ``data`` made of whole batches below ``max_offset``."""
    position, end = 0, len(data)
    while position + LOG_OVERHEAD <= end:
        base_offset, length = _OFFSET_AND_LENGTH.unpack_from(data, position)
        if max_offset is not None and base_offset >= max_offset:
            break
        size = length + LOG_OVERHEAD
        if size < HEADER_SIZE or position + size > end:
            break
        position += size
    return position
