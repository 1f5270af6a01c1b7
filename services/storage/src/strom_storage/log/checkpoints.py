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

__all__ = [
    "CheckpointFormatError",
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
