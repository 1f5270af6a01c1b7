"""A process's registration in etcd: keys written on a lease of its own, kept alive, and written
again on a new lease whenever that one is lost.

Register: grant a lease of ``ttl_s`` and ``write`` the registration on it (a service's own
write: a plain put, or create-if-absent replacing a previous incarnation); a failed write
revokes the lease. Keep it: the lease is held by ``held_lease`` (kept alive from a thread of
its own while the event loop ticks). Lost (etcd reported it expired, or no keep-alive was
answered for a whole TTL): ``on_lost`` (stop serving what the lease stood for), register again
until it works (backing off, up to ``backoff_max_s``), then ``on_registered``. Closing revokes
the lease so the keys go at once.

Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from strom.cluster.retry import Backoff
from strom_server.etcd.held_lease import HeldLease
from strom_server.etcd.session_lease import SessionLease
from strom_server.etcd.store import EtcdStore, EtcdUnavailableError
from strom_server.runtime.clock import Clock, SystemClock
from strom_server.runtime.logs import get_logger

__all__ = ["LeaseRegistration"]

log = get_logger(__name__)


def _nothing() -> None:
    return None


class LeaseRegistration:
    """One registration (``what``, for logs) kept on a lease of its own."""

    def __init__(
        self,
        store: EtcdStore,
        *,
        what: str,
        ttl_s: int,
        write: Callable[[int], Awaitable[object]],
        on_lost: Callable[[], None] = _nothing,
        on_registered: Callable[[], None] = _nothing,
        session: SessionLease | None = None,
        clock: Clock | None = None,
        backoff_max_s: float = 2.0,
    ) -> None:
        self.what = what
        self._write = write
        self._on_lost = on_lost
        self._on_registered = on_registered
        self._clock = clock or SystemClock()
        self._backoff_max_s = backoff_max_s
        self.held = HeldLease(
            store, ttl_s=ttl_s, session=session, name=f"{what.replace(' ', '-')}-keep-alive"
        )
        self._task: asyncio.Task[None] | None = None

    @property
    def lease_id(self) -> int:
        """The lease the registration is on (0: not registered now)."""
        return self.held.lease_id

    @property
    def session(self) -> SessionLease:
        """Until when the lease is surely alive (renewed by every answered keep-alive)."""
        return self.held.session

    async def register(self) -> None:
        """Grant a lease and write the registration on it once (raises what the write does)."""
        lease, granted_at = await self.held.grant()
        try:
            await self._write(lease)
        except BaseException:
            await self.held.revoke(lease)
            raise
        self.held.hold(lease, granted_at)

    async def start(self) -> None:
        """Register (raising if it fails), then keep it in the background."""
        await self.register()
        self._task = asyncio.create_task(self._keep(), name=f"{self.what} keep")

    async def run(self) -> None:
        """Register (trying until it works), then keep it; until cancelled."""
        await self._register_until_done()
        await self._keep()

    async def _keep(self) -> None:
        while True:
            reason = await self.held.until_lost()
            if not reason:
                continue
            log.warning("registration lease lost; registering again", what=self.what,
                        reason=reason)  # fmt: skip
            self.held.release()
            self._on_lost()
            await self._register_until_done()
            self._on_registered()

    async def _register_until_done(self) -> None:
        backoff = Backoff(0.1, self._backoff_max_s)
        while True:
            try:
                await self.register()
                return
            except EtcdUnavailableError as exc:
                log.warning("registration paused: etcd unreachable", what=self.what,
                            error=str(exc))  # fmt: skip
            except Exception as exc:
                # e.g. the write refused because the lease expired since its grant, or the
                # id taken by another process for a while: never stop for good
                log.warning("registration failed; registering again", what=self.what,
                            error=str(exc))  # fmt: skip
            await self._clock.sleep(backoff.next())

    async def stop(self) -> None:
        """Stop keeping the registration (the lease then expires unless revoked)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):
            await self.held.close()

    async def close(self) -> None:
        """Stop keeping the registration and revoke its lease: it goes at once."""
        await self.stop()
        lease = self.held.release()
        if lease:
            await self.held.revoke(lease)
