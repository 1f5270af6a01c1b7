"""Compaction of a log holding transactions: aborted data goes, markers and committed data stay,
nothing at or above the last stable offset is touched."""

from __future__ import annotations

from collections.abc import Callable

from storage_batches import make_batch

from strom.records import BatchBuilder, decode_batch, walk_batches
from strom_server.runtime.clock import ManualClock
from strom_storage.log import FetchIsolation, Log
from strom_storage.log.cleaner.manager import LogCleaner
from strom_storage.log.txn_index import AbortedTxn

SEGMENT = 400
Row = tuple[int, bool, bytes | None, bytes | None]  # offset, control?, key, value


def _txn(log: Log, clock: ManualClock, pid: int, seq: int, kv: tuple[bytes, bytes]) -> int:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True
    )
    builder.append(clock.time_ms(), *kv)
    return log.append_as_leader(builder.build(), verified={(pid, 0)}).first_offset


def _put(log: Log, clock: ManualClock, key: bytes, value: bytes) -> int:
    return log.append_as_leader(make_batch([(key, value, clock.time_ms())])).first_offset


def _end(log: Log, pid: int, epoch: int, committed: bool) -> int:
    info = log.append_txn_marker(
        pid, epoch, committed=committed, coordinator_epoch=0, leader_epoch=0
    )
    assert info is not None
    return info.first_offset


def _rows(log: Log) -> list[Row]:
    out: list[Row] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.reader.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END).records
        for pos, header in walk_batches(data):
            batch = decode_batch(bytes(data[pos : pos + header.size]))
            out.extend((r.offset, header.is_control, r.key, r.value) for r in batch.records)
            offset = header.next_offset
    return out


def test_compaction_drops_aborted_data_keeps_markers_and_stops_at_the_lso(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = open_log(segment_bytes=SEGMENT, cleanup_policy=("compact",))
    _put(log, clock, b"k1", b"v1")  # 0
    _txn(log, clock, 7, 0, (b"k1", b"aborted"))  # 1: would shadow v1 if it counted
    _txn(log, clock, 7, 1, (b"k2", b"aborted"))  # 2
    _end(log, 7, 0, committed=False)  # 3
    _txn(log, clock, 8, 0, (b"k2", b"committed"))  # 4
    _end(log, 8, 0, committed=True)  # 5
    for i in range(6):
        _put(log, clock, b"k3", b"filler-%d" % i)  # 6-11
    open_at = _txn(log, clock, 9, 0, (b"k3", b"open"))  # 12: stays open
    for i in range(6):
        _put(log, clock, b"k3", b"late-%d" % i)  # 13-18, behind the open transaction
    log.roll()
    _put(log, clock, b"k4", b"active")
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == open_at
    entries = [t for s in log.segments() for t in s.txn_index.entries()]
    assert entries == [AbortedTxn(7, 1, 3, 4)]
    before = _rows(log)

    stats = LogCleaner(dedupe_buffer_bytes=1 << 16).clean(log, clock.time_ms())
    assert stats is not None and stats.end_offset <= open_at
    after = _rows(log)
    offsets = [row[0] for row in after]
    assert 1 not in offsets and 2 not in offsets  # the aborted transaction's data is gone
    assert (0, False, b"k1", b"v1") in after  # and did not shadow the committed value
    assert (4, False, b"k2", b"committed") in after
    assert [row[0] for row in after if row[1]] == [3, 5]  # both markers kept
    assert [row for row in before if row[0] >= open_at] == [r for r in after if r[0] >= open_at]
    assert [t for s in log.segments() for t in s.txn_index.entries()] == entries
    # A read_committed consumer still learns of the aborted transaction (its marker remains).
    log.close()
    reopened = open_log(segment_bytes=SEGMENT, cleanup_policy=("compact",))
    assert _rows(reopened) == after
    assert [t for s in reopened.segments() for t in s.txn_index.entries()] == entries
    assert reopened.last_stable_offset == open_at
