"""The one writer among registry instances, elected through an etcd lease, and its ids.

Campaign: grant a lease; in one transaction, if ``P/registry/leader`` is absent, put it on the
lease holding ``{"id", "url"}``. The
winner keeps the lease alive every TTL/3 and steps down when a refresh fails or the key no
longer holds its bytes; the others follow the key (a watch) to know where to forward writes
and campaign as soon as it goes.

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
from strom_server.etcd.prefix_follower import PrefixFollower
from strom_server.etcd.store import (
    Compare,
    EtcdStore,
    EtcdUnavailableError,
    KeyValue,
    Put,
    WatchBatch,
)
from strom_server.runtime.logs import get_logger

__all__ = ["LeaderInfo", "WriterElection"]

log = get_logger(__name__)


@dataclass(frozen=True)
class LeaderInfo:
    instance_id: str
    url: str


class WriterElection:
    """One instance's campaign; ``leading`` says whether it is the writer now."""

    def __init__(self, store: EtcdStore, keys: ClusterKeys, *, instance_id: str, url: str,
                 ttl_s: int, eligible: bool = True) -> None:  # fmt: skip
        self._store = store
        self._keys = keys
        self.instance_id = instance_id
        self.url = url
        self.ttl_s = ttl_s
        self.eligible = eligible
        self.leading = False
        #: Elections this instance has won (a new term must catch up with the log first).
        self.term = 0
        self.leader: LeaderInfo | None = None
        self._raw: bytes | None = None
        self._lease: int | None = None
        self._changed = asyncio.Event()
        self._follower = PrefixFollower(
            store, keys.registry_leader, on_snapshot=self._on_snapshot, on_batch=self._on_batch
        )
        self._tasks: list[asyncio.Task[None]] = []

    # --- following the key ---------------------------------------------------------------

    def _set_leader(self, kv: KeyValue | None) -> None:
        if kv is None:
            self.leader = None
        else:
            value = decode_value(kv.value)
            self.leader = LeaderInfo(str(value["id"]), str(value["url"]))
        if self.leading and (kv is None or kv.value != self._raw):
            self.leading = False
            log.warning("no longer the registry writer", instance_id=self.instance_id)
        self._changed.set()

    def _on_snapshot(self, kvs: list[KeyValue], _revision: int) -> None:
        self._set_leader(next((kv for kv in kvs if kv.key == self._keys.registry_leader), None))

    def _on_batch(self, batch: WatchBatch) -> None:
        for event in batch.events:
            if event.kv.key == self._keys.registry_leader:
                self._set_leader(None if event.kind == "delete" else event.kv)

    # --- the loop ------------------------------------------------------------------------

    async def start(self) -> None:
        await self._follower.start()
        if self.eligible:
            self._tasks.append(asyncio.create_task(self._run(), name="registry-election"))

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                if self.leader is None and await self._campaign():
                    await self._lead()
                else:
                    self._changed.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.ttl_s):
                            await self._changed.wait()
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("registry election failed; retrying", error=str(exc))
                await self._step_down()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def _campaign(self) -> bool:
        key = self._keys.registry_leader
        lease = await self._store.grant_lease(self.ttl_s)
        raw = encode_value({"id": self.instance_id, "url": self.url})
        result = await self._store.txn([Compare.absent(key)], [Put(key, raw, lease=lease)])
        if not result.succeeded:
            await self._revoke(lease)
            return False
        self._raw, self._lease, self.leading = raw, lease, True
        self.term += 1
        self.leader = LeaderInfo(self.instance_id, self.url)
        log.info("elected registry writer", instance_id=self.instance_id, url=self.url)
        return True

    async def _lead(self) -> None:
        while self.leading:
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ttl_s / 3):
                    await self._changed.wait()
            if not self.leading or self._lease is None:
                break
            try:
                ttl = await self._store.keep_alive_once(self._lease, timeout_s=self.ttl_s / 2)
            except EtcdUnavailableError:
                ttl = 0
            if ttl <= 0:
                break
        await self._step_down()

    async def _step_down(self) -> None:
        self.leading = False
        lease, self._lease = self._lease, None
        if lease is not None:
            await self._revoke(lease)

    async def _revoke(self, lease: int) -> None:
        try:
            await self._store.revoke_lease(lease, retry=False, timeout_s=1.0)
        except Exception as exc:  # it expires by itself anyway
            log.info("could not revoke the election lease", error=str(exc))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._step_down()
        await self._follower.close()

    # --- the writer's guarded operations -------------------------------------------------

    def fence(self) -> Compare:
        if not self.leading or self._raw is None:
            raise errors.unknown_leader("this registry instance is not the writer")
        return Compare.value_equals(self._keys.registry_leader, self._raw)

    async def check_leading(self) -> None:
        """Raise unless etcd still names this instance the writer."""
        result = await self._store.txn([self.fence()], [])
        if not result.succeeded:
            self.leading = False
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
            self.leading = False
            raise errors.unknown_leader("this registry instance is no longer the writer")
