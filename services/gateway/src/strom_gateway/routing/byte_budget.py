"""A semaphore counted in bytes: the gateway's bound on request and response data in flight.

Forwarding a request first acquires its size; when the budget is spent the call waits (and a
stream stops reading) until earlier requests finish: backpressure rather than unbounded
buffering. Waiters are served in arrival order, so a large request is not starved by small
ones. Only a single request larger than the whole budget is refused (``TooLargeError``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["ByteBudget", "TooLargeError"]


class TooLargeError(Exception):
    """One request needs more bytes than the whole budget."""


class ByteBudget:
    """``acquire(n)`` / ``release(n)``, fair (FIFO); one event loop."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0, got {capacity}")
        self.capacity = capacity
        self.available = capacity
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def in_use(self) -> int:
        return self.capacity - self.available

    async def acquire(self, size: int) -> None:
        """Take ``size`` bytes, waiting while they are not available."""
        if size > self.capacity:
            raise TooLargeError(
                f"{size} bytes in one request exceed the gateway's in-flight budget of "
                f"{self.capacity} bytes (--max-inflight-bytes)"
            )
        if not self._waiters and size <= self.available:
            self.available -= size
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, future)
        self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(size)  # granted just as we were cancelled: give it back
            elif entry in self._waiters:
                self._waiters.remove(entry)
                self._wake()
            raise

    def release(self, size: int) -> None:
        self.available += size
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.available:
            size, future = self._waiters.popleft()
            if not future.done():
                self.available -= size
                future.set_result(None)

    @asynccontextmanager
    async def hold(self, size: int) -> AsyncIterator[None]:
        """``acquire(size)`` for the duration of the block."""
        await self.acquire(size)
        try:
            yield
        finally:
            self.release(size)
