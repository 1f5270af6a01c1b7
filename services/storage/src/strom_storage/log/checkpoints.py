"""Small checkpoint files, each holding one offset, written atomically.

Layout (text, ASCII, one value per line, as Kafka's offset checkpoint files)::

    0            format version
    <offset>     a decimal int64

Writes go to ``<name>.tmp``, are fsynced, renamed over ``<name>`` and the directory is
fsynced, so a crash leaves either the old or the new value. A missing, unreadable or malformed
file reads as None (the caller falls back to a safe default: recovery point 0, log start from
the first segment).

``LogCheckpoints`` keeps a partition's three (recovery point, log start offset, high
watermark) and writes each only when its value changed.

Thread-safety: ``OffsetCheckpointFile`` is not thread-safe; ``LogCheckpoints`` serialises its
writes on its ``lock``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

from strom.errors import StorageError
from strom_storage.log.files import (
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    TMP_SUFFIX,
)

__all__ = [
    "CheckpointFormatError",
    "LogCheckpoints",
    "OffsetCheckpointFile",
    "fsync_dir",
    "parse_offset_checkpoint",
    "write_atomically",
]

_VERSION = 0


class CheckpointFormatError(ValueError):
    """A checkpoint file's text does not parse; ``line`` (1-based) is where it breaks."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def parse_offset_checkpoint(text: str) -> int:
    """The offset of an offset checkpoint file's text (layout in the module docstring).

    Raises ``CheckpointFormatError`` naming the line that breaks the format.
    """
    values = text.split()
    if not values:
        raise CheckpointFormatError(1, "the file is empty")
    if values[0] != str(_VERSION):
        raise CheckpointFormatError(1, f"version {values[0]!r}, expected {_VERSION}")
    if len(values) < 2:
        raise CheckpointFormatError(2, "the offset is missing")
    if len(values) > 2:
        raise CheckpointFormatError(3, f"unexpected {values[2]!r} after the offset")
    try:
        return int(values[1])
    except ValueError:
        raise CheckpointFormatError(2, f"{values[1]!r} is not an offset") from None


def fsync_dir(directory: Path) -> None:
    """fsync a directory so that renames and unlinks inside it are durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data``: write a temp file, fsync it, rename it, fsync the dir."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if sync:
            fsync_dir(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}") from exc


class OffsetCheckpointFile:
    """One offset in a small text file (see module docstring). Not thread-safe: one writer."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offset: int) -> None:
        write_atomically(self.path, f"{_VERSION}\n{offset}\n".encode("ascii"))

    def read(self) -> int | None:
        try:
            return parse_offset_checkpoint(self.path.read_text("ascii"))
        except (OSError, UnicodeDecodeError, CheckpointFormatError):
            return None


class LogCheckpoints:
    """A partition's offset checkpoints: ``recovery`` (the recovery point), ``start`` (the log
    start offset) and ``hw`` (the high watermark), each rewritten only when it changed.

    Thread-safety: writes hold ``lock``. The owning log takes it while holding its own lock
    (always in that order), so checkpoints land in the order their values were taken.
    """

    FILES = {
        "recovery": RECOVERY_POINT_FILE,
        "start": LOG_START_OFFSET_FILE,
        "hw": HIGH_WATERMARK_FILE,
    }

    def __init__(self, directory: Path) -> None:
        self.lock = threading.Lock()
        self._files = {name: OffsetCheckpointFile(directory / f) for name, f in self.FILES.items()}
        self._written: dict[str, int] = {}

    def written(self, name: str, default: int) -> int:
        """The value last written for ``name`` (``default`` before the first write)."""
        return self._written.get(name, default)

    def write(self, values: Mapping[str, int]) -> None:
        """Write the values that changed (the caller holds ``lock``)."""
        for name, value in values.items():
            if self._written.get(name) != value:
                self._files[name].write(value)
                self._written[name] = value

    def write_after(
        self,
        owner_lock: AbstractContextManager[object],
        values: Callable[[], Mapping[str, int] | None],
    ) -> None:
        """Take ``values()`` under ``owner_lock`` (None: nothing to write) and write them after
        letting it go, so the owner is not held up by the fsyncs (``lock`` is taken before
        ``owner_lock`` is let go: writes stay ordered)."""
        with owner_lock:
            taken = values()
            if taken is None:
                return
            self.lock.acquire()
        try:
            self.write(taken)
        finally:
            self.lock.release()
