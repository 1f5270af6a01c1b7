"""Loading a partition: clean-shutdown fast path, crash recovery, corrupt and torn tails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from storage_batches import simple_batch

from strom.records.header import walk_batches
from strom_storage.log import FetchIsolation, Log
from strom_storage.log.files import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE
from strom_storage.log.segment import LogSegment

BATCH = len(simple_batch(1, value_size=100))


def _fill(log: Log, n: int) -> None:
    for _ in range(n):
        log.append_as_leader(simple_batch(1, value_size=100))
    log.update_high_watermark(log.log_end_offset)


def _all_offsets(log: Log) -> list[int]:
    out: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.reader.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END).records
        if not data:
            break
        headers = [h for _, h in walk_batches(data)]  # checks every CRC
        out.extend(h.base_offset for h in headers)
        offset = headers[-1].next_offset
    return out


def _active_log_file(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


def test_clean_shutdown_fast_path_rebuilds_nothing(
    open_log: Callable[..., Log], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(segment_bytes=BATCH * 4, index_interval_bytes=1)
    _fill(log, 20)
    log.close()
    assert (log.directory / CLEAN_SHUTDOWN_FILE).exists()

    def no_recover(self: LogSegment, on_batch: object = None) -> int:
        raise AssertionError("recover must not run after a clean shutdown")

    monkeypatch.setattr(LogSegment, "recover", no_recover)
    reopened = open_log(segment_bytes=BATCH * 4, index_interval_bytes=1)
    assert reopened.had_clean_shutdown
    assert not (reopened.directory / CLEAN_SHUTDOWN_FILE).exists()
    assert reopened.log_end_offset == 20
    assert reopened.high_watermark == 20
    # Indexes of inactive segments stay unmapped until a read needs them.
    inactive = reopened.segments()[:-1]
    assert inactive and not any(s.offset_index.is_open for s in inactive)
    assert _all_offsets(reopened) == list(range(20))
    reopened.append_as_leader(simple_batch(1))
    assert reopened.log_end_offset == 21


def test_unclean_restart_recovers_from_recovery_point(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 4, index_interval_bytes=1)
    _fill(log, 10)
    log.maintenance()  # fsyncs the rolled segments: recovery point at the active's base
    assert log.recovery_point == 8
    _fill(log, 3)
    log.close_unclean()
    reopened = open_log(segment_bytes=BATCH * 4, index_interval_bytes=1)
    assert not reopened.had_clean_shutdown
    assert reopened.recovered_segments == 2  # only the segments from the recovery point on
    assert reopened.log_end_offset == 13
    assert reopened.recovery_point == 13
    assert _all_offsets(reopened) == list(range(13))


def test_torn_tail_is_truncated(open_log: Callable[..., Log]) -> None:
    log = open_log()
    _fill(log, 5)
    log.close_unclean()
    path = _active_log_file(log.directory)
    with open(path, "r+b") as f:
        f.truncate(BATCH * 4 + BATCH // 2)  # the last batch is cut in half
    reopened = open_log()
    assert reopened.log_end_offset == 4
    assert path.stat().st_size == BATCH * 4
    assert _all_offsets(reopened) == [0, 1, 2, 3]
    info = reopened.append_as_leader(simple_batch(1))
    assert info.first_offset == 4


def test_flipped_byte_truncates_from_the_corrupt_batch(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 4)
    _fill(log, 10)  # segments [0-3] [4-7] [8-9]
    log.close_unclean()
    (log.directory / RECOVERY_POINT_FILE).unlink(missing_ok=True)  # recover everything
    path = log.directory / "00000000000000000004.log"
    data = bytearray(path.read_bytes())
    data[BATCH + 80] ^= 0xFF  # inside the records of offset 5
    path.write_bytes(bytes(data))
    reopened = open_log(segment_bytes=BATCH * 4)
    assert reopened.log_end_offset == 5
    assert [s.base_offset for s in reopened.segments()] == [0, 4]
    assert _all_offsets(reopened) == [0, 1, 2, 3, 4]


def test_missing_index_files_are_rebuilt(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=BATCH * 4, index_interval_bytes=1)
    _fill(log, 10)
    log.close()
    for path in log.directory.glob("*index"):
        path.unlink()
    reopened = open_log(segment_bytes=BATCH * 4, index_interval_bytes=1)
    first = reopened.segments()[0]
    assert first.offset_index.entries == 3  # one per batch after the first
    assert first.time_index.path.exists()
    assert _all_offsets(reopened) == list(range(10))


def test_garbage_after_clean_close_of_active_index_is_repaired(
    open_log: Callable[..., Log],
) -> None:
    log = open_log(index_interval_bytes=1)
    _fill(log, 5)
    log.close()
    index = sorted(log.directory.glob("*.index"))[-1]
    with open(index, "ab") as f:
        f.write(b"\x01\x02\x03")  # not a whole entry: fails the sanity check
    reopened = open_log(index_interval_bytes=1)
    assert reopened.log_end_offset == 5
    assert _all_offsets(reopened) == list(range(5))


def test_leftover_transient_files_are_removed(open_log: Callable[..., Log]) -> None:
    log = open_log()
    _fill(log, 3)
    log.close()
    for name in ("00000000000000000007.log.deleted", "00000000000000000000.log.cleaned",
                 "recovery-point-offset-checkpoint.tmp"):  # fmt: skip
        (log.directory / name).write_bytes(b"junk")
    reopened = open_log()
    names = {p.name for p in reopened.directory.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned", ".tmp")) for n in names)
    assert _all_offsets(reopened) == [0, 1, 2]
