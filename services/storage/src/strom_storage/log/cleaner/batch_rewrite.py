"""Decoding and re-encoding one batch for the cleaner (compaction is not the hot path).

A rewritten batch keeps everything a reader or a producer-state rebuild relies on: its base
offset and last offset delta (so its offset range is unchanged), each surviving record's offset
delta and timestamp, the partition leader epoch, producer id, epoch and base sequence, the
codec and the max timestamp. Only the record count and records section change, plus, when the
cleaner starts a tombstone's countdown, the delete-horizon attribute (bit 6) with the horizon
stored in the first-timestamp field (Kafka's convention; record timestamps are re-based on it,
so decoding yields the same timestamps).

Thread-safety: pure functions.
"""

from __future__ import annotations

import struct

from strom.records import decode_batch
from strom.records.compression import compress
from strom.records.crc import crc32c
from strom.records.header import (
    ATTR_DELETE_HORIZON,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
)
from strom.records.record import Record
from strom.records.varint import write_varint

__all__ = ["decode_batch_records", "delete_horizon", "rebuild_batch"]

_AFTER_CRC = struct.Struct(">hiqqqhii")
_BEFORE_CRC = struct.Struct(">qiibI")


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (ms) when the cleaner has set one."""
    return header.first_timestamp if header.attributes & ATTR_DELETE_HORIZON else None


def decode_batch_records(batch: bytes) -> tuple[BatchHeader, list[Record]]:
    """The header and the records of one whole batch (CRC checked, decompressed)."""
    decoded = decode_batch(batch)
    return decoded.header, list(decoded.records)


def rebuild_batch(
    header: BatchHeader, records: list[Record], *, horizon: int | None = None
) -> bytes:
    """A batch like ``header``'s holding only ``records`` (see the module docstring).

    ``horizon`` sets the delete-horizon attribute; None keeps the original one, if any.
    """
    attributes = header.attributes
    if horizon is None:
        horizon = delete_horizon(header)
    if horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
        base_ts = horizon
    else:
        base_ts = records[0].timestamp if records else header.first_timestamp
    body = bytearray()
    for record in records:
        rec = bytearray(b"\x00")
        write_varint(rec, record.timestamp - base_ts)
        write_varint(rec, record.offset - header.base_offset)
        for part in (record.key, record.value):
            if part is None:
                write_varint(rec, -1)
            else:
                write_varint(rec, len(part))
                rec += part
        write_varint(rec, len(record.headers))
        for hkey, hvalue in record.headers:
            encoded = hkey.encode("utf-8")
            write_varint(rec, len(encoded))
            rec += encoded
            if hvalue is None:
                write_varint(rec, -1)
            else:
                write_varint(rec, len(hvalue))
                rec += hvalue
        write_varint(body, len(rec))
        body += rec
    section = compress(header.compression, body) if header.compression else bytes(body)
    after_crc = (
        _AFTER_CRC.pack(
            attributes,
            header.last_offset_delta,
            base_ts,
            header.max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            len(records),
        )
        + section
    )
    length = HEADER_SIZE - LOG_OVERHEAD + len(section)
    crc = crc32c(after_crc)
    out = (
        _BEFORE_CRC.pack(header.base_offset, length, header.partition_leader_epoch, 2, crc)
        + after_crc
    )
    return out
