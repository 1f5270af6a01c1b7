"""What a dump is made of: one item per output line, produced by the readers, shown by
``render``. Readers never print; renderers never read files."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from strom.records import BatchHeader, Record
from strom.records.control import ControlRecord
from strom_storage.log.producer_state import ProducerStateEntry, SnapshotHeader
from strom_storage.log.txn_index import AbortedTxn

__all__ = [
    "AbortedTxnItem",
    "BatchItem",
    "CheckpointItem",
    "FileKind",
    "FileStart",
    "IndexEntryItem",
    "Item",
    "LeaderEpochItem",
    "MarkerItem",
    "Note",
    "Problem",
    "ProblemKind",
    "ProducerItem",
    "RecordItem",
    "SnapshotItem",
    "UnusedSlotsItem",
]


class FileKind(Enum):
    """The file types of a partition directory (``strom_storage.log.files``)."""

    LOG = "log"
    OFFSET_INDEX = "offset-index"
    TIME_INDEX = "time-index"
    TXN_INDEX = "txn-index"
    SNAPSHOT = "producer-snapshot"
    OFFSET_CHECKPOINT = "offset-checkpoint"
    LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
    CLEAN_SHUTDOWN = "clean-shutdown-marker"
    UNKNOWN = "unknown"


class ProblemKind(Enum):
    """How bad a problem is; every kind makes the exit status non-zero."""

    CORRUPT = "corrupt"  # the file breaks its format or disagrees with its segment
    UNVERIFIED = "unverified"  # an index entry that could not be checked against its .log
    UNKNOWN = "unknown"  # not a file type the storage engine writes


@dataclass(frozen=True, slots=True)
class FileStart:
    """Opens the dump of one file."""

    kind: FileKind
    base_offset: int | None  # from the file name (segments, indexes, snapshots)
    size: int


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One batch of a ``.log`` file; ``crc_valid`` False when its CRC-32C does not match."""

    position: int
    header: BatchHeader
    crc_valid: bool


@dataclass(frozen=True, slots=True)
class RecordItem:
    """One record of the batch before it (``--print-data-log``)."""

    record: Record
    log_append_time: bool
    sequence: int  # -1 when the batch is not idempotent
    control: ControlRecord | None  # decoded key/value of a control batch's record


@dataclass(frozen=True, slots=True)
class IndexEntryItem:
    """Entry ``entry`` of an index: (offset, position) or (timestamp, offset)."""

    kind: FileKind
    entry: int
    key: int  # the offset (.index) or the timestamp (.timeindex)
    value: int  # the position (.index) or the offset (.timeindex)


@dataclass(frozen=True, slots=True)
class UnusedSlotsItem:
    """Zeroed entries at the end of an index: the preallocated room of an active segment."""

    count: int
    position: int


@dataclass(frozen=True, slots=True)
class AbortedTxnItem:
    """Entry ``entry`` of a ``.txnindex`` file, at byte ``position``: an aborted transaction."""

    entry: int
    position: int
    txn: AbortedTxn


@dataclass(frozen=True, slots=True)
class SnapshotItem:
    """The header of a producer-state snapshot, and whether its CRC-32C matches."""

    header: SnapshotHeader
    crc_valid: bool


@dataclass(frozen=True, slots=True)
class ProducerItem:
    """Producer ``index`` of a snapshot, at byte ``position``."""

    index: int
    position: int
    entry: ProducerStateEntry


@dataclass(frozen=True, slots=True)
class CheckpointItem:
    """The offset an offset checkpoint file holds."""

    offset: int


@dataclass(frozen=True, slots=True)
class LeaderEpochItem:
    """One line of ``leader-epoch-checkpoint``: the epoch and the first offset written in it."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class MarkerItem:
    """The ``.clean-shutdown`` marker: its presence is the whole message."""


@dataclass(frozen=True, slots=True)
class Note:
    """Information that is not a problem (e.g. an index not checked: no ``.log`` beside it)."""

    message: str


@dataclass(frozen=True, slots=True)
class Problem:
    """Where and how a file breaks; ``message`` names the place itself ("batch at byte 42:
    ...", "entry 3 (byte 24): ...", "line 2: ..."), the other fields repeat it for scripts."""

    message: str
    kind: ProblemKind = ProblemKind.CORRUPT
    position: int | None = None
    entry: int | None = None
    line: int | None = None


Item = (
    FileStart
    | BatchItem
    | RecordItem
    | IndexEntryItem
    | UnusedSlotsItem
    | AbortedTxnItem
    | SnapshotItem
    | ProducerItem
    | CheckpointItem
    | LeaderEpochItem
    | MarkerItem
    | Note
    | Problem
)
