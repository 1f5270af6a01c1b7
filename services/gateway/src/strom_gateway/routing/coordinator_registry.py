"""Which group coordinators are alive: ``P/coordinators/ids/<id>`` in etcd, followed by a watch.

Each coordinator registers ``{"id", "host", "port"}`` on its lease, so a dead one disappears
when the lease expires. ``EtcdStore`` resumes the watch after the last revision it saw; a
compacted watch reloads the whole prefix.

Thread-safety: one event loop.
"""

from __future__ import annotations

import structlog

from strom_server.etcd.keys import ClusterKeys, decode_value
from strom_server.etcd.prefix_follower import PrefixFollower
from strom_server.etcd.store import EtcdStore, KeyValue, WatchBatch

log = structlog.get_logger(__name__)

__all__ = ["CoordinatorRegistry"]


class CoordinatorRegistry:
    """The live coordinators' ``host:port`` by coordinator id, kept current from etcd."""

    def __init__(self, store: EtcdStore, keys: ClusterKeys) -> None:
        self._store = store
        self._keys = keys
        self._addresses: dict[int, str] = {}
        self._follower = PrefixFollower(
            store, keys.coordinators, on_snapshot=self._absorb_snapshot, on_batch=self._absorb_batch
        )

    @property
    def addresses(self) -> dict[int, str]:
        """Coordinator id -> ``host:port`` (a copy), in id order."""
        return dict(sorted(self._addresses.items()))

    async def start(self) -> None:
        await self._follower.start()

    async def refresh(self) -> dict[int, str]:
        """Read the registrations now (a forwarded call found a coordinator gone)."""
        await self._follower.reload()
        return self.addresses

    def _absorb_snapshot(self, kvs: list[KeyValue], revision: int) -> None:
        found: dict[int, str] = {}
        for kv in kvs:
            entry = self._parse(kv.key, kv.value)
            if entry is not None:
                found[entry[0]] = entry[1]
        if found != self._addresses:
            log.info("group coordinators", coordinators=found)
        self._addresses = found

    def _parse(self, key: str, raw: bytes) -> tuple[int, str] | None:
        coordinator_id = self._keys.parse_coordinator_key(key)
        if coordinator_id is None:
            return None
        try:
            value = decode_value(raw)
            return coordinator_id, f"{value['host']}:{int(value['port'])}"
        except (ValueError, KeyError, TypeError) as exc:
            log.error("unreadable coordinator registration", key=key, error=str(exc))
            return None

    def _absorb_batch(self, batch: WatchBatch) -> None:
        for event in batch.events:
            self._apply(event.kind, event.kv.key, event.kv.value)

    def _apply(self, kind: str, key: str, raw: bytes) -> None:
        coordinator_id = self._keys.parse_coordinator_key(key)
        if coordinator_id is None:
            return
        if kind == "delete":
            if self._addresses.pop(coordinator_id, None) is not None:
                log.info("group coordinator gone", coordinator_id=coordinator_id)
            return
        entry = self._parse(key, raw)
        if entry is not None and self._addresses.get(entry[0]) != entry[1]:
            self._addresses[entry[0]] = entry[1]
            log.info("group coordinator registered", coordinator_id=entry[0], address=entry[1])

    async def close(self) -> None:
        await self._follower.close()
        await self._store.close()
