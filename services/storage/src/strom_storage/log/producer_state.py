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

Transactions (``docs/transactions.md``). Per producer the state also holds its *open
transaction* (the first offset of its transactional batches not yet followed by a marker), the
highest epoch *ended* by a marker (COMMIT or ABORT) and the highest *coordinator epoch* seen in
a marker. On a leader append a transactional batch

* at an epoch below the ended epoch is a zombie's: ``InvalidProducerEpochError``;
* continuing the open transaction of its epoch is appended;
* starting a transaction must have been verified with the transaction coordinator (the caller
  passes the verified (producer id, epoch) pairs), else ``InvalidTxnStateError``. This holds
  at the ended epoch too: clients that keep their epoch across transactions (Kafka's
  EndTxn < v5) start the next one there, which only the coordinator can tell from a zombie's
  late write (its sequence continues; the next marker at that epoch ends it);

and a non-transactional idempotent batch from a producer with an open transaction is refused
(``InvalidTxnStateError``). A marker (``complete_txn``) closes the open transaction and returns
it as a ``CompletedTxn``; the first offsets of the open transactions, and of the completed ones
whose marker the high watermark has not passed yet, bound the last stable offset
(``first_unstable_offset``).

Only batch *headers* are needed: producer id, epoch, base sequence and last offset delta, plus
the type of a marker's one control record. The state is therefore rebuilt after a restart by
scanning headers of the log tail after the latest snapshot, never by decoding data records.

Snapshot file ``<20-digit offset>.snapshot``: the state after every batch below ``offset``.
Taken at segment roll and at close; written atomically (temp, fsync, rename). Byte layout,
big-endian::

    offset size field
         0    2 version                 2 (version 1 files, without the three transaction
                                        fields, still load)
         2    4 crc                     CRC-32C of every byte after this field
         6    4 producer_count
        10    - producers, each:
                8 producer_id
                2 producer_epoch
                8 last_timestamp        max timestamp of its last batch (ms; expiration)
                2 ended_epoch           v2: highest epoch ended by a marker, -1 none
                4 coordinator_epoch     v2: highest coordinator epoch of a marker, -1 none
                8 txn_first_offset      v2: first offset of its open transaction, -1 none
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
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from strom.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from strom.records.crc import crc32c
from strom.records.header import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader
from strom_storage.log.checkpoints import write_atomically
from strom_storage.log.files import SNAPSHOT_SUFFIX, file_path, offset_from_name

__all__ = [
    "SNAPSHOT_VERSION",
    "SNAPSHOT_VERSIONS",
    "ActiveProducer",
    "BatchMetadata",
    "CompletedTxn",
    "EndTxnMarker",
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
#: The version field this code writes.
SNAPSHOT_VERSION = 2
#: The versions it reads.
SNAPSHOT_VERSIONS = (1, 2)
_PREFIX = struct.Struct(">hIi")
_PRODUCER_V1 = struct.Struct(">qhqB")
_PRODUCER = struct.Struct(">qhqhiqB")
_BATCH = struct.Struct(">iiqiq")
_INT31 = 1 << 31
_NO_TXNS: list[CompletedTxn] = []  # shared, never appended to: most appends end no transaction
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


class EndTxnMarker(NamedTuple):
    """What a transaction marker (the record of a control batch) says."""

    committed: bool
    coordinator_epoch: int


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset``.

    ``first_offset`` is the marker's own offset when the producer wrote nothing here;
    ``last_stable_offset`` is the LSO right after it ended (ignoring the high watermark): the
    first offset of the earliest other open transaction, else ``last_offset + 1``.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    aborted: bool


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """A producer the partition knows (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    #: First offset of its open transaction, -1 when none.
    current_txn_start_offset: int


@dataclass
class ProducerStateEntry:
    """One producer's epoch, its last batches (oldest first) and its transaction state."""

    producer_id: int
    producer_epoch: int = -1
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    #: Highest epoch ended by a transaction marker (-1: none).
    ended_epoch: int = -1
    #: Highest coordinator epoch seen in a marker (-1: none).
    coordinator_epoch: int = -1
    #: First offset of the open transaction (at ``producer_epoch``), -1 when none is open.
    txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def txn_open_at(self, epoch: int) -> bool:
        """Whether a transaction of ``epoch`` is open here (a batch at it continues it)."""
        return self.txn_first_offset >= 0 and self.producer_epoch == epoch

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.last_timestamp,
            self.ended_epoch,
            self.coordinator_epoch,
            self.txn_first_offset,
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
        if header.attributes & ATTR_TRANSACTIONAL and self.txn_first_offset < 0:
            self.txn_first_offset = header.base_offset


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT31 - 1)


class ProducerStateManager:
    """Producer id -> state, validation of leader appends, snapshots (see module docstring).

    Thread-safety: not thread-safe; the owning ``Log`` calls it under its lock. The log's
    lock-free readers only read ``first_unstable_offset`` (one attribute, replaced whole).
    """

    def __init__(self, directory: Path, *, producer_id_expiration_ms: int) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        #: The state reflects every batch below this offset.
        self.map_end_offset = 0
        #: producer id -> first offset of its open transaction.
        self._ongoing: dict[int, int] = {}
        #: Completed transactions whose marker is at or above the high watermark, as
        #: (first offset, marker offset): they hold the last stable offset back until then.
        self.unreplicated: list[tuple[int, int]] = []
        #: The high watermark the log last told (``on_high_watermark``).
        self.high_watermark = 0
        #: The smallest first offset of ``_ongoing`` and ``unreplicated``; None when both are
        #: empty. The last stable offset is min(high watermark, this).
        self.first_unstable_offset: int | None = None

    # -- validation and update ----------------------------------------------------------------

    def check_leader_append(
        self,
        headers: Iterable[BatchHeader],
        verified: Collection[tuple[int, int]] = (),
    ) -> BatchMetadata | None:
        """Validate the idempotent batches of a leader append, without changing the state.

        Returns the original metadata (spanning all of them) when the batches are a retry of
        ones already written (the append must then write nothing); raises
        ``InvalidProducerEpochError``, ``OutOfOrderSequenceNumberError``,
        ``InvalidTxnStateError`` (a transaction not in ``verified`` starts, or a
        non-transactional batch from a producer with an open transaction), or
        ``DuplicateSequenceNumberError`` for an append mixing written and new batches (which
        could neither be skipped whole nor written whole).
        """
        pending: dict[int, ProducerStateEntry] = {}
        duplicates: list[BatchMetadata] = []
        for header in headers:
            pid = header.producer_id
            if pid < 0:
                continue
            transactional = header.attributes & ATTR_TRANSACTIONAL
            current = self.producers.get(pid)
            entry = pending.get(pid)
            if entry is None:
                if current is not None:
                    if transactional:
                        _check_reopened(current, header, verified)
                    duplicate = current.find_duplicate(header)
                    if duplicate is not None:
                        duplicates.append(duplicate)
                        continue
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                pending[pid] = entry
            self._check(entry, header, known=current is not None)
            if transactional:
                _check_txn(entry, header, verified)
            elif entry.txn_first_offset >= 0:
                raise InvalidTxnStateError(
                    f"producer {pid} has an open transaction here: a non-transactional batch "
                    "cannot be written before it ends"
                )
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
            if epoch <= entry.ended_epoch:
                raise _ended_epoch_error(entry, epoch)
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

    def transactions_to_verify(self, headers: Iterable[BatchHeader]) -> set[tuple[int, int]]:
        """(producer id, epoch) of the transactional batches in ``headers`` that would start a
        transaction here. Raises ``InvalidProducerEpochError`` for an ended epoch and
        ``InvalidRecordError`` for a control batch or a transactional batch without a producer
        id. Reads the state without changing it (a hint: the append checks again)."""
        out: set[tuple[int, int]] = set()
        for header in headers:
            if header.is_control:
                raise InvalidRecordError("producers may not write control batches")
            if not header.is_transactional:
                continue
            pid, epoch = header.producer_id, header.producer_epoch
            if pid < 0:
                raise InvalidRecordError("a transactional batch without a producer id")
            entry = self.producers.get(pid)
            if entry is not None:
                if epoch < entry.producer_epoch and epoch <= entry.ended_epoch:
                    raise _ended_epoch_error(entry, epoch)  # fenced here, before asking
                if entry.txn_open_at(epoch):
                    continue
            out.add((pid, epoch))
        return out

    def update(
        self,
        headers: Iterable[BatchHeader],
        marker_of: Callable[[BatchHeader], EndTxnMarker | None] | None = None,
    ) -> list[CompletedTxn]:
        """Record appended batches (with their assigned offsets); no validation.

        Control batches need ``marker_of`` (what the marker says; None for a control record
        that is not a transaction marker). Returns the transactions the markers ended.
        """
        completed: list[CompletedTxn] = _NO_TXNS
        for header in headers:
            pid = header.producer_id
            if pid >= 0:
                if header.attributes & ATTR_CONTROL:
                    marker = marker_of(header) if marker_of is not None else None
                    if marker is not None:
                        if completed is _NO_TXNS:
                            completed = []
                        completed.append(self.complete_txn(header, marker))
                else:
                    entry = self.producers.get(pid)
                    if entry is None:
                        entry = self.producers[pid] = ProducerStateEntry(pid)
                    entry.apply(header)
                    if header.attributes & ATTR_TRANSACTIONAL and pid not in self._ongoing:
                        self._ongoing[pid] = entry.txn_first_offset
                        self._update_first_unstable()
            self.map_end_offset = max(self.map_end_offset, header.next_offset)
        return completed

    def complete_txn(self, header: BatchHeader, marker: EndTxnMarker) -> CompletedTxn:
        """Apply the marker batch ``header`` (offsets final): end the producer's transaction."""
        pid, epoch, offset = header.producer_id, header.producer_epoch, header.base_offset
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        first = offset
        # An open transaction of a newer epoch is not this marker's (it ends an older one).
        if entry.txn_first_offset >= 0 and epoch >= entry.producer_epoch:
            first = entry.txn_first_offset
            entry.txn_first_offset = -1
            self._ongoing.pop(pid, None)
        if epoch > entry.producer_epoch:
            entry.producer_epoch = epoch
            entry.batches.clear()
        entry.ended_epoch = max(entry.ended_epoch, epoch)
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        others = [o for p, o in self._ongoing.items() if p != pid]
        lso = min(others) if others else offset + 1
        if first < offset and offset >= self.high_watermark:
            self.unreplicated.append((first, offset))
        self._update_first_unstable()
        return CompletedTxn(pid, first, offset, lso, aborted=not marker.committed)

    def on_high_watermark(self, high_watermark: int) -> None:
        """The high watermark moved: completed transactions below it stop holding the LSO."""
        self.high_watermark = high_watermark
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t[1] >= high_watermark]
            self._update_first_unstable()

    def _update_first_unstable(self) -> None:
        firsts = list(self._ongoing.values())
        firsts.extend(first for first, _ in self.unreplicated)
        self.first_unstable_offset = min(firsts) if firsts else None

    def open_transaction(self, producer_id: int) -> int | None:
        """First offset of ``producer_id``'s open transaction, None when none is open."""
        return self._ongoing.get(producer_id)

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer the partition remembers, by producer id."""
        return [
            ActiveProducer(
                e.producer_id,
                e.producer_epoch,
                e.last_seq,
                e.last_timestamp,
                e.coordinator_epoch,
                e.txn_first_offset,
            )
            for _, e in sorted(self.producers.items())
        ]

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def marker_is_new(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> bool:
        """Whether a COMMIT/ABORT marker ending ``producer_id``'s transaction at
        ``producer_epoch`` is to be written: False for a duplicate or stale one (an epoch a
        marker already ended, unless a transaction of that same epoch is open again: clients
        that keep their epoch run several transactions at one epoch). Raises
        ``TransactionCoordinatorFencedError`` when ``coordinator_epoch`` is below one a marker
        of this producer carried."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return True
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"producer {producer_id}: coordinator epoch {coordinator_epoch} is older "
                f"than {entry.coordinator_epoch}, seen in an earlier marker"
            )
        if producer_epoch != entry.ended_epoch:
            return producer_epoch > entry.ended_epoch
        return entry.txn_open_at(producer_epoch)

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` (never one with an open
        transaction); returns how many."""
        horizon = now_ms - self.producer_id_expiration_ms
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.last_timestamp < horizon and e.txn_first_offset < 0
        ]
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

    def take_snapshot(self, *, sync: bool = True, keep_from: int | None = None) -> Path:
        """Write the state as of ``map_end_offset`` and prune old snapshots: the newest two
        are kept, and with ``keep_from`` also every one from the newest at or below it on
        (crash recovery replays from a snapshot at or below the first segment it re-validates).

        ``sync=False`` (at roll, on the append path) skips the fsyncs: a snapshot lost or torn
        by a power failure fails its CRC at load and an older one, plus a longer replay of
        batch headers, takes its place.
        """
        path = file_path(self.directory, self.map_end_offset, SNAPSHOT_SUFFIX)
        write_atomically(path, encode_snapshot(self.producers.values()), sync=sync)
        offsets = self.snapshot_offsets()
        keep = len(offsets) - SNAPSHOTS_TO_KEEP
        if keep_from is not None:
            anchor = sum(1 for offset in offsets if offset <= keep_from) - 1
            keep = min(keep, max(anchor, 0))
        for offset in offsets[:keep]:
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
        self.reset(0)
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
            self._ongoing = {
                p.producer_id: p.txn_first_offset for p in producers if p.txn_first_offset >= 0
            }
            self._update_first_unstable()
            self.map_end_offset = offset
            return offset
        return None

    def reset(self, offset: int) -> None:
        """Forget everything; the state now reflects an empty log ending at ``offset``."""
        self.producers = {}
        self._ongoing = {}
        self.unreplicated = []
        self.first_unstable_offset = None
        self.map_end_offset = offset


def _ended_epoch_error(entry: ProducerStateEntry, epoch: int) -> InvalidProducerEpochError:
    return InvalidProducerEpochError(
        f"producer {entry.producer_id}: epoch {epoch} is at or below epoch {entry.ended_epoch}, "
        "whose transaction a marker already ended here (a zombie or late write)"
    )


def _check_reopened(
    entry: ProducerStateEntry, header: BatchHeader, verified: Collection[tuple[int, int]]
) -> None:
    """Before looking for duplicates: a batch at the current epoch that a marker ended, with no
    transaction of it open, needs the coordinator's word even when it repeats a written batch
    (a zombie's retry is fenced there, not answered as a duplicate). An epoch below the current
    one cannot be a duplicate; ``_check`` fences it."""
    epoch = header.producer_epoch
    if (
        epoch == entry.ended_epoch == entry.producer_epoch
        and entry.txn_first_offset < 0
        and (entry.producer_id, epoch) not in verified
    ):
        raise InvalidTxnStateError(
            f"producer {entry.producer_id} epoch {epoch}: a marker ended this epoch's "
            "transaction here; the transaction coordinator has to confirm a new one"
        )


def _check_txn(
    entry: ProducerStateEntry, header: BatchHeader, verified: Collection[tuple[int, int]]
) -> None:
    """After ``_check`` (which fences older epochs): a transactional batch continues the open
    transaction of its epoch or starts one the coordinator confirmed."""
    epoch = header.producer_epoch
    if entry.txn_open_at(epoch):
        return  # continues the open transaction
    if (entry.producer_id, epoch) not in verified:
        raise InvalidTxnStateError(
            f"producer {entry.producer_id} epoch {epoch}: the transaction coordinator has not "
            "confirmed that this partition is part of the transaction"
        )


def encode_snapshot(
    entries: Iterable[ProducerStateEntry], *, version: int = SNAPSHOT_VERSION
) -> bytes:
    """The snapshot bytes for ``entries`` (layout in the module docstring); ``version`` 1
    (without the transaction fields) only for tests of old files."""
    body = bytearray()
    count = 0
    for entry in entries:
        count += 1
        if version == 1:
            body += _PRODUCER_V1.pack(
                entry.producer_id, entry.producer_epoch, entry.last_timestamp, len(entry.batches)
            )
        else:
            body += _PRODUCER.pack(
                entry.producer_id,
                entry.producer_epoch,
                entry.last_timestamp,
                entry.ended_epoch,
                entry.coordinator_epoch,
                entry.txn_first_offset,
                len(entry.batches),
            )
        for b in entry.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.offset_delta,
                                b.max_timestamp)  # fmt: skip
    count_bytes = struct.pack(">i", count)
    crc = crc32c(count_bytes + body)
    return struct.pack(">hI", version, crc) + count_bytes + bytes(body)


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
    data: bytes, producer_count: int, version: int = SNAPSHOT_VERSION
) -> Iterator[tuple[int, ProducerStateEntry]]:
    """(byte position, entry) of each producer in snapshot bytes of ``version``, in file order.

    Raises ``SnapshotFormatError`` where an entry is cut off, or for bytes after the last one.
    """
    layout = _PRODUCER_V1 if version == 1 else _PRODUCER
    pos = _PREFIX.size
    for index in range(producer_count):
        start = pos
        if pos + layout.size > len(data):
            raise SnapshotFormatError(pos, f"producer {index} of {producer_count} is cut off")
        if version == 1:
            pid, epoch, last_ts, n = _PRODUCER_V1.unpack_from(data, pos)
            ended, coordinator, txn_first = -1, -1, -1
        else:
            pid, epoch, last_ts, ended, coordinator, txn_first, n = _PRODUCER.unpack_from(data, pos)
        pos += layout.size
        if pos + n * _BATCH.size > len(data):
            raise SnapshotFormatError(
                pos, f"producer {index} (id {pid}): its {n} batches are cut off"
            )
        entry = ProducerStateEntry(
            pid,
            epoch,
            last_timestamp=last_ts,
            ended_epoch=ended,
            coordinator_epoch=coordinator,
            txn_first_offset=txn_first,
        )
        for _ in range(n):
            entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
            pos += _BATCH.size
        yield start, entry
    if pos != len(data):
        raise SnapshotFormatError(pos, f"{len(data) - pos} trailing bytes after the last producer")


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse snapshot bytes; raises ``SnapshotFormatError`` (a ValueError) when they are bad."""
    header = read_snapshot_header(data)
    if header.version not in SNAPSHOT_VERSIONS:
        raise SnapshotFormatError(0, f"snapshot version {header.version}")
    if snapshot_crc(data) != header.crc:
        raise SnapshotFormatError(2, "snapshot CRC mismatch")
    return [
        entry for _, entry in iter_snapshot_entries(data, header.producer_count, header.version)
    ]
