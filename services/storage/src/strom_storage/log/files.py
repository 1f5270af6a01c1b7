"""File names inside a partition directory (Kafka's layout).

::

    <log.dir>/<topic>-<partition>/
        00000000000000000000.log          segment data: concatenated v2 record batches
        00000000000000000000.index        sparse offset index (offset_index.py)
        00000000000000000000.timeindex    sparse time index (time_index.py)
        00000000000000000000.txnindex     aborted transactions, only once there is one
                                          (txn_index.py)
        00000000000000001234.snapshot     producer state as of offset 1234 (producer_state.py)
        recovery-point-offset-checkpoint  offset below which everything is fsynced
        log-start-offset-checkpoint       first offset readers may see
        high-watermark-checkpoint         last high watermark the log was told about
        leader-epoch-checkpoint           leader epoch -> first offset (leader_epochs.py)
        cleaner-offset-checkpoint         compacted logs: first dirty offset (cleaner/)
        .clean-shutdown                   present only between a clean close and the next open

Segment files carry the 20-digit zero-padded base offset. Suffixes ``.deleted`` (waiting for
``file.delete.delay.ms``), ``.cleaned`` and ``.swap`` (compaction in progress) and ``.tmp``
(checkpoint being written) mark transient files that loading removes or completes.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "CLEANED_SUFFIX",
    "CLEAN_SHUTDOWN_FILE",
    "DELETED_SUFFIX",
    "HIGH_WATERMARK_FILE",
    "INDEX_SUFFIX",
    "LOG_START_OFFSET_FILE",
    "LOG_SUFFIX",
    "RECOVERY_POINT_FILE",
    "SNAPSHOT_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TMP_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "file_path",
    "filename_prefix",
    "offset_from_name",
    "parse_partition_dir_name",
    "partition_dir_name",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TMP_SUFFIX = ".tmp"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE = "high-watermark-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded offset that starts segment and snapshot file names."""
    return f"{offset:020d}"


def file_path(directory: Path, offset: int, suffix: str) -> Path:
    return directory / (filename_prefix(offset) + suffix)


def offset_from_name(name: str) -> int:
    """The offset a segment or snapshot file name starts with."""
    return int(name.split(".", 1)[0])


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory name, or None when it is not one."""
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit():
        return None
    return topic, int(number)
