"""Cluster answers shared by every page for a moment: stale-while-revalidate, single flight.

A page asks ``Cached.get()``: within ``fresh_s`` of the last answer it gets that answer; later
it still gets it at once while one refresh runs in the background; only with no answer, or
one older than ``max_age_s``, does it wait (with every other caller) for the single call in
flight. Whatever the number of open tabs, the cluster sees at most one such call at a time,
and a page's latency does not include a full Metadata of thousands of partitions. A change
made through the console ``invalidate()``s what it changed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from strom.errors import StromError
from strom_server.runtime.logs import get_logger

__all__ = ["Cached"]

T = TypeVar("T")
log = get_logger(__name__)


class Cached(Generic[T]):
    def __init__(
        self,
        fetch: Callable[[], Awaitable[T]],
        *,
        fresh_s: float,
        max_age_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self.fresh_s = fresh_s
        self.max_age_s = max_age_s
        self._clock = clock
        self._value: T | None = None
        self._taken = 0.0
        self._flight: asyncio.Task[T] | None = None

    @property
    def age_s(self) -> float | None:
        return None if self._value is None else self._clock() - self._taken

    def put(self, value: T) -> None:
        """An answer obtained elsewhere (the sampler's)."""
        self._value, self._taken = value, self._clock()

    def invalidate(self) -> None:
        self._value = None

    async def get(self) -> T:
        age = self.age_s
        if self._value is not None and age is not None and age <= self.max_age_s:
            if age > self.fresh_s and self._flight is None:
                self._start().add_done_callback(_log_failure)
            return self._value
        return await asyncio.shield(self._flight or self._start())

    def _start(self) -> asyncio.Task[T]:
        async def refresh() -> T:
            try:
                value = await self._fetch()
                self.put(value)
                return value
            finally:
                self._flight = None

        self._flight = asyncio.get_running_loop().create_task(refresh())
        return self._flight


def _log_failure(task: asyncio.Task[object]) -> None:
    if not task.cancelled() and isinstance(task.exception(), StromError | OSError):
        log.warning("background refresh failed", error=str(task.exception()))
