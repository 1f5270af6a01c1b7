"""Kafka's read_committed filter: which fetched batches a read_committed reader drops.

A READ_COMMITTED fetch returns data up to the last stable offset and, for the chunk it
returns, the aborted transactions overlapping it: (producer id, first offset). Walking the
chunk's batches in offset order (Kafka's ``CompletedFetch``), an aborted transaction's producer
id becomes active at the transaction's first offset; that producer's transactional batches are
dropped while it is active; its ABORT marker ends it. Control batches (COMMIT/ABORT markers) are
dropped under both isolation levels. Used by the consumer's fetcher and the Spark source.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from strom.errors import CorruptRecordError
from strom.records import decode_control_record
from strom.records.control import ControlRecordType
from strom.records.header import ATTR_CONTROL, ATTR_TRANSACTIONAL

__all__ = ["AbortedTransaction", "AbortedTransactionFilter"]

#: (producer id, first offset) of an aborted transaction, as FetchPartitionResult lists them.
AbortedTransaction = tuple[int, int]


class AbortedTransactionFilter:
    """One fetched chunk's filter; call ``drops`` for each of its batches in offset order."""

    __slots__ = ("_active", "_pending")

    def __init__(self, aborted: Sequence[AbortedTransaction]) -> None:
        self._pending = [(first, pid) for pid, first in aborted]
        heapq.heapify(self._pending)
        self._active: set[int] = set()

    def drops(
        self, header: Any, keys: Sequence[bytes | None], values: Sequence[bytes | None]
    ) -> bool:
        """Whether the batch (its ``BatchHeader`` and decoded keys and values) is dropped: a
        control batch (always; an ABORT marker also ends its producer's aborted transaction),
        or a batch of an aborted transaction."""
        pid = header.producer_id
        attributes = header.attributes
        if pid >= 0:
            last = header.base_offset + header.last_offset_delta
            pending = self._pending
            while pending and pending[0][0] <= last:
                self._active.add(heapq.heappop(pending)[1])
            if attributes & ATTR_CONTROL:
                if pid in self._active and keys and _is_abort_marker(keys[0], values[0]):
                    self._active.discard(pid)
                return True
            if attributes & ATTR_TRANSACTIONAL and pid in self._active:
                return True
        return bool(attributes & ATTR_CONTROL)


def _is_abort_marker(key: bytes | None, value: bytes | None) -> bool:
    try:
        return decode_control_record(key, value).type == ControlRecordType.ABORT
    except CorruptRecordError:
        return False
