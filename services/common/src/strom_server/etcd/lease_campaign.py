"""The one leader among a service's instances, elected through an etcd lease, with fencing.

Campaign: grant a lease of ``ttl_s``; in one transaction, if ``key`` is absent (and whatever
else the ballot compares holds), put ``key`` on the lease holding this candidate's bytes (and
the ballot's other puts). The winner leads; the others wait (``_wait``) and campaign again.

Leading: the lease is kept alive from a thread of its own while the event loop ticks
(``held_lease``), so a busy loop does not lose it but a wedged one does. The leader steps down
at once (stops acting as leader, revokes its lease so the key goes if still there, and
campaigns again) when etcd reports the lease expired, when no keep-alive was answered for a
whole TTL (etcd may have expired it meanwhile), or when the key no longer holds its bytes (its
owner's watch says so through ``key_changed`` or ``lost``).

Fencing: ``fence()`` is the compare every guarded write carries: ``value(key) == <the bytes
this candidate wrote>``. A leader paused past its lease (SIGSTOP, a long GC, a partition) that
resumes and writes fails it, because the key is gone or holds another candidate's bytes.

What differs between services is in a thin subclass: ``_ballot`` (what to write, and whether
to campaign at all), ``_elected``, ``_deposed``, ``_wait`` and ``_not_leading``.

Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from strom.cluster.retry import Backoff
from strom.errors import StromError
from strom_server.etcd.held_lease import HeldLease
from strom_server.etcd.store import Compare, EtcdStore, EtcdUnavailableError, Put
from strom_server.runtime.clock import Clock, SystemClock
from strom_server.runtime.logs import get_logger

__all__ = ["Ballot", "LeaseCampaign"]

log = get_logger(__name__)


@dataclass(frozen=True)
class Ballot:
    """What a candidate writes when it wins: ``raw`` under the campaign's key (on the lease),
    guarded by ``compares`` besides the key's absence, together with ``puts``."""

    raw: bytes
    compares: Sequence[Compare] = ()
    puts: Sequence[Put] = ()


class LeaseCampaign:
    """One candidate's campaign for ``key``; ``leading`` says whether it holds the key now."""

    #: What the leader is called in logs ("active controller", "registry writer").
    role = "leader"

    def __init__(
        self,
        store: EtcdStore,
        key: str,
        *,
        ttl_s: int,
        clock: Clock | None = None,
        backoff_max_s: float = 2.0,
        name: str = "election",
    ) -> None:
        self._store = store
        self.key = key
        self.ttl_s = ttl_s
        self._clock = clock or SystemClock()
        self._backoff_max_s = backoff_max_s
        self._held = HeldLease(store, ttl_s=ttl_s, name=f"{name}-keep-alive")
        self.leading = False
        #: The bytes this candidate wrote under ``key`` when it last won.
        self.raw: bytes | None = None
        #: The lease the key is on while leading (None otherwise).
        self.lease_id: int | None = None
        self.elected_revision = 0
        self.elections_won = 0
        self._key_changed = False

    # --- what a service specifies --------------------------------------------------------

    async def _ballot(self) -> Ballot | None:
        """What to write if this candidate wins; None: do not campaign now (not vacant)."""
        raise NotImplementedError

    async def _elected(self, ballot: Ballot, revision: int) -> None:
        """Won at ``revision``; an exception steps down again."""

    def _deposed(self, reason: str) -> None:
        """No longer leading (called once, as soon as it is known)."""

    async def _wait(self) -> None:
        """Lost the campaign: wait until it is worth campaigning again."""
        await self._clock.sleep(self.ttl_s)

    def _describe(self) -> dict[str, object]:
        """Who this candidate is, for logs."""
        return {}

    def _not_leading(self) -> Exception:
        """The error a guarded operation raises while not leading."""
        return StromError(f"not the {self.role}")

    # --- fencing -------------------------------------------------------------------------

    def fence(self) -> Compare:
        """The compare that guards a write; raises ``_not_leading()`` when not leading."""
        if not self.leading or self.raw is None:
            raise self._not_leading()
        return Compare.value_equals(self.key, self.raw)

    # --- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, lead, step down, campaign again... until cancelled."""
        backoff = Backoff(0.1, self._backoff_max_s)
        while True:
            try:
                if await self._campaign():
                    await self._lead()
                else:
                    await self._wait()
                backoff.reset()
            except asyncio.CancelledError:
                raise
            except EtcdUnavailableError as exc:
                delay = backoff.next()
                log.warning("election paused: etcd unreachable", role=self.role, error=str(exc),
                            retry_in_s=round(delay, 3), **self._describe())  # fmt: skip
                await self.step_down("etcd unreachable")
                await self._clock.sleep(delay)
            except Exception:
                log.exception("election loop failed; retrying", role=self.role, **self._describe())
                await self.step_down("election loop failed")
                await self._clock.sleep(backoff.next())

    async def _campaign(self) -> bool:
        """One try at the key: True when this candidate won it (and stays leading)."""
        ballot = await self._ballot()
        if ballot is None:
            return False
        lease, granted_at = await self._held.grant()
        compares = [Compare.absent(self.key), *ballot.compares]
        success = [Put(self.key, ballot.raw, lease=lease), *ballot.puts]
        try:
            result = await self._store.txn(compares, success, deadline_s=self.ttl_s / 2)
        except BaseException:
            await self._held.revoke(lease)
            raise
        if not result.succeeded:
            await self._held.revoke(lease)
            return False
        self.lease_id, self.raw = lease, ballot.raw
        self.elected_revision = result.revision
        self.leading = True
        self.elections_won += 1
        self._key_changed = False
        self._held.hold(lease, granted_at)
        try:
            await self._elected(ballot, result.revision)
        except Exception:
            log.exception("activation failed; stepping down", role=self.role)
            await self.step_down("activation failed")
            return False
        return self.leading

    async def _lead(self) -> None:
        """Until no longer leading: step down when the lease or the key is lost."""
        while self.leading:
            if self._key_changed:
                await self.step_down("the election key changed")
                return
            if reason := await self._held.until_lost():
                await self.step_down(f"the election lease was lost: {reason}")
                return
        await self.step_down("no longer leading")  # ``lost`` left the lease to revoke

    def key_changed(self) -> None:
        """The owner's watch saw ``key`` no longer hold this leader's bytes: step down soon."""
        if self.leading:
            self._key_changed = True
            self._held.wake()

    # --- stepping down -------------------------------------------------------------------

    def lost(self, reason: str) -> None:
        """Stop leading at once (the lease is revoked by ``step_down``, or by the loop)."""
        if not self.leading:
            return
        self.leading = False
        log.warning(f"no longer the {self.role}", reason=reason, **self._describe())
        self._held.release()
        self._deposed(reason)

    async def step_down(self, reason: str) -> None:
        """Stop leading at once; revoke the lease (best effort)."""
        self.lost(reason)
        lease, self.lease_id = self.lease_id, None
        if lease is not None:
            await self._held.revoke(lease)

    async def resign(self, reason: str = "shutting down") -> None:
        """Give up leadership for good (the key goes at once: fast failover)."""
        await self.step_down(reason)
        with contextlib.suppress(Exception):
            await self._held.close()
