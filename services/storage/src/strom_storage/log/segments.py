"""The sorted map base offset -> ``LogSegment`` of one partition.

Thread-safety: thread-safe. Every method takes the map's lock; iteration methods return a
snapshot list, so a reader thread can walk segments while the log adds or removes one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from threading import RLock

from strom_storage.log.segment import LogSegment

__all__ = ["LogSegments"]


class LogSegments:
    """Segments keyed by base offset, with floor/higher lookups by bisection. Thread-safe."""

    def __init__(self) -> None:
        self._lock = RLock()
        self._offsets: list[int] = []
        self._segments: dict[int, LogSegment] = {}

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Insert ``segment``; returns the segment it replaced at the same base offset."""
        with self._lock:
            base = segment.base_offset
            previous = self._segments.get(base)
            if previous is None:
                bisect.insort(self._offsets, base)
            self._segments[base] = segment
            return previous

    def remove(self, base_offset: int) -> LogSegment | None:
        with self._lock:
            segment = self._segments.pop(base_offset, None)
            if segment is not None:
                del self._offsets[bisect.bisect_left(self._offsets, base_offset)]
            return segment

    def clear(self) -> None:
        with self._lock:
            self._offsets.clear()
            self._segments.clear()

    def __len__(self) -> int:
        return len(self._offsets)

    def __contains__(self, base_offset: object) -> bool:
        return base_offset in self._segments

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def get(self, base_offset: int) -> LogSegment | None:
        return self._segments.get(base_offset)

    def values(self, start: int | None = None, end: int | None = None) -> list[LogSegment]:
        """Segments in offset order; with bounds, those whose base is in [start, end)."""
        with self._lock:
            lo = 0 if start is None else bisect.bisect_left(self._offsets, start)
            hi = len(self._offsets) if end is None else bisect.bisect_left(self._offsets, end)
            return [self._segments[o] for o in self._offsets[lo:hi]]

    def base_offsets(self) -> list[int]:
        with self._lock:
            return list(self._offsets)

    def first(self) -> LogSegment | None:
        with self._lock:
            return self._segments[self._offsets[0]] if self._offsets else None

    def last(self) -> LogSegment | None:
        with self._lock:
            return self._segments[self._offsets[-1]] if self._offsets else None

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset)
            return self._segments[self._offsets[i - 1]] if i else None

    def higher(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset)
            return self._segments[self._offsets[i]] if i < len(self._offsets) else None

    def from_floor(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` (by floor) and every later one."""
        with self._lock:
            i = max(bisect.bisect_right(self._offsets, offset) - 1, 0)
            return [self._segments[o] for o in self._offsets[i:]]

    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments.values())
