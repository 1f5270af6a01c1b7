"""LoopWatch (how late the event loop ticks) and LoopSlice (yield after a slice of work), on a
hand-driven clock; the hint a node logs when it runs out of file descriptors."""

from __future__ import annotations

import asyncio
import errno

import pytest

from strom.errors import StorageError
from strom_storage.node.hosted import open_files_hint
from strom_storage.node.loop_watch import LoopSlice, LoopWatch


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_late_tick_is_a_stall_and_the_longest_is_kept() -> None:
    clock = Clock()
    watch = LoopWatch(period_s=0.1, report_s=0.25, monotonic=clock)
    clock.now += 0.1
    assert watch.tick() == 0.0
    clock.now += 0.6  # 0.5 s later than the period
    assert watch.tick() == pytest.approx(0.5)
    clock.now += 0.2
    assert watch.tick() == pytest.approx(0.1)
    assert watch.max_stall_s == pytest.approx(0.5)
    assert watch.stalls == 1  # only the one of report_s or more


def test_tick_age_grows_until_the_next_tick() -> None:
    clock = Clock()
    watch = LoopWatch(period_s=0.1, monotonic=clock)
    clock.now += 2.0
    assert watch.tick_age_s() == pytest.approx(2.0)
    watch.tick()
    assert watch.tick_age_s() == 0.0


def test_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="period_s"):
        LoopWatch(period_s=0)


def test_a_slice_yields_only_once_used_up() -> None:
    clock = Clock()
    yields = 0

    async def other() -> None:
        nonlocal yields
        while True:
            yields += 1
            await asyncio.sleep(0)

    async def scenario() -> None:
        task = asyncio.ensure_future(other())
        await asyncio.sleep(0)  # let it start
        loop_slice = LoopSlice(0.02, monotonic=clock)
        before = yields
        for _ in range(5):
            await loop_slice.pause()  # within the slice: the other task never runs
        assert yields == before and not loop_slice.due()
        clock.now += 0.03
        assert loop_slice.due()
        await loop_slice.pause()
        assert yields == before + 1 and not loop_slice.due()  # a new slice started
        task.cancel()

    asyncio.run(scenario())


def test_running_out_of_file_descriptors_gets_a_hint_even_when_wrapped() -> None:
    emfile = OSError(errno.EMFILE, "Too many open files")
    assert "open-files limit" in open_files_hint(emfile)
    try:
        try:
            raise emfile
        except OSError as exc:
            raise StorageError("cannot create the log") from exc
    except StorageError as wrapped:
        assert "ulimit -n" in open_files_hint(wrapped)
    assert open_files_hint(OSError(errno.ENOSPC, "No space left on device")) == ""
    assert open_files_hint(ValueError("bad")) == ""
