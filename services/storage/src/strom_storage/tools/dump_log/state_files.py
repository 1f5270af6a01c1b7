"""Producer-state snapshots and checkpoint files, parsed by the engine's own readers
(``producer_state``, ``checkpoints``, ``leader_epochs``) with the place where they break."""

from __future__ import annotations

from collections.abc import Iterator

from strom_storage.log.checkpoints import CheckpointFormatError, parse_offset_checkpoint
from strom_storage.log.leader_epochs import parse_leader_epoch_checkpoint
from strom_storage.log.producer_state import (
    SNAPSHOT_VERSIONS,
    SnapshotFormatError,
    iter_snapshot_entries,
    read_snapshot_header,
    snapshot_crc,
)
from strom_storage.log.txn_index import ENTRY_SIZE, TxnIndexFormatError, iter_entries
from strom_storage.tools.dump_log.report import (
    AbortedTxnItem,
    CheckpointItem,
    Item,
    LeaderEpochItem,
    Problem,
    ProducerItem,
    SnapshotItem,
)

__all__ = ["leader_epoch_items", "offset_checkpoint_items", "snapshot_items", "txn_index_items"]


def snapshot_items(data: bytes) -> Iterator[Item]:
    """The header and producers of a ``.snapshot`` file's bytes; producers are shown even when
    the CRC does not match (as far as they parse), with a ``Problem`` saying so."""
    try:
        header = read_snapshot_header(data)
    except SnapshotFormatError as exc:
        yield Problem(str(exc), position=exc.position)
        return
    actual = snapshot_crc(data)
    yield SnapshotItem(header, actual == header.crc)
    if header.version not in SNAPSHOT_VERSIONS:
        expected = " or ".join(map(str, SNAPSHOT_VERSIONS))
        yield Problem(f"byte 0: version {header.version}, expected {expected}", position=0)
        return
    if actual != header.crc:
        yield Problem(
            f"byte 2: CRC-32C is {actual:#010x}, header says {header.crc:#010x}", position=2
        )
    try:
        for index, (position, entry) in enumerate(
            iter_snapshot_entries(data, header.producer_count, header.version)
        ):
            yield ProducerItem(index, position, entry)
    except SnapshotFormatError as exc:
        yield Problem(str(exc), position=exc.position)


def txn_index_items(data: bytes) -> Iterator[Item]:
    """The aborted transactions of a ``.txnindex`` file, and a ``Problem`` where it breaks (a
    torn last entry, an unknown version, offsets out of order)."""
    try:
        for position, txn in iter_entries(data):
            yield AbortedTxnItem(position // ENTRY_SIZE, position, txn)
    except TxnIndexFormatError as exc:
        entry = exc.position // ENTRY_SIZE
        yield Problem(
            f"entry {entry} (byte {exc.position}): {exc.detail}", position=exc.position, entry=entry
        )


def _text(data: bytes) -> str | Problem:
    """A checkpoint file's text: ASCII, as the engine writes and reads it."""
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as exc:
        return Problem(f"byte {exc.start}: not ASCII text", position=exc.start)


def offset_checkpoint_items(data: bytes) -> Iterator[Item]:
    """The offset of a recovery-point, log-start, high-watermark or cleaner checkpoint."""
    text = _text(data)
    if isinstance(text, Problem):
        yield text
        return
    try:
        yield CheckpointItem(parse_offset_checkpoint(text))
    except CheckpointFormatError as exc:
        yield Problem(str(exc), line=exc.line)


def leader_epoch_items(data: bytes) -> Iterator[Item]:
    """The entries of a ``leader-epoch-checkpoint`` file."""
    text = _text(data)
    if isinstance(text, Problem):
        yield text
        return
    try:
        entries = parse_leader_epoch_checkpoint(text)
    except CheckpointFormatError as exc:
        yield Problem(str(exc), line=exc.line)
        return
    for entry in entries:
        yield LeaderEpochItem(entry.epoch, entry.start_offset)
