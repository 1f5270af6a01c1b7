"""The sparse offset index of a segment: ``<base offset>.index``.

Layout: an array of 8-byte big-endian entries, sorted by offset::

    offset size field
         0    4 relative_offset   int32: offset - segment base offset
         4    4 position          int32: byte position of the batch in the .log file

One entry is added after every ``index.interval.bytes`` of appended batches; it names a batch's
*base offset* and the position where that batch starts, so a lookup lands on a batch boundary
and the segment scans batch headers forward from there. Offsets and positions both increase
strictly. Thread-safety: see ``AbstractIndex``.
"""

from __future__ import annotations

import mmap
import struct
from typing import NamedTuple

from strom.errors import StorageError
from strom_storage.log._index import AbstractIndex

__all__ = ["OffsetIndex", "OffsetPosition", "decode_entry"]

_ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    """An absolute offset and the byte position of the batch that starts there."""

    offset: int
    position: int


def decode_entry(data: bytes | mmap.mmap, n: int, base_offset: int) -> tuple[int, int]:
    """Entry ``n`` of an offset index's bytes (mapped, or read by a tool) as (offset, position)."""
    rel, pos = _ENTRY.unpack_from(data, n * _ENTRY.size)
    return base_offset + rel, pos


class OffsetIndex(AbstractIndex):
    """Sparse offset -> file position index (see module docstring). Thread-safe."""

    ENTRY_SIZE = _ENTRY.size

    def _read_entry(self, n: int) -> tuple[int, int]:
        assert self._mmap is not None
        return decode_entry(self._mmap, n, self.base_offset)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry at or below ``target_offset``; (base offset, 0) when there is none."""
        with self._lock:
            self._open()
            slot = self._largest_lower_bound_slot(target_offset)
            if slot < 0:
                return OffsetPosition(self.base_offset, 0)
            return OffsetPosition(*self._read_entry(slot))

    def last_entry(self) -> OffsetPosition:
        """The last entry; (base offset, 0) when empty."""
        with self._lock:
            self._open()
            if self._entries == 0:
                return OffsetPosition(self.base_offset, 0)
            return OffsetPosition(*self._read_entry(self._entries - 1))

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must increase."""
        with self._lock:
            self._open()
            if self._entries > 0:
                last_offset, last_position = self._read_entry(self._entries - 1)
                if offset <= last_offset or position <= last_position:
                    raise StorageError(
                        f"index {self.path}: entry ({offset}, {position}) is not above "
                        f"the last ({last_offset}, {last_position})"
                    )
            rel = offset - self.base_offset
            if not 0 <= rel <= 0x7FFFFFFF:
                raise StorageError(f"index {self.path}: offset {offset} out of relative range")
            self._append_raw(_ENTRY.pack(rel, position))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        with self._lock:
            self._open()
            slot = self._smallest_upper_bound_slot(offset)
            self._truncate_to_entries(self._entries if slot < 0 else slot)

    def _entries_consistent(self) -> bool:
        if self._entries == 0:
            return True
        first = self._read_entry(0)
        last = self._read_entry(self._entries - 1)
        return self.base_offset <= first[0] <= last[0] and first[1] <= last[1]
