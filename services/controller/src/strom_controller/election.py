"""Controller election through an etcd lease and a create-if-absent transaction, with fencing.

Campaign: grant a lease of ``ttl_s``; in one transaction, if ``P/controller/leader`` is absent
and ``P/controller/epoch`` is unchanged since read, put the leader key (on the lease) holding
``{"id", "host", "port", "epoch": N+1}`` and put the epoch ``N+1``. The winner is active; the
others are standbys and campaign again as soon as their metadata watch sees the leader key
deleted (a lease expiry or a resignation), with a re-check every TTL as a safety net.

Keeping it: the active controller refreshes its lease every TTL/3. If a refresh fails, the
lease has expired, or the leader key no longer holds the exact bytes it wrote, it steps down at
once (stops writing and serving as active), revokes its lease (so the key, if still there,
goes) and campaigns again.

Fencing: ``fence()`` is the compare every metadata write carries: ``value(P/controller/leader)
== <the bytes this controller wrote>``. A controller paused past its lease (SIGSTOP, a long GC,
a partition) that resumes and writes fails that compare, because the key is gone or holds
another controller's record with a higher epoch; it then steps down.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from strom.errors import NotControllerError
from strom_controller.keys import ControllerRecord, KeyLayout, decode, encode
from strom_controller.metadata_cache import Change, MetadataCache
from strom_server.etcd.store import Compare, EtcdStore, EtcdUnavailableError, Put
from strom_server.runtime.clock import Clock, SystemClock
from strom_server.runtime.logs import get_logger

__all__ = ["ControllerElection"]

log = get_logger(__name__)


class ControllerElection:
    """One controller's campaign; ``leading`` says whether it holds the election key now.

    Not thread-safe: one event loop.
    """

    def __init__(
        self,
        store: EtcdStore,
        keys: KeyLayout,
        cache: MetadataCache,
        *,
        controller_id: int,
        host: str,
        port: int,
        ttl_s: int,
        on_elected: Callable[[int], Awaitable[None]],
        on_deposed: Callable[[str], None],
        clock: Clock | None = None,
        backoff_max_s: float = 2.0,
    ) -> None:
        self._store = store
        self._keys = keys
        self._cache = cache
        self.controller_id = controller_id
        self.host = host
        self.port = port
        self.ttl_s = ttl_s
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self._clock = clock or SystemClock()
        self._backoff_max_s = backoff_max_s
        self.leading = False
        self.record: ControllerRecord | None = None
        self.record_raw: bytes | None = None
        self.lease_id: int | None = None
        self.elected_revision = 0
        self.elections_won = 0
        self._deposed = asyncio.Event()
        self._vacancy = asyncio.Event()
        cache.add_listener(self._on_change)

    # --- fencing -------------------------------------------------------------------------

    def fence(self) -> Compare:
        """The compare that guards a metadata write; NotControllerError when not leading."""
        if not self.leading or self.record_raw is None:
            raise NotControllerError(self.not_controller_message())
        return Compare.value_equals(self._keys.controller_leader, self.record_raw)

    def not_controller_message(self) -> str:
        active = self._cache.controller
        if active is None or (self.leading and active.id == self.controller_id):
            return (
                f"controller {self.controller_id} is not the active controller and no "
                "controller is active right now (an election is in progress); retry"
            )
        return (
            f"controller {self.controller_id} is not the active controller; "
            f"active controller is {active.describe()}"
        )

    # --- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, lead, step down, campaign again... until cancelled."""
        backoff = 0.1
        while True:
            try:
                if await self._campaign():
                    backoff = 0.1
                    await self._lead()
                else:
                    await self._wait_for_vacancy()
            except asyncio.CancelledError:
                raise
            except EtcdUnavailableError as exc:
                log.warning("election paused: etcd unreachable", error=str(exc),
                            retry_in_s=backoff)  # fmt: skip
                await self.step_down("etcd unreachable")
                await self._clock.sleep(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)
            except Exception:
                log.exception("election loop failed; retrying")
                await self.step_down("election loop failed")
                await self._clock.sleep(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)

    async def _campaign(self) -> bool:
        keys = self._keys
        if await self._store.get(keys.controller_leader) is not None:
            return False
        epoch_kv = await self._store.get(keys.controller_epoch)
        epoch = int(decode(epoch_kv.value)["epoch"]) if epoch_kv else 0
        record = ControllerRecord(self.controller_id, self.host, self.port, epoch + 1)
        raw = record.to_json()
        lease = await self._store.grant_lease(self.ttl_s)
        compares = [
            Compare.absent(keys.controller_leader),
            Compare.mod_equals(keys.controller_epoch, epoch_kv.mod_revision)
            if epoch_kv
            else Compare.absent(keys.controller_epoch),
        ]
        success = [
            Put(keys.controller_leader, raw, lease=lease),
            Put(keys.controller_epoch, encode({"epoch": epoch + 1})),
        ]
        try:
            result = await self._store.txn(compares, success, deadline_s=self.ttl_s / 2)
        except BaseException:
            await self._revoke(lease)
            raise
        if not result.succeeded:
            await self._revoke(lease)
            return False
        self.lease_id, self.record, self.record_raw = lease, record, raw
        self.elected_revision = result.revision
        self.leading = True
        self.elections_won += 1
        self._deposed.clear()
        log.info(
            "elected active controller",
            controller_id=self.controller_id,
            epoch=record.epoch,
            lease=lease,
            revision=result.revision,
        )
        try:
            await self._on_elected(result.revision)
        except Exception:
            log.exception("activation failed; stepping down")
            await self.step_down("activation failed")
            return False
        return True

    async def _lead(self) -> None:
        interval = self.ttl_s / 3
        while self.leading:
            deposed = asyncio.ensure_future(self._deposed.wait())
            try:
                await asyncio.wait({deposed}, timeout=interval)
            finally:
                deposed.cancel()
            if not self.leading:
                return
            if self._deposed.is_set():
                await self.step_down("the leader key changed")
                return
            assert self.lease_id is not None
            try:
                # A refresh answered within TTL/2 still lands before the lease runs out.
                ttl = await self._store.keep_alive_once(self.lease_id, timeout_s=self.ttl_s / 2)
            except EtcdUnavailableError as exc:
                await self.step_down(f"lease refresh failed: {exc}")
                return
            if ttl <= 0:
                await self.step_down("the election lease expired")
                return

    async def _wait_for_vacancy(self) -> None:
        self._vacancy.clear()
        if self._cache.controller is None:
            # The cache says vacant but the campaign lost: let the watch catch up a little.
            await self._clock.sleep(0.05)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.ttl_s):
                await self._vacancy.wait()

    def _on_change(self, changes: set[Change]) -> None:
        if "controller" not in changes:
            return
        if self._cache.controller is None:
            self._vacancy.set()
        if (
            self.leading
            and self._cache.revision >= self.elected_revision
            and self._cache.controller_raw != self.record_raw
        ):
            self._deposed.set()

    # --- stepping down -------------------------------------------------------------------

    async def step_down(self, reason: str) -> None:
        """Stop acting as the active controller at once; revoke the lease (best effort)."""
        if not self.leading:
            return
        self.leading = False
        log.warning("no longer the active controller", controller_id=self.controller_id,
                    reason=reason)  # fmt: skip
        self._on_deposed(reason)
        lease, self.lease_id = self.lease_id, None
        if lease is not None:
            await self._revoke(lease)

    async def resign(self) -> None:
        """Give up leadership for a clean shutdown (the key goes at once: fast failover)."""
        await self.step_down("shutting down")

    async def _revoke(self, lease: int) -> None:
        try:
            await self._store.revoke_lease(lease, retry=False, timeout_s=1.0)
        except Exception as exc:  # the lease expires by itself anyway
            log.info("could not revoke the election lease", lease=lease, error=str(exc))
