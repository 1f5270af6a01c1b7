"""Clock: the system clock, and ManualClock's explicit time with sleepers that wake on advance."""

from __future__ import annotations

import asyncio
import time

import pytest

from strom_server.runtime.clock import Clock, ManualClock, SystemClock

pytestmark = pytest.mark.timeout(10)


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(SystemClock(), Clock)
    assert isinstance(ManualClock(), Clock)


def test_system_clock_follows_real_time() -> None:
    clock = SystemClock()
    assert abs(clock.time_ms() - time.time() * 1000) < 1000
    before = clock.monotonic()
    asyncio.run(clock.sleep(0.01))
    assert clock.monotonic() - before >= 0.009


def test_manual_clock_moves_only_when_advanced() -> None:
    clock = ManualClock(start_ms=1_000, start_monotonic=5.0)
    assert (clock.time_ms(), clock.monotonic()) == (1_000, 5.0)
    clock.advance(1.5)
    assert (clock.time_ms(), clock.monotonic()) == (2_500, 6.5)
    clock.advance_ms(250)
    assert (clock.time_ms(), clock.monotonic()) == (2_750, 6.75)
    with pytest.raises(ValueError, match="back"):
        clock.advance(-1)


def test_sleepers_wake_when_their_deadline_is_reached_in_order() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        woke: list[str] = []

        async def sleeper(name: str, seconds: float) -> None:
            await clock.sleep(seconds)
            woke.append(name)

        tasks = [
            asyncio.create_task(sleeper("late", 10)),
            asyncio.create_task(sleeper("early", 2)),
            asyncio.create_task(sleeper("middle", 5)),
        ]
        await clock.wait_for_sleepers(3)
        assert clock.next_deadline() == 2
        clock.advance(1.999)
        await asyncio.sleep(0)
        assert woke == []
        clock.advance(0.001)
        await asyncio.sleep(0)
        assert woke == ["early"]
        clock.advance(100)  # one jump past both: they wake in deadline order
        await asyncio.gather(*tasks)
        assert woke == ["early", "middle", "late"]
        assert clock.sleepers == 0 and clock.next_deadline() is None

    asyncio.run(scenario())


def test_zero_sleep_yields_without_waiting_for_time() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        await asyncio.wait_for(clock.sleep(0), timeout=1)
        await asyncio.wait_for(clock.sleep(-3), timeout=1)
        assert clock.sleepers == 0

    asyncio.run(scenario())


def test_cancelled_sleepers_are_forgotten() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        task = asyncio.create_task(clock.sleep(1))
        await clock.wait_for_sleepers(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert clock.sleepers == 0
        clock.advance(2)  # waking a cancelled sleeper is harmless

    asyncio.run(scenario())


def test_time_policy_with_a_manual_clock() -> None:
    """The intended use: a loop that acts every interval, driven without real sleeping."""

    async def scenario() -> None:
        clock = ManualClock()
        ticks: list[int] = []

        async def every_minute() -> None:
            while True:
                await clock.sleep(60)
                ticks.append(clock.time_ms())

        task = asyncio.create_task(every_minute())
        for _ in range(3):
            await clock.wait_for_sleepers(1)
            clock.advance(60)
        await clock.wait_for_sleepers(1)
        task.cancel()
        start = ManualClock().time_ms()
        assert ticks == [start + 60_000, start + 120_000, start + 180_000]

    asyncio.run(scenario())
