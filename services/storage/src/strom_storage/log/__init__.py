"""The partition log: segments, indexes, recovery, retention, producer state.

Layers: ``LogSegment`` (one set of files) -> ``LogSegments`` (the sorted map) ->
``LocalLog`` (files and log end) -> ``Log`` (offsets, validation, policy), whose ``LogReader``
serves reads. ``LogManager`` holds a node's logs and runs their background upkeep. Nothing here
imports gRPC or the protocol stubs; the servicer converts requests into calls on ``Log`` and
``LogManager``.
"""

from strom_storage.log.config import LogConfig
from strom_storage.log.log import AppendInfo, Log
from strom_storage.log.reader import FetchData, FetchIsolation, LogReader
from strom_storage.log.timestamp_lookup import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    OffsetAndTimestamp,
)

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "FetchData",
    "FetchIsolation",
    "Log",
    "LogConfig",
    "LogReader",
    "OffsetAndTimestamp",
]
