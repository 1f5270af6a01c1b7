"""Where the active controller is: ``P/controller/leader`` in etcd, followed by a watch, and
which controllers run (``P/controller/members/<id>``, standbys included).

``EtcdStore`` retries lost connections and resumes the watch after the last revision it saw,
so the address stays current across etcd outages; ``refresh`` re-reads the key on demand (a
forwarded call that hit a deposed controller asks for it).

Thread-safety: one event loop.
"""

from __future__ import annotations

import structlog

from strom.types import NodeInfo
from strom_server.etcd.keys import ClusterKeys, decode_value
from strom_server.etcd.prefix_follower import PrefixFollower
from strom_server.etcd.store import EtcdStore, KeyValue, WatchBatch

log = structlog.get_logger(__name__)

__all__ = ["ControllerLocator"]


class ControllerLocator:
    """The active controller's ``host:port``, kept current from etcd."""

    def __init__(self, store: EtcdStore, keys: ClusterKeys) -> None:
        self._store = store
        self._keys = keys
        self._key = keys.controller_leader
        self._address: str | None = None
        self._members: dict[int, NodeInfo] = {}
        self._follower = PrefixFollower(
            store,
            keys.controller_root,
            on_snapshot=self._absorb_snapshot,
            on_batch=self._absorb_batch,
        )

    @property
    def address(self) -> str | None:
        return self._address

    @property
    def members(self) -> list[NodeInfo]:
        """Every registered controller (active and standbys), by id."""
        return [self._members[i] for i in sorted(self._members)]

    async def start(self) -> None:
        await self._follower.start()

    async def refresh(self) -> str | None:
        """Read the leader key now; returns the address (None when no controller is active)."""
        await self._follower.reload()
        return self._address

    def _absorb_snapshot(self, kvs: list[KeyValue], revision: int) -> None:
        self._set(next((kv.value for kv in kvs if kv.key == self._key), None))
        self._members.clear()
        for kv in kvs:
            self._member(kv.key, kv.value)

    def _absorb_batch(self, batch: WatchBatch) -> None:
        for event in batch.events:
            if event.kv.key == self._key:
                self._set(None if event.kind == "delete" else event.kv.value)
            else:
                self._member(event.kv.key, None if event.kind == "delete" else event.kv.value)

    def _member(self, key: str, raw: bytes | None) -> None:
        controller_id = self._keys.parse_controller_member_key(key)
        if controller_id is None:
            return
        if raw is None:
            self._members.pop(controller_id, None)
            return
        try:
            value = decode_value(raw)
            self._members[controller_id] = NodeInfo(
                controller_id, str(value["host"]), int(value["port"])
            )
        except (ValueError, KeyError, TypeError) as exc:
            log.error("unreadable controller registration", key=key, error=str(exc))

    def _set(self, raw: bytes | None) -> None:
        address = None
        if raw:
            try:
                leader = decode_value(raw)
                address = f"{leader['host']}:{int(leader['port'])}"
            except (ValueError, KeyError, TypeError) as exc:
                log.error("unreadable controller leader key", error=str(exc))
        if address != self._address:
            log.info("active controller", address=address)
        self._address = address

    async def close(self) -> None:
        await self._follower.close()
        await self._store.close()
