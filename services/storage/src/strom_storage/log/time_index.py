"""The sparse time index of a segment: ``<base offset>.timeindex``.

Layout: an array of 12-byte big-endian entries, sorted by timestamp::

    offset size field
         0    8 timestamp         int64: a batch's max timestamp (ms)
         8    4 relative_offset   int32: offset - segment base offset of that batch's base

An entry is written alongside each offset-index entry when the segment's largest timestamp so
far has grown since the last entry; it names the first batch that reached that timestamp, so
every batch before it has a smaller max timestamp. Timestamps increase strictly and offsets
never decrease. A lookup for ``ts`` takes the last entry at or below ``ts`` and the segment
scans batch headers forward for the first batch whose max timestamp reaches ``ts``.
Thread-safety: see ``AbstractIndex``.
"""

from __future__ import annotations

import mmap
import struct
from typing import NamedTuple

from strom.errors import StorageError
from strom_storage.log._index import AbstractIndex

__all__ = ["TimeIndex", "TimestampOffset", "decode_entry"]

_ENTRY = struct.Struct(">qi")


class TimestampOffset(NamedTuple):
    """A timestamp and the offset a search for it may start from."""

    timestamp: int
    offset: int


def decode_entry(data: bytes | mmap.mmap, n: int, base_offset: int) -> tuple[int, int]:
    """Entry ``n`` of a time index's bytes (mapped, or read by a tool) as (timestamp, offset)."""
    ts, rel = _ENTRY.unpack_from(data, n * _ENTRY.size)
    return ts, base_offset + rel


class TimeIndex(AbstractIndex):
    """Sparse max-timestamp -> offset index (see module docstring). Thread-safe."""

    ENTRY_SIZE = _ENTRY.size

    def _read_entry(self, n: int) -> tuple[int, int]:
        assert self._mmap is not None
        return decode_entry(self._mmap, n, self.base_offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry with a timestamp at or below ``target_timestamp``.

        A search for the first batch reaching ``target_timestamp`` can start at its offset;
        (-1, base offset) when there is none.
        """
        with self._lock:
            self._open()
            slot = self._largest_lower_bound_slot(target_timestamp)
            if slot < 0:
                return TimestampOffset(-1, self.base_offset)
            return TimestampOffset(*self._read_entry(slot))

    def last_entry(self) -> TimestampOffset:
        """The last entry; (-1, base offset) when empty."""
        with self._lock:
            self._open()
            if self._entries == 0:
                return TimestampOffset(-1, self.base_offset)
            return TimestampOffset(*self._read_entry(self._entries - 1))

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add an entry when ``timestamp`` is above the last one; True when added."""
        with self._lock:
            self._open()
            if self._entries > 0:
                last_ts, last_offset = self._read_entry(self._entries - 1)
                if timestamp <= last_ts:
                    return False
                if offset < last_offset:
                    raise StorageError(
                        f"time index {self.path}: offset {offset} below the last {last_offset}"
                    )
            rel = offset - self.base_offset
            if not 0 <= rel <= 0x7FFFFFFF:
                raise StorageError(f"time index {self.path}: offset {offset} out of range")
            self._append_raw(_ENTRY.pack(timestamp, rel))
            return True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        with self._lock:
            self._open()
            n = self._entries
            while n > 0 and self._read_entry(n - 1)[1] >= offset:
                n -= 1
            self._truncate_to_entries(n)

    def _entries_consistent(self) -> bool:
        if self._entries == 0:
            return True
        first = self._read_entry(0)
        last = self._read_entry(self._entries - 1)
        return first[0] <= last[0] and self.base_offset <= first[1] <= last[1]
