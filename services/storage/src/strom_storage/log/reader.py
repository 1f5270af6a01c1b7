"""The read side of a partition's log: Fetch and ListOffsets.

``LogReader`` reads whole batches from the segments (``LocalLog.read``), bounded by the offsets
the owning ``Log`` publishes: the log end (``LocalLog.end``), the log start offset and the high
watermark (``LogBounds``), and the last stable offset (from the producer state's first unstable
offset). A read_committed read also reports the aborted transactions overlapping what it
returns, from the segments' ``.txnindex`` files. The reader holds no append state and changes
nothing.

Thread-safety: thread-safe and lock-free. A read snapshots the published log end, log start and
high watermark, then ``pread``s the segment files, so any number of reads run in parallel with
each other and with an append (the log publishes an offset only once what lies below it is
written).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from strom.errors import OffsetOutOfRangeError
from strom_storage.log.local_log import LocalLog
from strom_storage.log.producer_state import ProducerStateManager
from strom_storage.log.timestamp_lookup import OffsetAndTimestamp, lookup_offset

__all__ = ["FetchData", "FetchIsolation", "LogBounds", "LogReader"]


class FetchIsolation(enum.Enum):
    """How far a reader may read: consumers to the high watermark (read_committed ones to the
    last stable offset), followers to the log end."""

    HIGH_WATERMARK = "high_watermark"
    LOG_END = "log_end"
    #: read_committed consumers: below the last stable offset (no open transaction's data).
    TXN_COMMITTED = "txn_committed"


@dataclass(frozen=True, slots=True)
class FetchData:
    """Raw bytes of whole batches plus the offsets a Fetch response reports."""

    records: bytes | memoryview
    fetch_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    #: min(high watermark, first offset of every open transaction).
    last_stable_offset: int = -1
    #: (producer id, first offset) of the aborted transactions overlapping ``records``
    #: (``TXN_COMMITTED`` reads only).
    aborted_transactions: tuple[tuple[int, int], ...] = ()


class LogBounds:
    """The log start offset and the high watermark of one log: the owning ``Log`` writes them
    under its lock, its ``LogReader`` reads them without."""

    __slots__ = ("high_watermark", "log_start_offset")

    def __init__(self, log_start_offset: int, high_watermark: int) -> None:
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark


class LogReader:
    """Fetch and ListOffsets over one log (see module docstring); ``Log.reader``."""

    def __init__(self, local: LocalLog, bounds: LogBounds, producers: ProducerStateManager) -> None:
        self._local = local
        self._bounds = bounds
        self._producers = producers

    @property
    def last_stable_offset(self) -> int:
        """min(high watermark, first offset of every open transaction, and of every ended one
        whose marker the high watermark has not passed yet)."""
        hw = self._bounds.high_watermark  # read first: an append publishes its open txn first
        first_unstable = self._producers.first_unstable_offset
        if first_unstable is None:
            return hw
        # A transaction whose start was deleted (delete-records) holds it at the log start.
        return min(hw, max(first_unstable, self._bounds.log_start_offset))

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchData:
        """Raw whole batches from the one holding ``fetch_offset``, up to ``max_bytes``.

        Consumers (``HIGH_WATERMARK``) stop at the high watermark, read_committed consumers
        (``TXN_COMMITTED``) at the last stable offset, followers (``LOG_END``) at the log end;
        ``max_offset`` caps further. With ``min_one_batch`` the first batch is returned even
        when larger than ``max_bytes``. A ``TXN_COMMITTED`` read also reports the aborted
        transactions overlapping the returned batches. Raises ``OffsetOutOfRangeError`` below
        the log start or above the log end.
        """
        local = self._local
        bounds = self._bounds
        end = local.end
        start = bounds.log_start_offset
        hw = bounds.high_watermark
        first_unstable = self._producers.first_unstable_offset
        lso = hw if first_unstable is None else min(hw, max(first_unstable, start))
        if fetch_offset < start or fetch_offset > end.offset:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{start}, {end.offset}] of "
                f"{local.directory.name}"
            )
        if isolation is FetchIsolation.HIGH_WATERMARK:
            limit = hw
        elif isolation is FetchIsolation.LOG_END:
            limit = end.offset
        else:
            limit = lso
        if max_offset is not None:
            limit = min(limit, max_offset)
        records: bytes | memoryview = b""
        if fetch_offset < limit and max_bytes >= 0:
            records = local.read(
                fetch_offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch, end=end
            )
        aborted: tuple[tuple[int, int], ...] = ()
        if isolation is FetchIsolation.TXN_COMMITTED and records:
            aborted = local.collect_aborted(fetch_offset, records)
        return FetchData(records, fetch_offset, hw, start, end.offset, lso, aborted)

    def offset_for_timestamp(
        self, timestamp: int, *, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK
    ) -> OffsetAndTimestamp | None:
        """ListOffsets: the earliest offset whose record timestamp is >= ``timestamp``.

        ``EARLIEST_TIMESTAMP`` gives the log start, ``LATEST_TIMESTAMP`` the high watermark
        (the last stable offset for ``TXN_COMMITTED``, the log end for ``LOG_END``),
        ``MAX_TIMESTAMP`` the first record with the largest timestamp. None when no record that
        readers may see qualifies.
        """
        start = self._bounds.log_start_offset
        if isolation is FetchIsolation.HIGH_WATERMARK:
            limit = self._bounds.high_watermark
        elif isolation is FetchIsolation.LOG_END:
            limit = self._local.log_end_offset
        else:
            limit = self.last_stable_offset
        return lookup_offset(self._local.segments, timestamp, log_start=start, limit=limit)
