"""Shared mechanics of the fixed-entry, memory-mapped segment indexes.

An index file is an array of fixed-size big-endian entries sorted by their first field (offset
or timestamp); the subclasses (``OffsetIndex``, ``TimeIndex``) define the entry layout. The
owner of the active segment opens its indexes *writable*: the file is preallocated to
``segment.index.bytes`` (rounded down to whole entries) and mapped read-write, entries are
appended at the end. When the segment rolls, or the log closes, the file is trimmed to its
valid entries, so that after a clean shutdown ``file size / entry size`` is the entry count.
A file whose size is not a multiple of the entry size, or whose entries are not sorted, fails
``sanity_check`` and is rebuilt from the segment.

Mapping is *lazy*: nothing is opened until the first lookup or append, so a node with many
segments starts without touching most index files.

Thread-safety: every method takes the index's own lock, so lookups from reader threads are safe
while the owning log appends; an entry becomes visible to readers only after it is written.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from threading import RLock
from typing import ClassVar

from strom.errors import StorageError

__all__ = ["AbstractIndex"]


class AbstractIndex:
    """A sorted array of fixed-size entries in a memory-mapped file (see module docstring).

    Thread-safety: thread-safe (every method takes the index's lock).
    """

    ENTRY_SIZE: ClassVar[int]

    def __init__(
        self, path: Path, base_offset: int, *, max_index_size: int, writable: bool = False
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._lock = RLock()
        self._mmap: mmap.mmap | None = None
        self._entries = 0
        self._max_entries = 0
        self._opened = False

    # -- opening ------------------------------------------------------------------------------

    def _open(self) -> None:
        """Map the file (lazily, on first use); the caller holds the lock."""
        if self._opened:
            return
        flags = os.O_RDWR | os.O_CREAT if self._writable else os.O_RDONLY
        try:
            fd = os.open(self.path, flags, 0o644)
        except FileNotFoundError:
            if self._writable:
                raise
            # A read-only index whose file vanished behaves as empty (lookups fall back to scans).
            self._entries = self._max_entries = 0
            self._opened = True
            return
        try:
            length = os.fstat(fd).st_size
            self._entries = length // self.ENTRY_SIZE
            if self._writable:
                size = max(self._round(self._max_index_size), self._entries * self.ENTRY_SIZE)
                size = max(size, self.ENTRY_SIZE)
                if size != length:
                    os.ftruncate(fd, size)
                self._mmap = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
                self._max_entries = size // self.ENTRY_SIZE
            elif length > 0:
                self._mmap = mmap.mmap(fd, length, access=mmap.ACCESS_READ)
                self._max_entries = self._entries
            else:
                self._max_entries = 0
        except OSError as exc:
            raise StorageError(f"cannot map index {self.path}: {exc}") from exc
        finally:
            os.close(fd)
        self._opened = True

    def _round(self, size: int) -> int:
        return size - size % self.ENTRY_SIZE

    def _close_map(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        self._opened = False

    # -- state --------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """Number of valid entries."""
        with self._lock:
            self._open()
            return self._entries

    @property
    def max_entries(self) -> int:
        with self._lock:
            self._open()
            return self._max_entries

    @property
    def is_full(self) -> bool:
        with self._lock:
            self._open()
            return self._entries >= self._max_entries

    @property
    def is_open(self) -> bool:
        """Whether the file is mapped (false until first use: the lazy-loading check)."""
        return self._opened

    @property
    def writable(self) -> bool:
        return self._writable

    def _read_entry(self, n: int) -> tuple[int, int]:
        """Entry ``n`` as (search key, value); subclasses decode the layout."""
        raise NotImplementedError

    def entry(self, n: int) -> tuple[int, int]:
        """Entry ``n`` decoded by the subclass (for tests and tools)."""
        with self._lock:
            self._open()
            if not 0 <= n < self._entries:
                raise IndexError(n)
            return self._read_entry(n)

    def _largest_lower_bound_slot(self, target: int) -> int:
        """Slot of the last entry whose key is <= ``target``; -1 when none (lock held)."""
        lo, hi = 0, self._entries - 1
        if hi < 0 or self._read_entry(0)[0] > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._read_entry(mid)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _smallest_upper_bound_slot(self, target: int) -> int:
        """Slot of the first entry whose key is >= ``target``; -1 when none (lock held)."""
        lo, hi = 0, self._entries - 1
        if hi < 0 or self._read_entry(hi)[0] < target:
            return -1
        while lo < hi:
            mid = (lo + hi) // 2
            if self._read_entry(mid)[0] >= target:
                hi = mid
            else:
                lo = mid + 1
        return lo

    # -- mutation -----------------------------------------------------------------------------

    def _append_raw(self, data: bytes) -> None:
        """Write one encoded entry at the end (lock held; subclasses check ordering)."""
        self._open()
        if not self._writable or self._mmap is None:
            raise StorageError(f"index {self.path} is read-only")
        if self._entries >= self._max_entries:
            raise StorageError(f"index {self.path} is full ({self._entries} entries)")
        pos = self._entries * self.ENTRY_SIZE
        self._mmap[pos : pos + self.ENTRY_SIZE] = data
        self._entries += 1

    def _truncate_to_entries(self, n: int) -> None:
        """Keep the first ``n`` entries (lock held)."""
        self._open()
        n = max(0, min(n, self._entries))
        if n == self._entries:
            return
        if self._writable and self._mmap is not None:
            start = n * self.ENTRY_SIZE
            end = self._entries * self.ENTRY_SIZE
            self._mmap[start:end] = bytes(end - start)
            self._entries = n
        else:
            self._close_map()
            os.truncate(self.path, n * self.ENTRY_SIZE)
            self._open()

    def reset(self) -> None:
        """Drop every entry (before a rebuild); the index becomes writable."""
        with self._lock:
            self._close_map()
            self._writable = True
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "wb"):
                pass
            self._open()

    def make_writable(self) -> None:
        """Reopen read-write with room to grow (when a segment becomes active again)."""
        with self._lock:
            if self._writable:
                return
            self._close_map()
            self._writable = True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries and make it read-only (on roll and close)."""
        with self._lock:
            if not self._opened:
                if not self._writable:
                    return
                self._open()
            if self._mmap is not None and self._writable:
                self._mmap.flush()
            self._close_map()
            if self.path.exists():
                os.truncate(self.path, self._entries * self.ENTRY_SIZE)
            self._writable = False

    def flush(self) -> None:
        """msync the mapped pages to disk."""
        with self._lock:
            if self._mmap is not None and self._writable:
                self._mmap.flush()

    def close(self) -> None:
        """Trim (if writable) and unmap; the object may be reopened lazily afterwards."""
        with self._lock:
            if self._writable and self._opened:
                self.trim_to_valid_size()
            self._close_map()

    def release(self) -> None:
        """Unmap without trimming (the file stays as it is, e.g. preallocated)."""
        with self._lock:
            self._close_map()

    def rename(self, new_path: Path) -> None:
        with self._lock:
            if self.path.exists():
                os.replace(self.path, new_path)
            self.path = new_path

    def delete(self) -> None:
        """Unmap and remove the file."""
        with self._lock:
            self._close_map()
            self.path.unlink(missing_ok=True)

    def sanity_check(self) -> bool:
        """True when the file looks like a trimmed, sorted index (cheap: size and ends only)."""
        with self._lock:
            try:
                length = self.path.stat().st_size
            except FileNotFoundError:
                return False
            if length % self.ENTRY_SIZE != 0:
                return False
            self._open()
            return self._entries_consistent()

    def _entries_consistent(self) -> bool:
        if self._entries <= 1:
            return True
        return self._read_entry(0)[0] <= self._read_entry(self._entries - 1)[0]
