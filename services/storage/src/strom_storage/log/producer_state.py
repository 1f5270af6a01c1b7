"""Idempotent-producer state of one partition, and its snapshot files.

For every producer id the log remembers its epoch and the metadata of its last five batches
(first/last sequence, first/last offset, max timestamp). A leader append checks each
idempotent batch (``producer_id >= 0``) against it:

* a batch whose (epoch, first sequence, last sequence) matches a remembered batch is a
  duplicate (a producer retry): the append is answered with the original offsets, nothing is
  written;
* an epoch below the producer's current one is fenced: ``InvalidProducerEpochError``;
* a new epoch must start at sequence 0, a known epoch must continue at last sequence + 1
  (wrapping at 2**31), otherwise ``OutOfOrderSequenceNumberError``. A producer the partition
  has no state for (new, expired, or removed by retention) may start at any sequence.

Only batch *headers* are needed: producer id, epoch, base sequence and last offset delta. The
state is therefore rebuilt after a restart by scanning headers of the log tail after the latest
snapshot, never by decoding records.

Snapshot file ``<20-digit offset>.snapshot``: the state after every batch below ``offset``.
Taken at segment roll and at close; written atomically (temp, fsync, rename). Byte layout,
big-endian::

    offset size field
         0    2 version                 1
         2    4 crc                     CRC-32C of every byte after this field
         6    4 producer_count
        10    - producers, each:
                8 producer_id
                2 producer_epoch
                8 last_timestamp        max timestamp of its last batch (ms; expiration)
                1 batch_count           0..5, oldest first, each 28 bytes:
                  4 first_sequence
                  4 last_sequence
                  8 first_offset
                  4 offset_delta        last offset - first offset
                  8 max_timestamp

Thread-safety: not thread-safe; the owning ``Log`` calls it under its lock.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from strom.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
)
from strom.records.crc import crc32c
from strom.records.header import BatchHeader
from strom_storage.log.checkpoints import write_atomically
from strom_storage.log.files import SNAPSHOT_SUFFIX, file_path, offset_from_name

__all__ = [
    "SNAPSHOT_VERSION",
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateManager",
    "SnapshotFormatError",
    "SnapshotHeader",
    "decode_snapshot",
    "encode_snapshot",
    "iter_snapshot_entries",
    "read_snapshot_header",
    "snapshot_crc",
]

#: How many batches per producer are remembered for duplicate detection (Kafka's 5).
NUM_BATCHES_TO_RETAIN = 5
#: The version field this code writes and reads.
SNAPSHOT_VERSION = 1
_PREFIX = struct.Struct(">hIi")
_PRODUCER = struct.Struct(">qhqB")
_BATCH = struct.Struct(">iiqiq")
_INT31 = 1 << 31
#: How many snapshot files to keep (the newest ones).
SNAPSHOTS_TO_KEEP = 2


class BatchMetadata(NamedTuple):
    """What a leader answers for a batch: its sequences, offsets and timestamp."""

    first_seq: int
    last_seq: int
    first_offset: int
    offset_delta: int
    max_timestamp: int

    @property
    def last_offset(self) -> int:
        return self.first_offset + self.offset_delta


@dataclass
class ProducerStateEntry:
    """One producer's epoch and its last batches (oldest first)."""

    producer_id: int
    producer_epoch: int = -1
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.last_timestamp,
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def apply(self, header: BatchHeader) -> None:
        """Record ``header`` (with its final offsets) without validation."""
        if header.producer_epoch != self.producer_epoch:
            self.producer_epoch = header.producer_epoch
            self.batches.clear()
        self.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset_delta,
                header.max_timestamp,
            )
        )
        self.last_timestamp = max(self.last_timestamp, header.max_timestamp)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT31 - 1)


class ProducerStateManager:
    """Producer id -> state, validation of leader appends, snapshots (see module docstring).

    Thread-safety: not thread-safe; the owning ``Log`` calls it under its lock.
    """

    def __init__(self, directory: Path, *, producer_id_expiration_ms: int) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        #: The state reflects every batch below this offset.
        self.map_end_offset = 0

    # -- validation and update ----------------------------------------------------------------

    def check_leader_append(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Validate the idempotent batches of a leader append, without changing the state.

        Returns the original metadata (spanning all of them) when the batches are a retry of
        ones already written (the append must then write nothing); raises
        ``InvalidProducerEpochError``, ``OutOfOrderSequenceNumberError``, or
        ``DuplicateSequenceNumberError`` for an append mixing written and new batches (which
        could neither be skipped whole nor written whole).
        """
        pending: dict[int, ProducerStateEntry] = {}
        duplicates: list[BatchMetadata] = []
        for header in headers:
            pid = header.producer_id
            if pid < 0 or header.is_control:
                continue
            current = self.producers.get(pid)
            entry = pending.get(pid)
            if entry is None:
                if current is not None:
                    duplicate = current.find_duplicate(header)
                    if duplicate is not None:
                        duplicates.append(duplicate)
                        continue
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                pending[pid] = entry
            self._check(entry, header, known=current is not None)
            entry.apply(header)
        if not duplicates:
            return None
        if pending:
            raise DuplicateSequenceNumberError(
                "the append mixes batches already written (a retry) with new ones; send the "
                "retried batches on their own"
            )
        first, last = duplicates[0], duplicates[-1]
        return BatchMetadata(
            first.first_seq,
            last.last_seq,
            first.first_offset,
            last.last_offset - first.first_offset,
            max(d.max_timestamp for d in duplicates),
        )

    @staticmethod
    def _check(entry: ProducerStateEntry, header: BatchHeader, *, known: bool) -> None:
        epoch, seq = header.producer_epoch, header.base_sequence
        if seq < 0:
            raise OutOfOrderSequenceNumberError(
                f"producer {entry.producer_id}: idempotent batch without a base sequence"
            )
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {entry.producer_id}: epoch {epoch} is older than the current "
                f"epoch {entry.producer_epoch} (fenced)"
            )
        if epoch != entry.producer_epoch:
            if seq != 0 and entry.producer_epoch != -1:
                raise OutOfOrderSequenceNumberError(
                    f"producer {entry.producer_id}: new epoch {epoch} must start at sequence 0, "
                    f"got {seq}"
                )
            return
        if not known and not entry.batches:
            return  # no state left for this producer: accept any sequence
        if entry.batches and not _in_sequence(entry.last_seq, seq):
            raise OutOfOrderSequenceNumberError(
                f"producer {entry.producer_id} epoch {epoch}: expected sequence "
                f"{(entry.last_seq + 1) % _INT31}, got {seq}"
            )

    def update(self, headers: Iterable[BatchHeader]) -> None:
        """Record appended batches (with their assigned offsets); no validation."""
        for header in headers:
            if header.producer_id >= 0 and not header.is_control:
                entry = self.producers.get(header.producer_id)
                if entry is None:
                    entry = self.producers[header.producer_id] = ProducerStateEntry(
                        header.producer_id
                    )
                entry.apply(header)
            self.map_end_offset = max(self.map_end_offset, header.next_offset)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        horizon = now_ms - self.producer_id_expiration_ms
        expired = [pid for pid, e in self.producers.items() if e.last_timestamp < horizon]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        offsets = []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX):
                try:
                    offsets.append(offset_from_name(name))
                except ValueError:
                    continue
        return sorted(offsets)

    def take_snapshot(self, *, sync: bool = True) -> Path:
        """Write the state as of ``map_end_offset`` and prune old snapshots.

        ``sync=False`` (at roll, on the append path) skips the fsyncs: a snapshot lost or torn
        by a power failure fails its CRC at load and an older one, plus a longer replay of
        batch headers, takes its place.
        """
        path = file_path(self.directory, self.map_end_offset, SNAPSHOT_SUFFIX)
        write_atomically(path, encode_snapshot(self.producers.values()), sync=sync)
        offsets = self.snapshot_offsets()
        for offset in offsets[:-SNAPSHOTS_TO_KEEP]:
            file_path(self.directory, offset, SNAPSHOT_SUFFIX).unlink(missing_ok=True)
        return path

    def delete_snapshots_above(self, offset: int) -> None:
        """Remove snapshots taken after ``offset`` (after a truncation)."""
        for snap in self.snapshot_offsets():
            if snap > offset:
                file_path(self.directory, snap, SNAPSHOT_SUFFIX).unlink(missing_ok=True)

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest readable snapshot at or below ``max_offset``; returns its offset.

        Unreadable snapshots are deleted. With none, the state is empty and None returned.
        """
        self.producers = {}
        self.map_end_offset = 0
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            path = file_path(self.directory, offset, SNAPSHOT_SUFFIX)
            try:
                producers = decode_snapshot(path.read_bytes())
            except (OSError, ValueError, struct.error):
                path.unlink(missing_ok=True)
                continue
            self.producers = {p.producer_id: p for p in producers}
            self.map_end_offset = offset
            return offset
        return None

    def reset(self, offset: int) -> None:
        """Forget everything; the state now reflects an empty log ending at ``offset``."""
        self.producers = {}
        self.map_end_offset = offset


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot bytes for ``entries`` (layout in the module docstring)."""
    body = bytearray()
    count = 0
    for entry in entries:
        count += 1
        body += _PRODUCER.pack(
            entry.producer_id, entry.producer_epoch, entry.last_timestamp, len(entry.batches)
        )
        for b in entry.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.offset_delta,
                                b.max_timestamp)  # fmt: skip
    count_bytes = struct.pack(">i", count)
    crc = crc32c(count_bytes + body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + count_bytes + bytes(body)


class SnapshotFormatError(ValueError):
    """Snapshot bytes that do not parse; ``position`` is the byte where they break."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(f"byte {position}: {message}")
        self.position = position


class SnapshotHeader(NamedTuple):
    """The first 10 bytes of a snapshot file."""

    version: int
    crc: int
    producer_count: int


def read_snapshot_header(data: bytes) -> SnapshotHeader:
    """The header of snapshot bytes (not checked); ``SnapshotFormatError`` if cut short."""
    if len(data) < _PREFIX.size:
        raise SnapshotFormatError(
            len(data), f"the file ends after {len(data)} bytes, a header needs {_PREFIX.size}"
        )
    return SnapshotHeader(*_PREFIX.unpack_from(data, 0))


def snapshot_crc(data: bytes) -> int:
    """The CRC-32C the header of snapshot bytes must hold (of everything after its field)."""
    return crc32c(memoryview(data)[6:])


def iter_snapshot_entries(
    data: bytes, producer_count: int
) -> Iterator[tuple[int, ProducerStateEntry]]:
    """(byte position, entry) of each producer in snapshot bytes, in file order.

    Raises ``SnapshotFormatError`` where an entry is cut off, or for bytes after the last one.
    """
    pos = _PREFIX.size
    for index in range(producer_count):
        start = pos
        if pos + _PRODUCER.size > len(data):
            raise SnapshotFormatError(pos, f"producer {index} of {producer_count} is cut off")
        pid, epoch, last_ts, n = _PRODUCER.unpack_from(data, pos)
        pos += _PRODUCER.size
        if pos + n * _BATCH.size > len(data):
            raise SnapshotFormatError(
                pos, f"producer {index} (id {pid}): its {n} batches are cut off"
            )
        entry = ProducerStateEntry(pid, epoch, last_timestamp=last_ts)
        for _ in range(n):
            entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
            pos += _BATCH.size
        yield start, entry
    if pos != len(data):
        raise SnapshotFormatError(pos, f"{len(data) - pos} trailing bytes after the last producer")


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse snapshot bytes; raises ``SnapshotFormatError`` (a ValueError) when they are bad."""
    header = read_snapshot_header(data)
    if header.version != SNAPSHOT_VERSION:
        raise SnapshotFormatError(0, f"snapshot version {header.version}")
    if snapshot_crc(data) != header.crc:
        raise SnapshotFormatError(2, "snapshot CRC mismatch")
    return [entry for _, entry in iter_snapshot_entries(data, header.producer_count)]
