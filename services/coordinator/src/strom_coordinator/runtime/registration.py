"""This coordinator's registration in etcd and the view of ``P/coordinators/`` it follows.

Registration: ``P/coordinators/ids/<id>`` on this process's lease, kept by the shared lease
registration (``strom_server.etcd.lease_registration``: kept alive from a thread of its own
while the event loop ticks). A lost lease (etcd reported it expired, e.g. after the process was
paused, or no keep-alive was answered for its TTL while etcd was unreachable) stops serving
every partition of every internal topic at once; the process then registers again with a new
lease. Every lease grant and keep-alive etcd answers renews ``session``
(``strom_server.etcd.session_lease``): once the lease may have expired (last answered
keep-alive's send time + TTL) the hosted partitions answer NOT_COORDINATOR, while another
coordinator may already have taken them over.

One watch of ``P/coordinators/`` (registrations and every topic's ownership keys) and of each
internal topic's key feeds the live members here and hands every other key to the
``PartitionOwnership`` of its topic (``__consumer_offsets``, ``__transaction_state``), which
decides placement (see ``ownership``). Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from strom.errors import ConfigurationError
from strom_server.etcd.keys import ClusterKeys, decode_value, encode_value
from strom_server.etcd.lease_registration import LeaseRegistration
from strom_server.etcd.session_lease import SessionLease
from strom_server.etcd.store import (
    Compare,
    Delete,
    EtcdStore,
    KeyValue,
    Put,
    WatchCompactedError,
)
from strom_server.runtime.logs import get_logger

__all__ = ["CoordinatorRegistration", "Member", "OwnershipView"]

log = get_logger(__name__)


@dataclass(frozen=True)
class Member:
    """A live coordinator (its registration)."""

    id: int
    host: str
    port: int


class OwnershipView(Protocol):
    """What the registration tells one topic's ownership (``ownership.PartitionOwnership``)."""

    topic: str

    def absorb(self, kind: str, kv: KeyValue) -> bool:
        """Take an owner key or the topic key; False when the key is not this topic's."""
        ...

    def reset(self) -> None:
        """Forget every owner and the partition count (a fresh snapshot follows)."""
        ...

    def changed(self) -> None:
        """Members, owners or the partition count changed: reconsider placement."""
        ...

    def drop_all(self) -> None:
        """The lease is lost: stop serving every partition at once."""
        ...


class CoordinatorRegistration:
    """Registration, lease and the watch shared by every topic's ownership."""

    def __init__(
        self,
        store: EtcdStore,
        keys: ClusterKeys,
        *,
        coordinator_id: int,
        ttl_s: int,
        session: SessionLease | None = None,
    ) -> None:
        self.store = store
        self.keys = keys
        self.coordinator_id = coordinator_id
        self.ttl_s = ttl_s
        self._registration = LeaseRegistration(
            store, what="coordinator registration", ttl_s=ttl_s, session=session,
            write=self._write_registration, on_lost=self._lost, on_registered=self._changed,
        )  # fmt: skip
        self.members: dict[int, Member] = {}
        #: The etcd revision this view is at (claims use one above it as the owner epoch).
        self.revision = 0
        self._views: list[OwnershipView] = []
        self._address: tuple[str, int] = ("", 0)
        self._revs: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.on_change: Callable[[], None] = lambda: None

    @property
    def session(self) -> SessionLease:
        """Until when the lease is surely alive (renewed by every answered keep-alive)."""
        return self._registration.session

    @property
    def lease(self) -> int:
        """The lease the registration and every ownership key are on (0: none now)."""
        return self._registration.lease_id

    @lease.setter
    def lease(self, lease_id: int) -> None:
        """Keep ``lease_id`` alive instead (a lease etcd does not know is soon found lost)."""
        self._registration.held.hold(lease_id)

    def attach(self, view: OwnershipView) -> None:
        """Follow ``view``'s topic too (before ``start``)."""
        self._views.append(view)

    @property
    def views(self) -> Sequence[OwnershipView]:
        return tuple(self._views)

    @property
    def registered(self) -> bool:
        return self.lease != 0

    async def start(self, host: str, port: int) -> None:
        """Register as ``host:port``, read the current owners, and start following etcd."""
        self._address = (host, port)
        await self._registration.start()
        revision = await self._load_snapshot()
        self._tasks = [asyncio.create_task(self._watch(revision + 1), name="coordinator-watch")]

    async def stop_following(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await self._registration.stop()

    async def revoke(self) -> None:
        """Revoke the lease: every ownership key goes at once."""
        await self._registration.close()

    # --- registration and lease ----------------------------------------------------------

    async def _write_registration(self, lease: int) -> None:
        """Create the registration on ``lease``, replacing a previous incarnation's."""
        key = self.keys.coordinator(self.coordinator_id)
        host, port = self._address
        value = encode_value({"id": self.coordinator_id, "host": host, "port": port})
        put = Put(key, value, lease)
        while not (await self.store.txn([Compare.absent(key)], [put])).succeeded:
            existing = await self.store.get(key)
            if existing is None:
                continue
            current = decode_value(existing.value)
            if (current.get("host"), current.get("port")) != (host, port):
                raise ConfigurationError(
                    f"coordinator id {self.coordinator_id} is already registered by "
                    f"{current.get('host')}:{current.get('port')}; every coordinator needs its "
                    "own --coordinator-id"
                )
            # Our own previous incarnation (killed before its lease expired): revoking its
            # lease drops its registration and its ownership keys at once.
            log.info("replacing the registration of a previous incarnation", key=key)
            if existing.lease:
                await self.store.revoke_lease(existing.lease)
            else:
                await self.store.txn([Compare.value_equals(key, existing.value)], [Delete(key)])
        log.info("registered", coordinator_id=self.coordinator_id, host=host, port=port)

    def _lost(self) -> None:
        """The lease is lost: no longer serving any partition (until registered again)."""
        log.warning("no longer serving any partition", coordinator_id=self.coordinator_id)
        for view in self._views:
            view.drop_all()

    # --- following etcd ------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """``P/coordinators/``: registrations and ownership keys."""
        return self.keys.coordinators.removesuffix("ids/")

    async def _load_snapshot(self) -> int:
        kvs, revision = await self.store.get_prefix(self.prefix)
        topic_kvs = [await self.store.get(self.keys.topic(v.topic)) for v in self._views]
        self.members.clear()
        self._revs.clear()
        for view in self._views:
            view.reset()
        for kv in kvs:
            self._absorb("put", kv)
        for topic_kv in topic_kvs:
            if topic_kv is not None:
                self._absorb("put", topic_kv)
        self.revision = revision
        self._changed()
        return revision

    async def _watch(self, revision: int) -> None:
        while True:
            try:
                async with asyncio.TaskGroup() as watches:
                    watches.create_task(self._follow(self.prefix, revision))
                    for topic in {v.topic for v in self._views}:
                        watches.create_task(self._follow(self.keys.topic(topic), revision))
            except* WatchCompactedError:
                log.warning("coordinator watch fell behind compaction; reloading")
            revision = await self._load_snapshot() + 1

    async def _follow(self, prefix: str, revision: int) -> None:
        async for batch in self.store.watch_prefix(prefix, revision):
            for event in batch.events:
                self._absorb(event.kind, event.kv)
            self.revision = max(self.revision, batch.revision)
            self._changed()

    def absorb(self, kind: str, kv: KeyValue) -> None:
        """Apply one key as if the watch had delivered it (after our own etcd writes)."""
        self._absorb(kind, kv)

    def _absorb(self, kind: str, kv: KeyValue) -> None:
        if kv.mod_revision and kv.mod_revision <= self._revs.get(kv.key, 0):
            return
        self._revs[kv.key] = kv.mod_revision
        try:
            if (member := self.keys.parse_coordinator_key(kv.key)) is not None:
                if kind == "delete":
                    self.members.pop(member, None)
                else:
                    v = decode_value(kv.value)
                    self.members[member] = Member(member, str(v["host"]), int(v["port"]))
                return
            for view in self._views:
                if view.absorb(kind, kv):
                    return
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring a malformed coordinator key", key=kv.key, error=str(exc))

    def _changed(self) -> None:
        for view in self._views:
            view.changed()
        try:
            self.on_change()
        except Exception:
            log.exception("registration listener failed")
