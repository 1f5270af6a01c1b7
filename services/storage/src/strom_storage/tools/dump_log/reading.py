"""Read-only access to a file that a running node may be appending to, trimming or deleting.

Files are opened ``O_RDONLY`` and read with ``pread``, never memory-mapped: a mapping of a file
that the node truncates (an index trimmed at roll, a segment truncated by a follower) faults
with SIGBUS, while a ``pread`` past the end just returns fewer bytes. A file deleted while open
stays readable through its descriptor.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

__all__ = ["ReadOnlyFile"]

_CHUNK = 1 << 20


class ReadOnlyFile:
    """A file opened read-only; use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def __enter__(self) -> ReadOnlyFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def size(self) -> int:
        """The current size (it may grow while the file is read)."""
        return os.fstat(self._fd).st_size

    def pread(self, size: int, position: int) -> bytes:
        """Up to ``size`` bytes at ``position``; fewer where the file ends."""
        parts = []
        while size > 0:
            chunk = os.pread(self._fd, min(size, _CHUNK), position)
            if not chunk:
                break
            parts.append(chunk)
            size -= len(chunk)
            position += len(chunk)
        return b"".join(parts)

    def read_all(self) -> bytes:
        """The whole file as it is now (for the small files: indexes, snapshots, checkpoints)."""
        return self.pread(self.size(), 0)
