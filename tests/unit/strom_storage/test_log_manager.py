"""LogManager: partition directories, startup, deletion, the background loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

from storage_batches import simple_batch

from strom_server.runtime.clock import ManualClock
from strom_storage.log import LogConfig
from strom_storage.log.log_manager import LogManager

BATCH = len(simple_batch(1))


def test_create_spreads_over_dirs_and_reloads(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, clock=clock)
    manager.startup()
    logs = [manager.get_or_create_log("orders-events", p) for p in range(4)]
    assert {log.directory.parent for log in logs} == set(dirs)
    assert logs[0].directory.name == "orders-events-0"
    assert manager.get_or_create_log("orders-events", 0) is logs[0]
    logs[1].append_as_leader(simple_batch(3))
    manager.close()

    again = LogManager(dirs, clock=clock)
    assert sorted(again.startup()) == [("orders-events", p) for p in range(4)]
    log = again.get_log("orders-events", 1)
    assert log is not None and log.log_end_offset == 3 and log.had_clean_shutdown
    assert again.delete_log("orders-events", 1)
    assert not log.directory.exists()
    assert again.get_log("orders-events", 1) is None
    again.close()


def test_maintenance_applies_retention_and_flush(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=BATCH * 2, retention_ms=1000, file_delete_delay_ms=500)
    manager = LogManager([tmp_path], clock=clock, default_config=config,
                         retention_check_interval_ms=100)  # fmt: skip
    log = manager.get_or_create_log("t", 0)
    for _ in range(5):
        log.append_as_leader(simple_batch(1, ts=clock.time_ms()))
    log.update_high_watermark(5)
    clock.advance_ms(5000)
    manager.run_maintenance()
    assert log.log_start_offset == 4
    assert log.recovery_point >= 4  # rolled segments were fsynced
    assert list(tmp_path.glob("t-0/*.deleted"))  # file deletion is delayed
    clock.advance_ms(1000)
    manager.run_maintenance()
    assert not list(tmp_path.glob("t-0/*.deleted"))
    manager.close()


def test_background_task_runs_on_the_clock(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        config = LogConfig(flush_ms=1000)
        manager = LogManager([tmp_path], clock=clock, default_config=config,
                             check_interval_ms=500)  # fmt: skip
        log = manager.get_or_create_log("t", 0)
        log.append_as_leader(simple_batch(1))
        manager.start()
        await clock.wait_for_sleepers(1)
        assert log.recovery_point == 0
        clock.advance_ms(1500)
        for _ in range(50):
            await asyncio.sleep(0.01)
            if log.recovery_point == 1:
                break
        assert log.recovery_point == 1  # flush.ms elapsed: fsynced
        await manager.stop()
        manager.close()

    asyncio.run(scenario())


def test_maintenance_runs_the_cleaner_on_compacted_logs(tmp_path: Path, clock: ManualClock) -> None:
    from storage_batches import make_batch

    from strom_storage.log.cleaner.manager import LogCleaner

    cleaner = LogCleaner(dedupe_buffer_bytes=1 << 16)
    manager = LogManager([tmp_path], clock=clock, cleaner=cleaner)
    compacted = manager.get_or_create_log(
        "offsets", 0, LogConfig(segment_bytes=300, cleanup_policy=("compact",))
    )
    plain = manager.get_or_create_log("plain", 0, LogConfig(segment_bytes=300))
    for log in (compacted, plain):
        for i in range(20):
            log.append_as_leader(make_batch([(b"k", b"v%d" % i, clock.time_ms())]))
        log.update_high_watermark(log.log_end_offset)
    size_before = plain.size_in_bytes
    manager.run_maintenance()
    assert cleaner.totals.passes == 1
    assert compacted.size_in_bytes < size_before
    assert plain.size_in_bytes == size_before
    manager.close()


def test_new_logs_go_to_the_dir_holding_fewest_across_startup_and_deletion(
    tmp_path: Path, clock: ManualClock
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, clock=clock)
    manager.startup()
    for p in range(3):
        manager.get_or_create_log("t", p)  # a, b, a
    manager.close()

    again = LogManager(dirs, clock=clock)
    again.startup()  # counts what it found: a holds 2, b holds 1
    assert again.get_or_create_log("t", 3).directory.parent == dirs[1]
    assert again.delete_log("t", 0) and again.delete_log("t", 2)  # a holds 0 now
    placed = [again.get_or_create_log("u", p).directory.parent for p in range(3)]
    assert placed == [dirs[0], dirs[0], dirs[0]]  # 0-2, 1-2, then a tie goes to the first
    again.close()
