"""The ``.index`` and ``.timeindex`` files: their entries, checked against the segment's ``.log``.

Entries are decoded by ``strom_storage.log.offset_index`` / ``time_index`` (``decode_entry``)
from the file's bytes (read, not mapped: see ``reading``). Zeroed entries at the end are the
preallocated room of an active segment's index (a closed one is trimmed to its entries) and
are counted, not shown. Each entry is checked:

* ``.index`` (offset, position): offsets and positions increase strictly, the offset is not
  below the segment's base offset, a batch of the ``.log`` starts at that position and its
  base offset is that offset;
* ``.timeindex`` (timestamp, offset): timestamps increase strictly, offsets never decrease and
  are not below the base offset, a batch of the ``.log`` starts at that offset and its max
  timestamp is that timestamp (the entry names the first batch that reached it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from strom.records import BatchHeader
from strom_storage.log import offset_index, time_index
from strom_storage.tools.dump_log.log_file import LogRead, read_batches
from strom_storage.tools.dump_log.reading import ReadOnlyFile
from strom_storage.tools.dump_log.report import (
    FileKind,
    IndexEntryItem,
    Item,
    Note,
    Problem,
    ProblemKind,
    UnusedSlotsItem,
)

__all__ = ["LogLayout", "index_items", "missing_log_note", "read_layout"]

_FORMATS: dict[FileKind, tuple[int, Callable[[bytes, int, int], tuple[int, int]]]] = {
    FileKind.OFFSET_INDEX: (offset_index.OffsetIndex.ENTRY_SIZE, offset_index.decode_entry),
    FileKind.TIME_INDEX: (time_index.TimeIndex.ENTRY_SIZE, time_index.decode_entry),
}


@dataclass
class LogLayout:
    """Where the batches of a ``.log`` start, as far as it could be read."""

    name: str
    size: int
    by_position: dict[int, BatchHeader] = field(default_factory=dict)
    by_offset: dict[int, BatchHeader] = field(default_factory=dict)
    #: The end of the last batch read: short of ``size`` when a bad header stopped reading.
    readable_end: int = 0
    #: The offset after the last batch read.
    next_offset: int = 0

    @property
    def fully_read(self) -> bool:
        return self.readable_end >= self.size


def read_layout(log_path: Path, base_offset: int | None) -> LogLayout:
    """The batch positions and offsets of the ``.log`` at ``log_path``."""
    with ReadOnlyFile(log_path) as file:
        layout = LogLayout(log_path.name, file.size())
        for read in read_batches(file, base_offset):
            if isinstance(read, LogRead):
                position, header = read.item.position, read.item.header
                layout.by_position[position] = header
                layout.by_offset[header.base_offset] = header
                layout.readable_end = position + header.size
                layout.next_offset = header.next_offset
    return layout


Finding = tuple[ProblemKind, str]


def _unreadable(layout: LogLayout, what: str) -> Finding:
    return (
        ProblemKind.UNVERIFIED,
        f"{what} cannot be checked: {layout.name} is unreadable from byte {layout.readable_end}",
    )


def _check_offset_entry(
    entry: tuple[int, int], previous: tuple[int, int] | None, base: int, layout: LogLayout | None
) -> Finding | None:
    offset, position = entry
    corrupt = ProblemKind.CORRUPT
    if previous is not None and (offset <= previous[0] or position <= previous[1]):
        return corrupt, (
            f"offset {offset} position {position} is not above the previous entry's "
            f"offset {previous[0]} position {previous[1]}"
        )
    if offset < base:
        return corrupt, f"offset {offset} is below the segment's base offset {base}"
    if layout is None:
        return None
    header = layout.by_position.get(position)
    if header is None:
        if position >= layout.size:
            return corrupt, (
                f"position {position} is past the end of {layout.name} ({layout.size} bytes)"
            )
        if position >= layout.readable_end and not layout.fully_read:
            return _unreadable(layout, f"position {position}")
        return corrupt, f"no batch of {layout.name} starts at byte {position}"
    if header.base_offset != offset:
        return corrupt, (
            f"the batch at byte {position} of {layout.name} starts at offset "
            f"{header.base_offset}, not {offset}"
        )
    return None


def _check_time_entry(
    entry: tuple[int, int], previous: tuple[int, int] | None, base: int, layout: LogLayout | None
) -> Finding | None:
    timestamp, offset = entry
    corrupt = ProblemKind.CORRUPT
    if previous is not None and timestamp <= previous[0]:
        return corrupt, f"timestamp {timestamp} is not above the previous entry's {previous[0]}"
    if previous is not None and offset < previous[1]:
        return corrupt, f"offset {offset} is below the previous entry's {previous[1]}"
    if offset < base:
        return corrupt, f"offset {offset} is below the segment's base offset {base}"
    if layout is None:
        return None
    header = layout.by_offset.get(offset)
    if header is None:
        if offset >= layout.next_offset and not layout.fully_read:
            return _unreadable(layout, f"offset {offset}")
        if offset >= layout.next_offset:
            return corrupt, (
                f"offset {offset} is past the last offset {layout.next_offset - 1} of {layout.name}"
            )
        return corrupt, f"no batch of {layout.name} starts at offset {offset}"
    if header.max_timestamp != timestamp:
        return corrupt, (
            f"the batch at offset {offset} of {layout.name} has max timestamp "
            f"{header.max_timestamp}, not {timestamp}"
        )
    return None


def index_items(
    kind: FileKind, data: bytes, base_offset: int | None, layout: LogLayout | None
) -> Iterator[Item]:
    """The entries of an index file's bytes and the problems found (see module docstring);
    ``layout`` None when there is no ``.log`` to check against."""
    entry_size, decode = _FORMATS[kind]
    base = 0 if base_offset is None else base_offset
    check = _check_offset_entry if kind is FileKind.OFFSET_INDEX else _check_time_entry
    whole, partial = divmod(len(data), entry_size)
    used = -(-len(data[: whole * entry_size].rstrip(b"\0")) // entry_size)
    previous: tuple[int, int] | None = None
    for n in range(used):
        entry = decode(data, n, base)
        yield IndexEntryItem(kind, n, *entry)
        found = check(entry, previous, base, layout)
        if found is not None:
            problem_kind, message = found
            position = n * entry_size
            yield Problem(
                f"entry {n} (byte {position}): {message}",
                kind=problem_kind,
                position=position,
                entry=n,
            )
        previous = entry
    if whole > used:
        yield UnusedSlotsItem(whole - used, used * entry_size)
    if partial:
        position = whole * entry_size
        yield Problem(
            f"entry {whole} (byte {position}): partial entry, {partial} of {entry_size} bytes",
            position=position,
            entry=whole,
        )


def missing_log_note(log_path: Path) -> Note:
    """What a dump says when an index has no ``.log`` beside it."""
    return Note(f"entries not checked: {log_path.name} does not exist")
