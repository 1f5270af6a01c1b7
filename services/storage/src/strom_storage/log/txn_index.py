"""The transaction index of one segment (``<base offset>.txnindex``): its aborted transactions.

A read_committed fetch must tell the consumer which transactions in the returned range were
aborted (producer id and first offset), so that it can drop their batches. The index holds one
entry per ABORT marker in the segment, in marker order. Kafka's layout, big-endian, 34 bytes an
entry, no file header::

    offset size field
         0    2 version               0
         2    8 producer_id
        10    8 first_offset          the transaction's first offset in this partition (the
                                      marker's own offset when the producer wrote nothing here)
        18    8 last_offset           the ABORT marker's offset
        26    8 last_stable_offset    the LSO right after the abort: the first offset of the
                                      earliest other open transaction, else last_offset + 1

The file is created with the first entry (a segment without aborts has none). Entries are
appended with ``write`` (the file is small and rarely written, nothing is mapped); a torn
trailing entry (a crash mid-write) is ignored by readers and cut by ``truncate_to``.

``collect`` uses ``last_stable_offset`` as Kafka does: once an entry's LSO is above the fetch's
upper bound, every transaction that started below the bound had ended by then, so no later
entry (in this segment or a later one) can overlap the fetch.

Thread-safety: writes (``append``, ``truncate_to``, ``flush``, renames, ``delete``) are
serialised by the owning log; ``collect`` may run in reader threads: it ``pread``s the entries
published before it started through the index's one descriptor, which survives renames (to
``.deleted``) and stays open until the segment's files are deleted, as for the ``.log``.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from strom.errors import StorageError

__all__ = [
    "ENTRY_SIZE",
    "TXN_INDEX_VERSION",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexFormatError",
    "iter_entries",
]

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
TXN_INDEX_VERSION = 0


class AbortedTxn(NamedTuple):
    """One entry: an aborted transaction of ``producer_id`` over [first_offset, last_offset]."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            TXN_INDEX_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class TxnIndexFormatError(ValueError):
    """``.txnindex`` bytes that do not parse; ``position`` is the byte where they break."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(f"byte {position}: {message}")
        self.position = position
        self.detail = message


def iter_entries(data: bytes, *, strict: bool = True) -> Iterator[tuple[int, AbortedTxn]]:
    """(byte position, entry) of every entry in ``data``.

    ``strict`` (tools) raises ``TxnIndexFormatError`` for an unknown version or a torn tail;
    otherwise (the engine) a torn tail is ignored.
    """
    whole = len(data) - len(data) % ENTRY_SIZE
    for pos in range(0, whole, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if strict and version != TXN_INDEX_VERSION:
            raise TxnIndexFormatError(pos, f"entry version {version}, expected {TXN_INDEX_VERSION}")
        if strict and first > last:
            raise TxnIndexFormatError(
                pos, f"entry of producer {pid}: first offset {first} above last offset {last}"
            )
        yield pos, AbortedTxn(pid, first, last, lso)
    if strict and whole != len(data):
        raise TxnIndexFormatError(
            whole, f"{len(data) - whole} trailing bytes: a torn entry ({ENTRY_SIZE} bytes each)"
        )


class TransactionIndex:
    """The ``.txnindex`` file of one segment (see module docstring).

    Thread-safety: writes serialised by the owning log; ``collect`` from any thread.
    """

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._size: int | None = None  # bytes of whole entries; read from the file when needed
        self._fd: int | None = None
        self._open_lock = threading.Lock()  # readers may open the descriptor too
        self._dirty = False

    @property
    def size(self) -> int:
        """Bytes of whole entries (0 when the file does not exist)."""
        if self._size is None:
            try:
                length = os.stat(self.path).st_size
            except FileNotFoundError:
                length = 0
            self._size = length - length % ENTRY_SIZE
        return self._size

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def _open(self) -> int:
        with self._open_lock:
            if self._fd is None:
                try:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                except OSError as exc:
                    raise StorageError(f"cannot open {self.path}: {exc}") from exc
            return self._fd

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (its marker is the newest in the segment); a torn entry left by a
        crash is overwritten."""
        size = self.size
        fd = self._open()
        try:
            os.pwrite(fd, txn.encode(), size)
        except OSError as exc:
            raise StorageError(f"write to {self.path} failed: {exc}") from exc
        self._size = size + ENTRY_SIZE
        self._dirty = True

    def _read(self, size: int) -> bytes:
        if size == 0:
            return b""
        try:
            return os.pread(self._open(), size, 0)
        except OSError as exc:
            raise StorageError(f"read of {self.path} failed: {exc}") from exc

    def entries(self) -> list[AbortedTxn]:
        """Every entry, in marker order."""
        return [txn for _, txn in iter_entries(self._read(self.size), strict=False)]

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [``fetch_offset``, ``upper_bound``), and whether the search is
        complete (no later entry can overlap: see the module docstring)."""
        found: list[AbortedTxn] = []
        for txn in self.entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset > upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose marker is at or above ``offset``."""
        if self.size == 0:
            return
        keep = 0
        for txn in self.entries():
            if txn.last_offset >= offset:
                break
            keep += ENTRY_SIZE
        if keep == self.size and self._fd is None:
            return
        fd = self._open()
        try:
            os.ftruncate(fd, keep)
        except OSError as exc:
            raise StorageError(f"truncate of {self.path} failed: {exc}") from exc
        self._size = keep
        self._dirty = True

    def flush(self) -> None:
        """fsync the file if it changed."""
        if self._fd is not None and self._dirty:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise StorageError(f"fsync of {self.path} failed: {exc}") from exc
            self._dirty = False

    def close(self) -> None:
        with self._open_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def rename(self, new_path: Path) -> None:
        """Move the file (if it exists) to ``new_path``."""
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self._size = 0

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, entries={self.size // ENTRY_SIZE})"
