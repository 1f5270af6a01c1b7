"""The compaction algorithm: one cleaning pass over a log's segments, as plain functions.

A log's inactive segments hold a *clean* section (already compacted: below the first dirty
offset) followed by a *dirty* section; the active segment is never touched, and neither is
anything at or above the first uncleanable offset (the active segment's base, the last stable
offset — never the data of an open transaction —, or the first segment younger than
``min.compaction.lag.ms``).

Transactions: the batches of aborted transactions (``AbortedRanges``, from the segments'
``.txnindex`` files) take no part in the offset map and are dropped whole; control batches
(transaction markers) are always kept, as are the cleaned segments' transaction index entries.

One pass:

1. ``build_offset_map``: read the dirty section batch by batch and record, per key, the latest
   offset. The map has a fixed capacity; when the next batch's new keys would not fit, the pass
   stops there (``end``) and the rest of the dirty section waits for the next pass.
2. Group the segments below ``end`` into runs whose total size fits ``segment.bytes``, and
   rewrite each run into one ``.cleaned`` segment keeping a record when
   * its offset is at or above ``end`` (not yet examined), or it has no key, or
   * it is the latest record of its key (offset >= the map's offset, or its key is not in the
     map), and
   * it is not a tombstone past its delete horizon. A tombstone first met by the cleaner is
     kept and its batch is stamped with horizon = now + ``delete.retention.ms``; a later pass
     after the horizon removes it.
   Surviving records keep their offsets, order, timestamps and batch boundaries (see
   ``strom.records.rebuild_batch``); a batch whose records all survive is copied byte for
   byte; a batch with no survivor disappears, unless it is an idempotent producer's latest
   batch, which stays with no records (Kafka does the same) so that the producer's sequence
   survives a rebuild of the producer state from the log.
3. The caller swaps each cleaned run into the log (``Log.replace_segments``).

Memory: the offset map plus one batch at a time (segments are read with ``pread``).
Thread-safety: runs in the cleaner's thread; it only reads the old segments (safe alongside
appends and reads) and writes new files that nobody else sees until the swap, which takes the
log's lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from strom.errors import StorageError
from strom.records import rebuild_batch
from strom.records.header import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader, read_header
from strom_storage.log.cleaner.batch_rewrite import (
    decode_batch_records,
    delete_horizon,
)
from strom_storage.log.cleaner.offset_map import OffsetMap
from strom_storage.log.files import CLEANED_SUFFIX
from strom_storage.log.segment import LogSegment
from strom_storage.log.txn_index import AbortedTxn

__all__ = [
    "AbortedRanges",
    "CleanStats",
    "build_offset_map",
    "clean_segments",
    "group_segments_by_size",
]

_INT64_MAX = (1 << 63) - 1


@dataclass
class CleanStats:
    """What one pass did."""

    end_offset: int = 0
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    batches_rewritten: int = 0
    groups: list[list[int]] = field(default_factory=list)


class AbortedRanges:
    """The offset ranges of aborted transactions, per producer: which batches to drop."""

    def __init__(self, txns: Iterable[AbortedTxn] = ()) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for txn in txns:
            self._by_producer.setdefault(txn.producer_id, []).append(
                (txn.first_offset, txn.last_offset)
            )

    @classmethod
    def of(cls, segments: Sequence[LogSegment]) -> AbortedRanges:
        """Every aborted transaction listed in the transaction indexes of ``segments``."""
        return cls(
            txn for s in segments if not s.txn_index.is_empty for txn in s.txn_index.entries()
        )

    def __bool__(self) -> bool:
        return bool(self._by_producer)

    def holds(self, header: BatchHeader) -> bool:
        """Whether ``header`` is a data batch of an aborted transaction."""
        if header.attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL) != ATTR_TRANSACTIONAL:
            return False
        ranges = self._by_producer.get(header.producer_id)
        return ranges is not None and any(
            first <= header.base_offset <= last for first, last in ranges
        )


_NONE_ABORTED = AbortedRanges()


def _segments_from(segments: Sequence[LogSegment], start: int) -> list[LogSegment]:
    """``segments`` from the one holding ``start`` on."""
    out: list[LogSegment] = []
    for i, segment in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if nxt is None or nxt > start:
            out.append(segment)
    return out


def build_offset_map(
    segments: Sequence[LogSegment],
    start: int,
    end: int,
    offset_map: OffsetMap,
    aborted: AbortedRanges = _NONE_ABORTED,
) -> int:
    """Record the latest offset per key for records in [``start``, ``end``) (the records of
    ``aborted`` transactions do not count).

    Returns where the map stopped: ``end`` when everything fit, else the base offset of the
    first batch that did not. Raises ``StorageError`` when not even one batch fits.
    """
    for segment in _segments_from(segments, start):
        if segment.base_offset >= end:
            break
        position = (
            segment.offset_index.lookup(start).position if segment.base_offset <= start else 0
        )
        for location in segment.batches(position):
            header = location.header
            if header.base_offset >= end:
                return end
            if header.last_offset < start or header.is_control or aborted.holds(header):
                continue
            _, records = decode_batch_records(segment.read_batch(location))
            keys = [r for r in records if r.key is not None and r.offset >= start]
            new = {r.key for r in keys if offset_map.get(r.key) is None}  # type: ignore[arg-type]
            if len(new) > offset_map.free:
                if offset_map.size == 0:
                    raise StorageError(
                        f"the cleaner's offset map ({offset_map.capacity} keys) cannot hold "
                        f"one batch of {len(new)} keys at offset {header.base_offset}"
                    )
                return header.base_offset
            for record in keys:
                offset_map.put(record.key, record.offset)  # type: ignore[arg-type]
    return end


def group_segments_by_size(
    segments: Sequence[LogSegment], *, max_size: int, max_index_entries: int
) -> list[list[LogSegment]]:
    """Consecutive runs whose combined size and index entries fit one segment."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            entries = sum(s.offset_index.entries for s in group) + segment.offset_index.entries
            span_ok = segment.base_offset - group[0].base_offset < 0x7FFFFFFF // 2
            if size <= max_size and entries < max_index_entries and span_ok:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


def clean_segments(
    group: Sequence[LogSegment],
    offset_map: OffsetMap,
    *,
    end_offset: int,
    now_ms: int,
    delete_retention_ms: int,
    index_interval_bytes: int,
    max_index_size: int,
    stats: CleanStats,
    retain_batches: frozenset[int] = frozenset(),
    aborted: AbortedRanges = _NONE_ABORTED,
) -> LogSegment:
    """Write the survivors of ``group`` into a new ``.cleaned`` segment (returned, open),
    with the transaction index entries of the group."""
    first = group[0]
    cleaned = LogSegment(
        first.directory,
        first.base_offset,
        index_interval_bytes=index_interval_bytes,
        max_index_size=max_index_size,
        created_ms=now_ms,
        writable=True,
        file_suffix=CLEANED_SUFFIX,
    )
    # A leftover from an interrupted pass must not be appended to.
    if cleaned.size:
        cleaned.delete()
        cleaned = LogSegment(
            first.directory,
            first.base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size,
            created_ms=now_ms,
            writable=True,
            file_suffix=CLEANED_SUFFIX,
        )
    try:
        for segment in group:
            stats.bytes_in += segment.size
            for location in segment.batches():
                raw = segment.read_batch(location)
                out = _clean_batch(
                    location.header,
                    raw,
                    offset_map,
                    end_offset=end_offset,
                    now_ms=now_ms,
                    delete_retention_ms=delete_retention_ms,
                    stats=stats,
                    retain=location.header.base_offset in retain_batches,
                    aborted=aborted,
                )
                if out is not None:
                    cleaned.append(out, [(0, read_header(out, 0))])
            for txn in segment.txn_index.entries():
                cleaned.txn_index.append(txn)
        stats.bytes_out += cleaned.size
    except BaseException:
        cleaned.delete()
        raise
    return cleaned


def _clean_batch(
    header: BatchHeader,
    raw: bytes,
    offset_map: OffsetMap,
    *,
    end_offset: int,
    now_ms: int,
    delete_retention_ms: int,
    stats: CleanStats,
    retain: bool = False,
    aborted: AbortedRanges = _NONE_ABORTED,
) -> bytes | None:
    """The batch to write for ``raw`` (itself, a rewrite, or None to drop it)."""
    if header.is_control or header.base_offset >= end_offset:
        return raw
    if aborted.holds(header):
        stats.records_removed += header.record_count
        # A producer's latest batch stays, empty, so its sequence survives a state rebuild.
        return rebuild_batch(header, []) if retain else None
    _, records = decode_batch_records(raw)
    horizon = delete_horizon(header)
    kept = []
    tombstones_kept = False
    for record in records:
        if record.offset < end_offset and record.key is not None:
            latest = offset_map.get(record.key)
            if latest is not None and record.offset < latest:
                stats.records_removed += 1
                continue
            if record.value is None:
                if horizon is not None and now_ms >= horizon:
                    stats.records_removed += 1
                    stats.tombstones_removed += 1
                    continue
                tombstones_kept = True
        kept.append(record)
    if not kept:
        # A producer's latest batch stays, empty, so its sequence survives a state rebuild.
        return rebuild_batch(header, []) if retain else None
    needs_horizon = tombstones_kept and horizon is None
    if len(kept) == len(records) and not needs_horizon:
        return raw
    stats.batches_rewritten += 1
    return rebuild_batch(
        header,
        kept,
        delete_horizon=min(now_ms + delete_retention_ms, _INT64_MAX) if needs_horizon else None,
    )
