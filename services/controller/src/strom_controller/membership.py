"""This controller's registration: ``P/controller/members/<id>`` on its own lease, kept alive.

The election key names only the active controller; the registration lists every running one,
standbys included, so that the gateway can report them all (``MetadataResponse.controllers``).
It is informational: nothing is fenced or decided on it. A lost lease (etcd unreachable past
the TTL) or any other failure is followed by a fresh lease and registration; closing revokes
the lease so the key goes at once.

Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib

from strom_controller.keys import encode
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore, EtcdUnavailableError
from strom_server.runtime.clock import Clock
from strom_server.runtime.logs import get_logger

__all__ = ["ControllerMembership"]

log = get_logger(__name__)


class ControllerMembership:
    def __init__(
        self,
        store: EtcdStore,
        keys: ClusterKeys,
        *,
        controller_id: int,
        host: str,
        port: int,
        ttl_s: int,
        clock: Clock,
    ) -> None:
        self._store = store
        self._key = keys.controller_member(controller_id)
        self._value = encode({"id": controller_id, "host": host, "port": port})
        self._ttl_s = ttl_s
        self._clock = clock
        self.lease_id: int | None = None

    async def run(self) -> None:
        """Register, keep the lease alive, register again after losing it; until cancelled."""
        backoff = 0.1
        while True:
            try:
                lease = await self._store.grant_lease(self._ttl_s)
                self.lease_id = lease
                await self._store.put(self._key, self._value, lease=lease)
                backoff = 0.1
                while await self._store.keep_alive_once(lease, timeout_s=self._ttl_s / 2) > 0:
                    await self._clock.sleep(self._ttl_s / 3)
                log.warning("controller registration lease expired; registering again")
            except EtcdUnavailableError as exc:
                log.warning("controller registration paused: etcd unreachable", error=str(exc))
                await self._clock.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            except Exception:
                # e.g. the put refused because the lease expired since its grant: as the
                # election does, log and register again, rather than end the task unseen
                # (close() suppresses its exception) and drop out of the listing for good.
                log.exception("controller registration failed; registering again")
                await self._clock.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def close(self) -> None:
        """Give the lease up (the registration goes with it)."""
        if self.lease_id is not None:
            # Best effort: an unrevoked lease expires after its TTL anyway.
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self._store.revoke_lease(self.lease_id)
            self.lease_id = None
