"""The leader-epoch cache: at which offset each leader epoch started, in this replica's log.

Replication uses it to answer OffsetsForLeaderEpoch (the end offset of an epoch is the start of
the next one, or the log end for the latest) so that a follower of a new leader truncates to
where its log and the leader's agree before fetching.

File ``leader-epoch-checkpoint`` in the partition directory, text, Kafka's format, rewritten
atomically (temp, fsync, rename) whenever an epoch is added or entries are dropped::

    0                    format version
    <n>                  number of entries
    <epoch> <offset>     n lines: epoch and its start offset, both increasing

Thread-safety: not thread-safe; the owning ``Log`` calls it under its lock.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import NamedTuple

from strom_storage.log.checkpoints import CheckpointFormatError, write_atomically

__all__ = ["LEADER_EPOCH_FILE", "EpochEntry", "LeaderEpochCache", "parse_leader_epoch_checkpoint"]

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def parse_leader_epoch_checkpoint(text: str) -> list[EpochEntry]:
    """The entries of a ``leader-epoch-checkpoint`` file's text (layout in the module docstring).

    Raises ``CheckpointFormatError`` naming the line that breaks the format: a version other
    than 0, a bad count or entry, epochs or offsets not increasing, fewer entries than counted.
    """
    lines = text.splitlines()
    if not lines:
        raise CheckpointFormatError(1, "the file is empty")
    if lines[0].strip() != "0":
        raise CheckpointFormatError(1, f"version {lines[0].strip()!r}, expected 0")
    if len(lines) < 2:
        raise CheckpointFormatError(2, "the entry count is missing")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointFormatError(2, f"entry count {lines[1]!r} is not a number") from None
    if count < 0:
        raise CheckpointFormatError(2, f"entry count {count} is negative")
    entries: list[EpochEntry] = []
    for number, line in enumerate(lines[2 : 2 + count], start=3):
        try:
            epoch, offset = map(int, line.split())
        except ValueError:
            raise CheckpointFormatError(number, f"{line!r} is not '<epoch> <offset>'") from None
        if entries and not (entries[-1].epoch < epoch and entries[-1].start_offset <= offset):
            raise CheckpointFormatError(
                number,
                f"epoch {epoch} at offset {offset} does not follow epoch {entries[-1].epoch} "
                f"at offset {entries[-1].start_offset} (both must increase)",
            )
        entries.append(EpochEntry(epoch, offset))
    if len(entries) != count:
        raise CheckpointFormatError(
            3 + len(entries), f"{count} entries announced, {len(entries)} present"
        )
    return entries


class LeaderEpochCache:
    """Epoch -> start offset, persisted (see module docstring). Not thread-safe: the log's
    lock serialises it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LEADER_EPOCH_FILE
        self._entries: list[EpochEntry] = self._read()

    def _read(self) -> list[EpochEntry]:
        try:
            return parse_leader_epoch_checkpoint(self.path.read_text("ascii"))
        except (OSError, UnicodeDecodeError, CheckpointFormatError):
            return []

    def _write(self) -> None:
        body = "".join(f"{e.epoch} {e.start_offset}\n" for e in self._entries)
        write_atomically(self.path, f"0\n{len(self._entries)}\n{body}".encode("ascii"))

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer; True if recorded."""
        if epoch < 0 or epoch <= self.latest_epoch:
            return False
        # An entry for an older epoch starting at or after this offset is stale: drop it.
        while self._entries and self._entries[-1].start_offset >= start_offset:
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._write()
        return True

    def start_offset_for(self, epoch: int, log_end_offset: int) -> int:
        """Where ``epoch`` starts; ``log_end_offset`` when it has not started."""
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry.start_offset
        return log_end_offset

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest known epoch <= ``epoch``, its end offset), Kafka's OffsetsForLeaderEpoch.

        The end offset of the latest epoch is the log end; of an older one, the start offset of
        the next epoch. (-1, -1) when no epoch at or below ``epoch`` is known.
        """
        if not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch >= self.latest_epoch:
            return self.latest_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        i = bisect.bisect_right(epochs, epoch)
        if i == 0:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        return self._entries[i - 1].epoch, self._entries[i].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that start at or after ``end_offset`` (the log was truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: older epochs collapse onto it."""
        i = 0
        while i + 1 < len(self._entries) and self._entries[i + 1].start_offset <= start_offset:
            i += 1
        kept = self._entries[i:]
        if kept and kept[0].start_offset < start_offset:
            kept[0] = EpochEntry(kept[0].epoch, start_offset)
        if kept != self._entries:
            self._entries = kept
            self._write()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._write()
