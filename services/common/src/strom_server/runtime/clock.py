"""An injectable clock, so that time-based policy is testable without sleeping.

Code that rolls segments, expires retention or times out sessions takes a ``Clock`` instead of
calling ``time`` and ``asyncio.sleep`` directly. Production passes ``SystemClock()``; unit
tests pass a ``ManualClock`` and move time explicitly::

    clock = ManualClock()
    task = asyncio.create_task(session_reaper(clock))
    await clock.wait_for_sleepers(1)     # the reaper is now asleep
    clock.advance(30)                    # its sleep(30) returns at the next loop turn

``ManualClock`` is for one event loop; it is not thread-safe.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Wall time for timestamps, monotonic time for durations, and sleeping."""

    def time_ms(self) -> int:
        """Milliseconds since the Unix epoch (record and segment timestamps)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (timeouts, elapsed time)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """The real clock: ``time.time``, ``time.monotonic`` and ``asyncio.sleep``."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to; ``sleep`` returns once time passes its deadline.

    ``advance`` wakes every sleeper whose deadline is reached, in deadline order; they resume
    at the event loop's next turn (await something, e.g. ``asyncio.sleep(0)``, to let them).
    """

    def __init__(self, start_ms: int = 1_700_000_000_000, start_monotonic: float = 0.0) -> None:
        self._wall_start_ms = start_ms
        self._mono_start_ns = round(start_monotonic * 1e9)
        self._elapsed_ns = 0
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._sleeper_waiters: list[tuple[int, asyncio.Future[None]]] = []

    def time_ms(self) -> int:
        return self._wall_start_ms + self._elapsed_ns // 1_000_000

    def monotonic(self) -> float:
        return (self._mono_start_ns + self._elapsed_ns) / 1e9

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        deadline = self._elapsed_ns + round(seconds * 1e9)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._order), future))
        self._notify_sleeper_waiters()
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (>= 0) and wake the sleepers now due."""
        if seconds < 0:
            raise ValueError("a clock cannot go back")
        self._elapsed_ns += round(seconds * 1e9)
        while self._sleepers and self._sleepers[0][0] <= self._elapsed_ns:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def advance_ms(self, milliseconds: int) -> None:
        """``advance`` in milliseconds."""
        self.advance(milliseconds / 1000)

    @property
    def sleepers(self) -> int:
        """How many ``sleep`` calls are waiting (cancelled ones excluded)."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    def next_deadline(self) -> float | None:
        """Seconds until the earliest pending sleeper is due, or None when nobody sleeps."""
        pending = [deadline for deadline, _, future in self._sleepers if not future.done()]
        return (min(pending) - self._elapsed_ns) / 1e9 if pending else None

    async def wait_for_sleepers(self, count: int = 1) -> None:
        """Return once at least ``count`` tasks are sleeping on this clock."""
        if self.sleepers >= count:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleeper_waiters.append((count, future))
        await future

    def _notify_sleeper_waiters(self) -> None:
        current = self.sleepers
        still_waiting = []
        for count, future in self._sleeper_waiters:
            if future.done():
                continue
            if current >= count:
                future.set_result(None)
            else:
                still_waiting.append((count, future))
        self._sleeper_waiters = still_waiting
