"""Where the active controller is: ``P/controller/leader`` in etcd, followed by a watch.

``EtcdStore`` retries lost connections and resumes the watch after the last revision it saw,
so the address stays current across etcd outages; ``refresh`` re-reads the key on demand (a
forwarded call that hit a deposed controller asks for it).

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from strom_server.cluster_keys import ClusterKeys, decode_value
from strom_server.etcd_store import EtcdStore, WatchCompactedError

log = structlog.get_logger(__name__)

__all__ = ["ControllerLocator"]


class ControllerLocator:
    """The active controller's ``host:port``, kept current from etcd."""

    def __init__(self, store: EtcdStore, keys: ClusterKeys) -> None:
        self._store = store
        self._key = keys.controller_leader
        self._address: str | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str | None:
        return self._address

    async def start(self) -> None:
        revision = await self._read()
        self._task = asyncio.ensure_future(self._watch(revision + 1))

    async def refresh(self) -> str | None:
        """Read the leader key now; returns the address (None when no controller is active)."""
        await self._read()
        return self._address

    async def _read(self) -> int:
        kvs, revision = await self._store.get_prefix(self._key)
        current = next((kv.value for kv in kvs if kv.key == self._key), None)
        self._set(current)
        return revision

    async def _watch(self, revision: int) -> None:
        while True:
            try:
                async for batch in self._store.watch_prefix(self._key, revision):
                    for event in batch.events:
                        if event.kv.key == self._key:
                            self._set(None if event.kind == "delete" else event.kv.value)
                    revision = batch.revision + 1
            except WatchCompactedError:
                revision = await self._read() + 1

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
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._store.close()
