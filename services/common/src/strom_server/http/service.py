"""``HttpService``: an HTTP service's life as the runner drives it, as ``GrpcServer`` is a gRPC
service's.

The runner makes one, installs the signal handlers, lets the service build its app (which may
wait for the cluster: ``stop_requested`` tells it to give up), then ``serve``\\ s it: start the
listener, run the ``on_started`` hooks with the bound port, wait for SIGTERM/SIGINT (or
``request_stop``), run the ``on_stopping`` hooks (the listener still answers), stop the
listener gracefully (a second signal cancels in-flight requests), and finally ``close`` runs
the ``on_shutdown`` hooks, last registered first, each bounded by the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from strom_server.http.server import HttpServer
from strom_server.http.tls import HttpTls
from strom_server.runtime.logs import get_logger
from strom_server.runtime.stopping import run_hooks, stop_signals

__all__ = ["HttpService", "StartedHook", "StopHook"]

log = get_logger(__name__)

StopHook = Callable[[], Awaitable[None]]
StartedHook = Callable[[int], Awaitable[None]]


class HttpService:
    """One HTTP service's listener, hooks and stop signal (module docstring)."""

    def __init__(
        self, name: str, listen: str, *, tls: HttpTls | None = None, grace_s: float = 5.0
    ) -> None:
        self.name = name
        self.tls = tls or HttpTls()
        self.grace_s = grace_s
        self.server = HttpServer(listen, tls=self.tls.server, grace_s=grace_s)
        self.stop_requested = asyncio.Event()
        self._signals = 0
        self._started: list[StartedHook] = []
        self._stopping: list[StopHook] = []
        self._shutdown: list[StopHook] = []

    @property
    def port(self) -> int:
        return self.server.port

    def on_started(self, hook: StartedHook) -> None:
        """Run with the bound port once the listener serves."""
        self._started.append(hook)

    def on_stopping(self, hook: StopHook) -> None:
        """Run when stopping begins, while the listener still answers."""
        self._stopping.append(hook)

    def on_shutdown(self, hook: StopHook) -> None:
        """Run after the listener stopped (last registered first)."""
        self._shutdown.append(hook)

    def request_stop(self) -> None:
        self.stop_requested.set()

    def signals(self) -> contextlib.AbstractContextManager[None]:
        """SIGTERM/SIGINT stop the service while inside."""
        return stop_signals(self._on_signal)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info("signal received, shutting down", signal=sig.name)
            self.request_stop()
        else:
            log.warning("second signal, cancelling in-flight requests", signal=sig.name)
            self.server.force()

    async def serve(self, app: Any) -> None:
        """Serve ``app`` until a stop is requested (module docstring)."""
        if self.stop_requested.is_set():
            return
        port = await self.server.start(app)
        log.info("listening", port=port, scheme=self.tls.scheme)
        try:
            for hook in self._started:
                await hook(port)
            await self.stop_requested.wait()
            log.info("stopping", grace_s=self.grace_s)
            await run_hooks(self._stopping, self.grace_s)
        finally:
            await self.server.stop()

    async def close(self) -> None:
        """Run the shutdown hooks, last registered first."""
        await run_hooks(reversed(self._shutdown), self.grace_s)
        log.info("stopped")
