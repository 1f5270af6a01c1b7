"""What stopping a service shares, gRPC or HTTP (``strom_server.rpc.server.GrpcServer``,
``strom_server.http.service.HttpService``): the signals that stop it, and its hooks run one
after the other, each bounded by the grace period."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterable, Iterator

from strom_server.runtime.logs import get_logger

__all__ = ["STOP_SIGNALS", "run_hooks", "stop_signals"]

log = get_logger(__name__)

#: The signals that stop a service (a second one cancels what is in flight).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def stop_signals(on_signal: Callable[[signal.Signals], None]) -> Iterator[None]:
    """``on_signal(sig)`` on the running loop for each stop signal while inside."""
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


async def run_hooks(hooks: Iterable[Callable[[], Awaitable[None]]], grace_s: float) -> None:
    """Each hook in turn, each given ``grace_s`` (at least 1 s); a failure or a timeout is
    logged, never raised, and the next hook still runs."""
    for hook in list(hooks):
        name = getattr(hook, "__qualname__", repr(hook))
        try:
            async with asyncio.timeout(max(grace_s, 1.0)):
                await hook()
        except TimeoutError:
            log.error("shutdown hook timed out", hook=name)
        except Exception:
            log.exception("shutdown hook failed", hook=name)
