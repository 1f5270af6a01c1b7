"""Controller election: the shared lease campaign (``strom_server.etcd.lease_campaign``) on
``P/controller/leader``, with the controller's epoch and hooks.

Campaign: if ``P/controller/leader`` is absent, grant a lease of ``ttl_s``; in one
transaction, if the leader key is still absent and ``P/controller/epoch`` is unchanged since
read, put the leader key (on the lease) holding ``{"id", "host", "port", "epoch": N+1}`` and put
the epoch ``N+1``. The winner is active once ``on_elected`` has run; the others are standbys
and campaign again as soon as their metadata watch sees the leader key deleted (a lease expiry
or a resignation), with a re-check every TTL as a safety net.

Keeping it, stepping down and fencing are the campaign's: the lease is kept alive from a
thread while the event loop ticks; the controller steps down at once (``on_deposed``, then its
lease revoked) when the lease is lost or its metadata watch sees the leader key no longer hold
its bytes; every metadata write carries ``fence()``, ``value(P/controller/leader) == <the
bytes this controller wrote>``, which a paused-then-resumed controller fails.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from strom.errors import NotControllerError
from strom_controller.keys import ControllerRecord, KeyLayout, decode, encode
from strom_controller.metadata_cache import Change, MetadataCache
from strom_server.etcd.lease_campaign import Ballot, LeaseCampaign
from strom_server.etcd.store import Compare, EtcdStore, Put
from strom_server.runtime.clock import Clock
from strom_server.runtime.logs import get_logger

__all__ = ["ControllerElection"]

log = get_logger(__name__)


class ControllerElection(LeaseCampaign):
    """One controller's campaign; ``leading`` says whether it holds the election key now.

    Not thread-safe: one event loop.
    """

    role = "active controller"

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
        super().__init__(store, keys.controller_leader, ttl_s=ttl_s, clock=clock,
                         backoff_max_s=backoff_max_s, name="controller-election")  # fmt: skip
        self._keys = keys
        self._cache = cache
        self.controller_id = controller_id
        self.host = host
        self.port = port
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self.record: ControllerRecord | None = None
        self._vacancy = asyncio.Event()
        cache.add_listener(self._on_change)

    @property
    def record_raw(self) -> bytes | None:
        """The leader key's bytes this controller wrote when it last won."""
        return self.raw

    # --- fencing -------------------------------------------------------------------------

    def _not_leading(self) -> Exception:
        return NotControllerError(self.not_controller_message(self._cache.controller))

    def not_controller_message(self, active: ControllerRecord | None) -> str:
        """Why this controller refuses, naming ``active`` as the active one (None: none is):
        what the caller has just read from etcd (a refusal, a fenced write), else the metadata
        cache's (which a paused controller has not brought up to date yet)."""
        if active is None or (self.leading and active.id == self.controller_id):
            return (
                f"controller {self.controller_id} is not the active controller and no "
                "controller is active right now (an election is in progress); retry"
            )
        return (
            f"controller {self.controller_id} is not the active controller; "
            f"active controller is {active.describe()}"
        )

    # --- the campaign's specifics --------------------------------------------------------

    async def _ballot(self) -> Ballot | None:
        keys = self._keys
        if await self._store.get(keys.controller_leader) is not None:
            return None
        epoch_kv = await self._store.get(keys.controller_epoch)
        epoch = int(decode(epoch_kv.value)["epoch"]) if epoch_kv else 0
        record = ControllerRecord(self.controller_id, self.host, self.port, epoch + 1)
        return Ballot(
            record.to_json(),
            compares=[
                Compare.mod_equals(keys.controller_epoch, epoch_kv.mod_revision)
                if epoch_kv
                else Compare.absent(keys.controller_epoch)
            ],
            puts=[Put(keys.controller_epoch, encode({"epoch": epoch + 1}))],
        )

    async def _elected(self, ballot: Ballot, revision: int) -> None:
        self.record = ControllerRecord.from_json(ballot.raw)
        log.info(
            "elected active controller",
            controller_id=self.controller_id,
            epoch=self.record.epoch,
            lease=self.lease_id,
            revision=revision,
        )
        await self._on_elected(revision)

    def _deposed(self, reason: str) -> None:
        self._on_deposed(reason)

    def _describe(self) -> dict[str, object]:
        return {"controller_id": self.controller_id}

    async def _wait(self) -> None:
        """Until the metadata watch sees the leader key go (or one TTL)."""
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
            and self._cache.controller_raw != self.raw
        ):
            self.key_changed()
