"""Wake delayed fetches when a partition's readable data grows: no polling, no sleep loops.

A fetch that wants more bytes than are available registers a waiter on its partitions *before*
reading them (so an append between the read and the wait cannot be missed), then awaits the
waiter with its remaining max-wait. Appends call ``notify`` from any thread.

Thread-safety: ``watch``/``unwatch`` on the event loop; ``notify`` from any thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable, Iterable

__all__ = ["AppendNotifier", "Waiter"]


class Waiter:
    """One delayed fetch's interest in a set of partitions."""

    __slots__ = ("future", "keys")

    def __init__(self, keys: tuple[Hashable, ...], future: asyncio.Future[None]) -> None:
        self.keys = keys
        self.future = future


class AppendNotifier:
    """Registry of waiters per partition key, woken by ``notify``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._waiters: dict[Hashable, set[Waiter]] = {}

    def watch(self, keys: Iterable[Hashable]) -> Waiter:
        waiter = Waiter(tuple(keys), self._loop.create_future())
        for key in waiter.keys:
            self._waiters.setdefault(key, set()).add(waiter)
        return waiter

    def unwatch(self, waiter: Waiter) -> None:
        for key in waiter.keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[key]
        if not waiter.future.done():
            waiter.future.cancel()

    def notify(self, key: Hashable) -> None:
        """Wake every waiter on ``key`` (callable from any thread)."""
        if threading.get_ident() == self._loop_thread:
            self._wake(key)
        else:
            self._loop.call_soon_threadsafe(self._wake, key)

    def _wake(self, key: Hashable) -> None:
        for waiter in self._waiters.pop(key, ()):
            if not waiter.future.done():
                waiter.future.set_result(None)
