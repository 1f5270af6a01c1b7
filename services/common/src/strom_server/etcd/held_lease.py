"""One etcd lease at a time held by this process: granted on the event loop, kept alive from a
thread of its own (``lease_keeper``) while the loop ticks (``runtime.loop_watch``), and watched
from the loop for its loss.

The lease is lost when etcd answers a keep-alive with TTL 0 (it expired), or when no keep-alive
has been answered for a whole TTL (``session``, a ``session_lease.SessionLease``): past that
point etcd may have expired it (it was unreachable, or the loop was wedged so the thread held
back). ``until_lost`` waits for either and says which. The lease campaign (``lease_campaign``)
and the lease registration (``lease_registration``) hold their leases through it.

Not thread-safe: one event loop (the keep-alive thread calls back through
``call_soon_threadsafe``).
"""

from __future__ import annotations

import asyncio
import contextlib

from strom_server.etcd.lease_keeper import LeaseKeeper
from strom_server.etcd.session_lease import SessionLease
from strom_server.etcd.store import EtcdStore
from strom_server.runtime.logs import get_logger
from strom_server.runtime.loop_watch import LoopWatch

__all__ = ["HeldLease"]

log = get_logger(__name__)


class HeldLease:
    """Grant, keep alive, watch and revoke the lease of one campaign or registration."""

    def __init__(
        self,
        store: EtcdStore,
        *,
        ttl_s: int,
        name: str,
        session: SessionLease | None = None,
    ) -> None:
        self._store = store
        self.ttl_s = ttl_s
        #: Until when the held lease is surely alive (renewed by every answered keep-alive).
        self.session = session if session is not None else SessionLease()
        #: One keep-alive every third of the TTL (and its answer awaited as long at most).
        self.interval_s = max(0.2, ttl_s / 3)
        #: The lease kept alive now (0: none).
        self.lease_id = 0
        self._expired_id = 0
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_watch = LoopWatch(report_s=float("inf"))  # ticks only: stalls go unreported
        self._ticks: asyncio.Task[None] | None = None
        self._keeper = LeaseKeeper(
            store.endpoints,
            lease=self.session,
            interval_s=self.interval_s,
            # a tick within one keep-alive interval: a wedged loop loses the lease as it would
            # if the keep-alive ran on it
            may_renew=lambda: self._loop_watch.tick_age_s() < self.interval_s,
            on_expired=self._expired_from_thread,
            tls=store.tls,
            name=name,
        )

    async def grant(self) -> tuple[int, float]:
        """A new lease of ``ttl_s`` (not held yet) and when it was asked for."""
        sent_at = self.session.now()
        return await self._store.grant_lease(self.ttl_s), sent_at

    def hold(self, lease_id: int, granted_at: float | None = None) -> None:
        """Keep ``lease_id`` alive from now on; ``granted_at``: it was granted (with a full
        TTL) then, which renews the session."""
        if granted_at is not None:
            self.session.renewed(granted_at, self.ttl_s)
        self.lease_id = lease_id
        self._wake.clear()
        if self._ticks is None:
            self._loop = asyncio.get_running_loop()
            self._ticks = asyncio.create_task(self._loop_watch.run(), name="lease-loop-watch")
            self._keeper.start()
        self._keeper.keep(lease_id)

    def release(self) -> int:
        """Stop keeping the lease alive; returns it (0: none) for the caller to revoke or drop."""
        lease, self.lease_id = self.lease_id, 0
        self._keeper.keep(0)
        self._wake.set()
        return lease

    def loss(self) -> str:
        """Why the held lease is lost ("": it is not)."""
        if self.lease_id == 0:
            return "no lease is held"
        if self._expired_id == self.lease_id:
            return "etcd reported the lease expired"
        if self.session.expired():
            return f"no keep-alive answered within the lease's TTL ({self.ttl_s} s)"
        return ""

    def wake(self) -> None:
        """Make ``until_lost`` return now (its owner has something else to look at)."""
        self._wake.set()

    async def until_lost(self) -> str:
        """Wait until the held lease is lost (the reason) or ``wake`` is called ("")."""
        while not (reason := self.loss()):
            if self._wake.is_set():
                self._wake.clear()
                return ""
            # wake up when the session runs out, if nothing else comes first
            timeout = min(self.interval_s, max(0.0, self.session.remaining_s()))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
        return reason

    async def revoke(self, lease_id: int) -> None:
        """Revoke ``lease_id`` (best effort: it expires by itself anyway)."""
        try:
            await self._store.revoke_lease(lease_id, retry=False, timeout_s=1.0)
        except Exception as exc:
            log.info("could not revoke a lease", lease=lease_id, error=str(exc))

    async def close(self) -> None:
        """Stop keeping any lease alive, for good (``lease_id`` stays, for the caller to
        revoke)."""
        self._keeper.keep(0)
        if self._ticks is not None:
            self._ticks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticks
            await asyncio.to_thread(self._keeper.stop)

    def _expired_from_thread(self, lease_id: int) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to tell
                self._loop.call_soon_threadsafe(self._expired, lease_id)

    def _expired(self, lease_id: int) -> None:
        self._expired_id = lease_id
        self._wake.set()
