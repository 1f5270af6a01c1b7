"""How late a process's event loop runs: a tick every ``period_s``, and how much later than that
each tick came (a *stall*: blocking work on the loop, or the GIL held by another thread).

Stalls of ``report_s`` or more are logged (``event loop stalled``, with ``stall_ms``; warning
from 1 s), counted and the longest kept, so an operator (and ``bench/partition_scale.py``) can
see what a burst of work cost the requests the loop serves meanwhile.

The etcd lease keep-alive (``strom_server.etcd.lease_keeper``) runs on a thread of its own and
reads ``tick_age_s`` from there: it renews a lease (a storage node's session, an election, a
registration) only while the loop keeps ticking, so a process whose loop is wedged still loses
its lease, as it would if the keep-alive ran on the loop, while a loop that is merely busy no
longer delays the keep-alive.

Thread-safety: ``run``/``tick`` on the event loop; ``tick_age_s`` from any thread (it reads one
float).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from strom_server.runtime.logs import get_logger

log = get_logger(__name__)

__all__ = ["LoopSlice", "LoopWatch"]

#: Stalls at least this long are logged as warnings rather than info.
WARN_STALL_S = 1.0


class LoopWatch:
    """Ticks on the event loop and measures how late each tick comes."""

    def __init__(
        self,
        *,
        period_s: float = 0.1,
        report_s: float = 0.25,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if period_s <= 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self.period_s = period_s
        self.report_s = report_s
        self._monotonic = monotonic
        self._last_tick = monotonic()
        #: the longest stall seen, in seconds
        self.max_stall_s = 0.0
        #: stalls of report_s or more
        self.stalls = 0

    def tick(self) -> float:
        """Record a tick now; returns the stall before it (seconds past the period)."""
        now = self._monotonic()
        stall = max(0.0, now - self._last_tick - self.period_s)
        self._last_tick = now
        self.max_stall_s = max(self.max_stall_s, stall)
        if stall >= self.report_s:
            self.stalls += 1
            emit = log.warning if stall >= WARN_STALL_S else log.info
            emit("event loop stalled", stall_ms=round(stall * 1000))
        return stall

    def tick_age_s(self) -> float:
        """Seconds since the last tick (any thread)."""
        return self._monotonic() - self._last_tick

    async def run(self) -> None:
        """Tick every ``period_s`` until cancelled."""
        self._last_tick = self._monotonic()
        while True:
            await asyncio.sleep(self.period_s)
            self.tick()


class LoopSlice:
    """Work over many partitions in slices: ``pause`` yields the event loop once the caller
    has held it for ``slice_s`` since the last yield (or since it was created).

    What bounds a stall of the loop (``LoopWatch``) to about one slice when the controller
    pushes thousands of partitions, or a follower fetches thousands at once."""

    __slots__ = ("_end", "_monotonic", "slice_s")

    def __init__(self, slice_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.slice_s = slice_s
        self._monotonic = monotonic
        self._end = monotonic() + slice_s

    def due(self) -> bool:
        """Whether the slice is used up."""
        return self._monotonic() >= self._end

    async def pause(self) -> None:
        """Yield the loop if the slice is used up, and start the next one."""
        if self.due():
            await asyncio.sleep(0)
            self._end = self._monotonic() + self.slice_s
