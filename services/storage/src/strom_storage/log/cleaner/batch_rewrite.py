"""Reading one batch for the cleaner (compaction is not the hot path); the cleaner re-encodes
with ``strom.records.rebuild_batch``, the one record-batch encoder, which guarantees:

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

from strom.records import decode_batch
from strom.records.header import ATTR_DELETE_HORIZON, BatchHeader
from strom.records.record import Record

__all__ = ["decode_batch_records", "delete_horizon"]


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (ms) when the cleaner has set one."""
    return header.first_timestamp if header.attributes & ATTR_DELETE_HORIZON else None


def decode_batch_records(batch: bytes) -> tuple[BatchHeader, list[Record]]:
    """The header and the records of one whole batch (CRC checked, decompressed)."""
    decoded = decode_batch(batch)
    return decoded.header, list(decoded.records)
