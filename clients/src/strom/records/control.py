"""Control records: what a control batch (attribute bit 5) carries instead of user records.

Kafka's layout, big-endian. The key of every control record::

    offset size field
         0    2 version            0
         2    2 type               0 ABORT, 1 COMMIT (transaction markers); 2-6 are KRaft's

For ABORT and COMMIT the value is the end-transaction marker::

         0    2 version            0
         2    4 coordinator_epoch

Partition leaders write ABORT/COMMIT markers when a transaction ends (``end_txn_marker``
builds the record, a control batch carries it); readers and tools name them with
``decode_control_record``. Bytes after the fields are ignored, as Kafka ignores fields of newer
versions.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from strom.errors import InvalidRecordLayoutError

__all__ = ["ControlRecord", "ControlRecordType", "decode_control_record", "end_txn_marker"]

_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """The ``type`` field of a control record key (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecord(NamedTuple):
    """A decoded control record: its key's version and type, and for a transaction marker
    the coordinator epoch (None for other types)."""

    version: int
    type: int
    coordinator_epoch: int | None

    @property
    def type_name(self) -> str:
        """``ABORT``, ``COMMIT``, ... or ``UNKNOWN(<type>)``."""
        try:
            return ControlRecordType(self.type).name
        except ValueError:
            return f"UNKNOWN({self.type})"


def decode_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Decode a control record's key and value; ``InvalidRecordLayoutError`` when too short."""
    if key is None or len(key) < _KEY.size:
        size = -1 if key is None else len(key)
        raise InvalidRecordLayoutError(
            f"control record key of {size} bytes, at least {_KEY.size} expected"
        )
    version, kind = _KEY.unpack_from(key)
    epoch = None
    if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        if value is None or len(value) < _END_TXN_MARKER.size:
            size = -1 if value is None else len(value)
            raise InvalidRecordLayoutError(
                f"end-transaction marker of {size} bytes, at least {_END_TXN_MARKER.size} expected"
            )
        _, epoch = _END_TXN_MARKER.unpack_from(value)
    return ControlRecord(version, kind, epoch)


def end_txn_marker(committed: bool, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """The (key, value) of the control record ending a transaction (COMMIT or ABORT)."""
    kind = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
    return _KEY.pack(0, kind), _END_TXN_MARKER.pack(0, coordinator_epoch)
