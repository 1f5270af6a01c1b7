"""Segment roll (segment.bytes, segment.ms), retention, log start offset, timestamp lookups."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
from storage_batches import make_batch, simple_batch

from strom.errors import OffsetOutOfRangeError
from strom.records import Compression
from strom.records.header import walk_batches
from strom_server.runtime.clock import ManualClock
from strom_storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from strom_storage.log.retention import deletable_segments

BATCH = len(simple_batch(1))


def _append(log: Log, n: int, clock: ManualClock | None = None, step_ms: int = 0) -> None:
    for _ in range(n):
        ts = clock.time_ms() if clock is not None else 1_700_000_000_000
        log.append_as_leader(simple_batch(1, ts=ts))
        if clock is not None and step_ms:
            clock.advance_ms(step_ms)
    log.update_high_watermark(log.log_end_offset)


def test_roll_on_segment_bytes(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 3)
    _append(log, 10)
    bases = [s.base_offset for s in log.segments()]
    assert bases == [0, 3, 6, 9]
    assert all(s.size <= BATCH * 3 for s in log.segments())
    # Names are 20-digit base offsets, with both indexes next to each log.
    names = sorted(p.name for p in log.directory.iterdir())
    assert "00000000000000000003.log" in names
    assert "00000000000000000003.index" in names
    assert "00000000000000000003.timeindex" in names
    assert "00000000000000000003.snapshot" in names or "00000000000000000009.snapshot" in names


def test_roll_on_segment_ms(open_log: Callable[..., Log], clock: ManualClock) -> None:
    log = open_log(segment_ms=1000)
    _append(log, 3, clock, step_ms=400)  # 0, 400, 800 ms after the first batch
    assert log.segment_count == 1
    clock.advance_ms(300)  # 1100 ms since the first batch's timestamp
    _append(log, 1, clock)
    assert [s.base_offset for s in log.segments()] == [0, 3]


def test_explicit_roll_on_empty_active_is_noop(open_log: Callable[..., Log]) -> None:
    log = open_log()
    first = log.roll()
    assert log.roll() is first
    _append(log, 1)
    assert log.roll().base_offset == 1


def test_retention_by_time_never_deletes_active(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = open_log(segment_bytes=BATCH * 2, retention_ms=10_000)
    _append(log, 6, clock, step_ms=1000)  # segments [0,1] [2,3] [4,5]; the last is active
    assert [s.base_offset for s in log.segments()] == [0, 2, 4]
    assert log.apply_retention() == 0
    clock.advance_ms(100_000)  # everything is old now
    assert log.apply_retention() == 2
    assert [s.base_offset for s in log.segments()] == [4]
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.reader.read(0, 1000)
    assert walk_batches(log.reader.read(4, 1 << 20).records)[0][1].base_offset == 4


def test_retention_by_time_stops_at_first_recent_segment(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = open_log(segment_bytes=BATCH * 2, retention_ms=10_000)
    _append(log, 2, clock)
    clock.advance_ms(20_000)
    _append(log, 4, clock)
    assert log.apply_retention() == 1
    assert log.log_start_offset == 2


def test_retention_by_bytes(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 2, retention_bytes=BATCH * 3)
    _append(log, 9)  # five segments: 2+2+2+2+1 batches
    assert log.apply_retention() == 3  # keeps 3 batches: never below retention.bytes
    assert log.size_in_bytes == BATCH * 3
    assert log.log_start_offset == 6


def test_retention_respects_high_watermark(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 2, retention_bytes=0)
    for _ in range(6):
        log.append_as_leader(simple_batch(1))
    log.update_high_watermark(3)
    assert log.apply_retention() == 1  # [2,3] holds offset 3, not yet committed
    assert log.log_start_offset == 2


def test_retention_decision_names_the_first_kept_segment(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 2, retention_bytes=BATCH * 3)
    _append(log, 9)  # five segments: 2+2+2+2+1 batches
    decide = functools.partial(
        deletable_segments, config=log.config, now_ms=0, log_start_offset=0, high_watermark=9
    )
    decision = decide(log.segments())
    assert [s.base_offset for s in decision.segments] == [0, 2, 4]
    assert decision.reasons == ("retention.bytes",)
    assert decision.first_kept_offset == 6
    kept = decide(log.segments(), time_and_size=False)  # the log-start rule alone
    assert (kept.segments, kept.reasons, kept.first_kept_offset) == ([], (), -1)
    assert log.log_start_offset == 0  # deciding deletes nothing


def test_compact_policy_disables_time_and_size_retention(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 2, retention_bytes=0, cleanup_policy=("compact",))
    _append(log, 6)
    assert log.apply_retention() == 0


def test_delete_records_moves_log_start(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 2)
    _append(log, 6)
    assert log.delete_records(3) == 3
    assert [s.base_offset for s in log.segments()] == [2, 4]
    with pytest.raises(OffsetOutOfRangeError):
        log.reader.read(2, 1000)
    data = log.reader.read(3, 1000).records
    assert walk_batches(data)[0][1].base_offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(7)  # above the high watermark
    assert log.delete_records(1) == 3  # never moves back
    assert log.reader.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 3  # type: ignore[union-attr]


def test_offsets_for_timestamp(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 3 + 10, index_interval_bytes=1)
    base = 1_700_000_000_000
    for i in range(10):
        log.append_as_leader(make_batch([(None, b"v", base + i * 100)]))
    log.update_high_watermark(8)
    found = log.reader.offset_for_timestamp(base + 250)
    assert found is not None and (found.offset, found.timestamp) == (3, base + 300)
    found = log.reader.offset_for_timestamp(base + 300)
    assert found is not None and found.offset == 3
    assert log.reader.offset_for_timestamp(base - 5).offset == 0  # type: ignore[union-attr]
    assert log.reader.offset_for_timestamp(base + 850) is None  # offset 9 is above the HW
    assert log.reader.offset_for_timestamp(LATEST_TIMESTAMP).offset == 8  # type: ignore[union-attr]
    top = log.reader.offset_for_timestamp(MAX_TIMESTAMP)
    assert top is not None and top.offset == 7


def test_max_timestamp_names_the_record_inside_its_batch(open_log: Callable[..., Log]) -> None:
    # KIP-734: the first record carrying the largest timestamp, not its batch's base offset.
    log = open_log(segment_bytes=250, index_interval_bytes=1)
    base = 1_700_000_000_000
    log.append_as_leader(make_batch([(None, b"a", base), (None, b"b", base + 50)]))
    log.append_as_leader(
        make_batch([(None, b"c", base + 10), (None, b"d", base + 90), (None, b"e", base + 20),
                    (None, b"f", base + 90)], compression=Compression.ZSTD)
    )  # fmt: skip
    log.append_as_leader(make_batch([(None, b"g", base + 30)] * 10))  # rolls the segment
    log.update_high_watermark(log.log_end_offset)
    assert log.segment_count > 1
    top = log.reader.offset_for_timestamp(MAX_TIMESTAMP)
    assert top is not None and (top.offset, top.timestamp) == (3, base + 90)
    log.delete_records(4)
    top = log.reader.offset_for_timestamp(MAX_TIMESTAMP)  # never below the log start
    assert top is not None and (top.offset, top.timestamp) == (4, base + 90)


def test_offsets_for_timestamp_inside_a_batch(open_log: Callable[..., Log]) -> None:
    log = open_log()
    base = 1_700_000_000_000
    log.append_as_leader(make_batch([(None, b"a", base), (None, b"b", base + 10),
                                     (None, b"c", base + 20)]))  # fmt: skip
    log.update_high_watermark(3)
    found = log.reader.offset_for_timestamp(base + 5)
    assert found is not None
    assert (found.offset, found.timestamp) == (1, base + 10)  # the record, not the batch


def test_roll_when_index_is_full(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_index_bytes=24, index_interval_bytes=1)  # 3 offset / 2 time entries
    _append(log, 12)
    assert log.segment_count > 1
    assert all(s.offset_index.entries <= 3 for s in log.segments())


def test_old_timestamps_do_not_roll_every_append(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_ms=1000)
    for _ in range(5):
        log.append_as_leader(simple_batch(1, ts=1))  # record time far behind the clock
    assert log.segment_count == 1
    log.append_as_leader(simple_batch(1, ts=5000))  # record time moved past segment.ms
    assert log.segment_count == 2
