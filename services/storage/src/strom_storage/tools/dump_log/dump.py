"""Dumping files: pick the reader for each file's type, render its items, set the exit status."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from strom_storage.log.files import LOG_SUFFIX
from strom_storage.tools.dump_log.file_types import EXPECTED, FileType, classify
from strom_storage.tools.dump_log.index_files import (
    LogLayout,
    index_items,
    missing_log_note,
    read_layout,
)
from strom_storage.tools.dump_log.log_file import LogRead, read_batches, record_items
from strom_storage.tools.dump_log.reading import ReadOnlyFile
from strom_storage.tools.dump_log.render import json_line, text_line
from strom_storage.tools.dump_log.report import (
    FileKind,
    FileStart,
    Item,
    MarkerItem,
    Note,
    Problem,
    ProblemKind,
)
from strom_storage.tools.dump_log.state_files import (
    leader_epoch_items,
    offset_checkpoint_items,
    snapshot_items,
    txn_index_items,
)

__all__ = ["EXIT_OK", "EXIT_PROBLEMS", "DumpLogError", "DumpOptions", "dump_file", "dump_files"]

EXIT_OK = 0
#: Something was corrupt, could not be verified, or is not a storage file.
EXIT_PROBLEMS = 1

_INDEX_KINDS = (FileKind.OFFSET_INDEX, FileKind.TIME_INDEX)


class DumpLogError(RuntimeError):
    """A file that cannot be dumped at all (missing, a directory): reported as one line."""


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """The command's options (see ``docs/dump-log.md``)."""

    print_data_log: bool = False
    verify_index_only: bool = False
    json: bool = False


def _log_items(path: Path, file_type: FileType, options: DumpOptions) -> Iterator[Item]:
    with ReadOnlyFile(path) as file:
        for read in read_batches(file, file_type.base_offset):
            if not isinstance(read, LogRead):
                yield read
                continue
            yield read.item
            if options.print_data_log and read.item.crc_valid:
                yield from record_items(read)


def _index_file_items(
    path: Path, file_type: FileType, data: bytes, options: DumpOptions
) -> Iterator[Item]:
    log_path = file_type.sibling(path, LOG_SUFFIX)
    layout: LogLayout | None = None
    if log_path.is_file():
        layout = read_layout(log_path, file_type.base_offset)
    elif options.verify_index_only:
        yield Problem(f"cannot verify: {log_path.name} does not exist", kind=ProblemKind.UNVERIFIED)
    else:
        yield missing_log_note(log_path)
    if file_type.base_offset is None:
        yield Note("the name carries no base offset: offsets shown relative to 0")
    yield from index_items(file_type.kind, data, file_type.base_offset, layout)


def _read_all(path: Path) -> bytes:
    with ReadOnlyFile(path) as file:
        return file.read_all()


def dump_file(path: Path, options: DumpOptions) -> Iterator[Item]:
    """The items of one file: a ``FileStart``, then what its reader finds."""
    file_type = classify(path)
    if options.verify_index_only and file_type.kind not in _INDEX_KINDS:
        return
    yield FileStart(file_type.kind, file_type.base_offset, path.stat().st_size)
    match file_type.kind:
        case FileKind.LOG:
            yield from _log_items(path, file_type, options)
        case FileKind.OFFSET_INDEX | FileKind.TIME_INDEX:
            yield from _index_file_items(path, file_type, _read_all(path), options)
        case FileKind.SNAPSHOT:
            yield from snapshot_items(_read_all(path))
        case FileKind.TXN_INDEX:
            yield from txn_index_items(_read_all(path))
        case FileKind.OFFSET_CHECKPOINT:
            yield from offset_checkpoint_items(_read_all(path))
        case FileKind.LEADER_EPOCH_CHECKPOINT:
            yield from leader_epoch_items(_read_all(path))
        case FileKind.CLEAN_SHUTDOWN:
            yield MarkerItem()
        case FileKind.UNKNOWN:
            yield Problem(
                f"not a file the storage engine writes; expected {EXPECTED}",
                kind=ProblemKind.UNKNOWN,
            )


def _check_paths(paths: Sequence[Path]) -> None:
    for path in paths:
        if not path.exists():
            raise DumpLogError(f"{path}: no such file")
        if path.is_dir():
            raise DumpLogError(f"{path}: is a directory; name the files in it ({path}/*)")
        if not os.access(path, os.R_OK):
            raise DumpLogError(f"{path}: permission denied")


def dump_files(paths: Sequence[Path], options: DumpOptions, out: TextIO) -> int:
    """Dump every file in ``paths`` to ``out``; returns ``EXIT_PROBLEMS`` when any problem was
    found, else ``EXIT_OK``. Raises ``DumpLogError`` (before printing anything) for a missing,
    unreadable file or a directory, ``OSError`` when a file fails while it is read."""
    _check_paths(paths)
    render = json_line if options.json else text_line
    status = EXIT_OK
    for path in paths:
        for item in dump_file(path, options):
            if isinstance(item, Problem):
                status = EXIT_PROBLEMS
            elif options.verify_index_only:
                continue
            out.write(render(path, item) + "\n")
    return status
