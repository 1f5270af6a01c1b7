"""Which storage file a path is, from its name (the layout of ``strom_storage.log.files``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from strom_storage.log.cleaner.manager import CLEANER_CHECKPOINT_FILE
from strom_storage.log.files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    HIGH_WATERMARK_FILE,
    INDEX_SUFFIX,
    LOG_START_OFFSET_FILE,
    LOG_SUFFIX,
    RECOVERY_POINT_FILE,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_from_name,
)
from strom_storage.log.leader_epochs import LEADER_EPOCH_FILE
from strom_storage.tools.dump_log.report import FileKind

__all__ = ["EXPECTED", "FileType", "classify"]

#: What a file name must look like, for the message about an unknown one.
EXPECTED = (
    "<offset>.log, .index, .timeindex, .txnindex, .snapshot, a checkpoint file or "
    ".clean-shutdown "
    "(optionally with .deleted, .cleaned, .swap or .tmp after it)"
)

_TRANSIENT = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, TMP_SUFFIX)
_BY_SUFFIX = {
    LOG_SUFFIX: FileKind.LOG,
    INDEX_SUFFIX: FileKind.OFFSET_INDEX,
    TIME_INDEX_SUFFIX: FileKind.TIME_INDEX,
    TXN_INDEX_SUFFIX: FileKind.TXN_INDEX,
    SNAPSHOT_SUFFIX: FileKind.SNAPSHOT,
}
_BY_NAME = {
    RECOVERY_POINT_FILE: FileKind.OFFSET_CHECKPOINT,
    LOG_START_OFFSET_FILE: FileKind.OFFSET_CHECKPOINT,
    HIGH_WATERMARK_FILE: FileKind.OFFSET_CHECKPOINT,
    CLEANER_CHECKPOINT_FILE: FileKind.OFFSET_CHECKPOINT,
    LEADER_EPOCH_FILE: FileKind.LEADER_EPOCH_CHECKPOINT,
    CLEAN_SHUTDOWN_FILE: FileKind.CLEAN_SHUTDOWN,
}


@dataclass(frozen=True, slots=True)
class FileType:
    """A path's kind, the base offset its name carries and its transient suffix ("" if none)."""

    kind: FileKind
    base_offset: int | None
    transient_suffix: str = ""

    def sibling(self, path: Path, suffix: str) -> Path:
        """The file of the same segment with ``suffix`` (e.g. the ``.log`` of an ``.index``)."""
        stem = path.name.split(".", 1)[0]
        return path.with_name(stem + suffix + self.transient_suffix)


def classify(path: Path) -> FileType:
    """The type of ``path`` by name: segment files carry their base offset (None when the name
    does not start with one); anything else is ``FileKind.UNKNOWN``."""
    name = path.name
    transient = next((s for s in _TRANSIENT if name.endswith(s)), "")
    if transient:
        name = name[: -len(transient)]
    if name in _BY_NAME:
        return FileType(_BY_NAME[name], None, transient)
    for suffix, kind in _BY_SUFFIX.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            try:
                base_offset: int | None = offset_from_name(name)
            except ValueError:
                base_offset = None
            return FileType(kind, base_offset, transient)
    return FileType(FileKind.UNKNOWN, None, transient)
