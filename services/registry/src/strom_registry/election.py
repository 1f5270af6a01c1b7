"""The one writer among registry instances, elected through an etcd lease, and its ids.

Campaign: the shared lease campaign (``strom_server.etcd.lease_campaign``) on
``P/registry/leader``, holding ``{"id", "url"}``: an instance campaigns when the key is absent,
keeps its lease alive from a thread while its event loop ticks, and steps down when the lease
is lost or the key no longer holds its bytes. Every instance follows the key (a watch) to know
where to forward writes, and campaigns as soon as it goes.

Ids: ``next_id`` bumps ``P/registry/next_id`` in a transaction that also requires the leader
key to hold this writer's bytes, so a deposed writer cannot give an id, and an id once given
is never given again (even when its schema is permanently deleted).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass

from strom_registry import errors
from strom_server.etcd.keys import ClusterKeys, decode_value, encode_value
from strom_server.etcd.lease_campaign import Ballot, LeaseCampaign
from strom_server.etcd.prefix_follower import PrefixFollower
from strom_server.etcd.store import Compare, EtcdStore, KeyValue, Put, WatchBatch
from strom_server.runtime.logs import get_logger

__all__ = ["LeaderInfo", "WriterElection"]

log = get_logger(__name__)


@dataclass(frozen=True)
class LeaderInfo:
    instance_id: str
    url: str


class WriterElection(LeaseCampaign):
    """One instance's campaign; ``leading`` says whether it is the writer now."""

    role = "registry writer"

    def __init__(self, store: EtcdStore, keys: ClusterKeys, *, instance_id: str, url: str,
                 ttl_s: int, eligible: bool = True) -> None:  # fmt: skip
        super().__init__(store, keys.registry_leader, ttl_s=ttl_s, name="registry-election")
        self._keys = keys
        self.instance_id = instance_id
        self.url = url
        self.eligible = eligible
        self.leader: LeaderInfo | None = None
        self._changed = asyncio.Event()
        self._follower = PrefixFollower(
            store, keys.registry_leader, on_snapshot=self._on_snapshot, on_batch=self._on_batch
        )
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def term(self) -> int:
        """Elections this instance has won (a new term must catch up with the log first)."""
        return self.elections_won

    # --- following the key ---------------------------------------------------------------

    def _set_leader(self, kv: KeyValue | None) -> None:
        if kv is None:
            self.leader = None
        else:
            value = decode_value(kv.value)
            self.leader = LeaderInfo(str(value["id"]), str(value["url"]))
        if self.leading and (kv is None or kv.value != self.raw):
            self.lost("the writer key changed")
        self._changed.set()

    def _on_snapshot(self, kvs: list[KeyValue], _revision: int) -> None:
        self._set_leader(next((kv for kv in kvs if kv.key == self._keys.registry_leader), None))

    def _on_batch(self, batch: WatchBatch) -> None:
        for event in batch.events:
            if event.kv.key == self._keys.registry_leader:
                self._set_leader(None if event.kind == "delete" else event.kv)

    # --- the campaign's specifics --------------------------------------------------------

    async def start(self) -> None:
        await self._follower.start()
        if self.eligible:
            self._tasks.append(asyncio.create_task(self.run(), name="registry-election"))

    async def _ballot(self) -> Ballot | None:
        if self.leader is not None:
            return None
        return Ballot(encode_value({"id": self.instance_id, "url": self.url}))

    async def _elected(self, ballot: Ballot, revision: int) -> None:
        self.leader = LeaderInfo(self.instance_id, self.url)
        log.info("elected registry writer", instance_id=self.instance_id, url=self.url)

    async def _wait(self) -> None:
        """Until the followed key changes (or one TTL)."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.ttl_s):
                await self._changed.wait()

    def _describe(self) -> dict[str, object]:
        return {"instance_id": self.instance_id}

    def _not_leading(self) -> Exception:
        return errors.unknown_leader("this registry instance is not the writer")

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.resign()
        await self._follower.close()

    # --- the writer's guarded operations -------------------------------------------------

    async def check_leading(self) -> None:
        """Raise unless etcd still names this instance the writer."""
        result = await self._store.txn([self.fence()], [])
        if not result.succeeded:
            self.lost("its guarded check was fenced")
            raise errors.unknown_leader("this registry instance is no longer the writer")

    async def next_id(self, at_least: int) -> int:
        """A schema id never given before, at least ``at_least``."""
        key = self._keys.registry_next_id
        while True:
            kv = await self._store.get(key)
            current = int(json.loads(kv.value)["next"]) if kv else 1
            given = max(current, at_least)
            guard = [self.fence(), Compare.mod_equals(key, kv.mod_revision) if kv
                     else Compare.absent(key)]  # fmt: skip
            result = await self._store.txn(guard, [Put(key, encode_value({"next": given + 1}))])
            if result.succeeded:
                return given
            if (await self._store.txn([self.fence()], [])).succeeded:
                continue  # the counter moved (a previous writer's last write): read it again
            self.lost("its id allocation was fenced")
            raise errors.unknown_leader("this registry instance is no longer the writer")
