"""This coordinator's registration in etcd and the view of ``P/coordinators/`` it follows.

Registration: ``P/coordinators/ids/<id>`` on this process's lease, kept alive. A lost lease (it
expired, e.g. after the process was paused, or etcd was unreachable for longer than its TTL)
stops serving every partition of every internal topic at once; the process then registers
again with a new lease. Every lease grant and keep-alive etcd answers renews ``session``
(``strom_server.etcd.session_lease``): once the lease may have expired (last answered
keep-alive's send time + TTL) the hosted partitions answer NOT_COORDINATOR, before the keep-alive
loop notices the loss and while another coordinator may already have taken them over.

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
from strom_server.etcd.session_lease import SessionLease
from strom_server.etcd.store import (
    Compare,
    Delete,
    EtcdStore,
    EtcdUnavailableError,
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
        #: Until when the lease is surely alive (renewed by every answered keep-alive).
        self.session = session if session is not None else SessionLease()
        self.keys = keys
        self.coordinator_id = coordinator_id
        self.ttl_s = ttl_s
        self.members: dict[int, Member] = {}
        #: The etcd revision this view is at (claims use one above it as the owner epoch).
        self.revision = 0
        self.lease = 0
        self._views: list[OwnershipView] = []
        self._address: tuple[str, int] = ("", 0)
        self._revs: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.on_change: Callable[[], None] = lambda: None

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
        await self._register()
        revision = await self._load_snapshot()
        self._tasks = [
            asyncio.create_task(self._keep_alive(), name="coordinator-keep-alive"),
            asyncio.create_task(self._watch(revision + 1), name="coordinator-watch"),
        ]

    async def stop_following(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    async def revoke(self) -> None:
        """Revoke the lease: every ownership key goes at once."""
        if self.lease:
            with contextlib.suppress(Exception):
                await self.store.revoke_lease(self.lease, retry=False)
            self.lease = 0

    # --- registration and lease ----------------------------------------------------------

    async def _register(self) -> None:
        key = self.keys.coordinator(self.coordinator_id)
        host, port = self._address
        value = encode_value({"id": self.coordinator_id, "host": host, "port": port})
        sent_at = self.session.now()
        lease = await self.store.grant_lease(self.ttl_s)
        put = Put(key, value, lease)
        while not (await self.store.txn([Compare.absent(key)], [put])).succeeded:
            existing = await self.store.get(key)
            if existing is None:
                continue
            current = decode_value(existing.value)
            if (current.get("host"), current.get("port")) != (host, port):
                await self.store.revoke_lease(lease)
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
        self.lease = lease
        self.session.renewed(sent_at, self.ttl_s)
        log.info("registered", coordinator_id=self.coordinator_id, host=host, port=port)

    async def _keep_alive(self) -> None:
        interval = max(0.2, self.ttl_s / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                sent_at = self.session.now()
                ttl = await self.store.keep_alive_once(self.lease, timeout_s=interval)
            except EtcdUnavailableError as exc:
                if not self.session.expired():
                    log.warning("etcd keep-alive failed; retrying", error=str(exc))
                    continue
                ttl = 0
            if ttl > 0:
                self.session.renewed(sent_at, ttl)
                continue
            log.warning("registration lease lost: no longer serving any partition; "
                        "registering again", coordinator_id=self.coordinator_id)  # fmt: skip
            for view in self._views:
                view.drop_all()
            self.lease = 0
            while True:
                try:
                    await self._register()
                    break
                except Exception as exc:  # etcd trouble, or our id taken meanwhile
                    log.warning("registration failed; retrying", error=str(exc))
                    await asyncio.sleep(interval)
            self._changed()

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
