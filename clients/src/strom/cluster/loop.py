"""The background event loop behind the synchronous facades (``Producer``, ``Consumer``, ...).

One daemon thread per process runs one asyncio loop; every sync client of the process submits
its coroutines there, so a program with a producer and a consumer has one extra thread, not
two. Callbacks the asyncio clients fire (delivery reports) therefore run on that thread.
Public (``strom.cluster``): the Spark connector runs its own ``BackgroundLoop`` per task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, ClassVar, TypeVar

from strom.errors import StromError, StromTimeoutError

__all__ = ["BackgroundLoop"]

T = TypeVar("T")


class BackgroundLoop:
    """One daemon thread running an asyncio event loop, shared by the sync facades of a process."""

    _shared: ClassVar[BackgroundLoop | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, name: str = "strom-loop") -> None:
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(started,), name=name, daemon=True)
        self._thread.start()
        started.wait()

    def _main(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(started.set)
        self._loop.run_forever()

    @classmethod
    def shared(cls) -> BackgroundLoop:
        """The process-wide loop, started on first use."""
        loop = cls._shared
        if loop is not None and loop._thread.is_alive():
            return loop
        with cls._shared_lock:
            if cls._shared is None or not cls._shared._thread.is_alive():
                cls._shared = cls()
            return cls._shared

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; returns a thread-safe future of its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it finishes (or ``timeout`` seconds pass).

        Raises the coroutine's own exception; a timeout cancels it and raises
        ``StromTimeoutError``. Calling this from the loop thread itself (e.g. a sync method
        inside a delivery callback) would deadlock, so it raises ``StromError`` instead.
        """
        if self.in_loop_thread():
            coro.close()
            raise StromError(
                "a blocking strom call was made on the client's event-loop thread (from a "
                "callback?); use the strom.aio API there, or hand the work to another thread"
            )
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except StromTimeoutError:
            raise
        except TimeoutError:
            future.cancel()
            raise StromTimeoutError(f"operation did not complete within {timeout} s") from None

    def stop(self) -> None:
        """Stop the loop and join its thread (tests and private loops; the shared one lives on)."""
        if not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        if not self.in_loop_thread():
            self._thread.join()
            self._loop.close()
