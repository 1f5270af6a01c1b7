"""Small checkpoint files, each holding one offset, written atomically.

Layout (text, ASCII, one value per line, as Kafka's offset checkpoint files)::

    0            format version
    <offset>     a decimal int64

Writes go to ``<name>.tmp``, are fsynced, renamed over ``<name>`` and the directory is
fsynced, so a crash leaves either the old or the new value. A missing, unreadable or malformed
file reads as None (the caller falls back to a safe default: recovery point 0, log start from
the first segment).

Thread-safety: not thread-safe; the owning log serialises writes to one file.
"""

from __future__ import annotations

import os
from pathlib import Path

from strom.errors import StorageError
from strom_storage.log.files import TMP_SUFFIX

__all__ = ["OffsetCheckpointFile", "fsync_dir", "write_atomically"]

_VERSION = 0


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
            lines = self.path.read_text("ascii").split()
        except (OSError, UnicodeDecodeError):
            return None
        if len(lines) != 2 or lines[0] != str(_VERSION):
            return None
        try:
            return int(lines[1])
        except ValueError:
            return None
