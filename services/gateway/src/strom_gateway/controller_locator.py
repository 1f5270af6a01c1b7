"""Where the active controller is: ``P/controller/leader`` in etcd, followed by a watch.

Thread-safety: ``address`` may be read from any thread; the etcd watch callback updates it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import etcd3
import structlog

from strom_server.cluster_keys import ClusterKeys, decode_value
from strom_server.etcd_client import connect_etcd

log = structlog.get_logger(__name__)

__all__ = ["ControllerLocator"]


class ControllerLocator:
    """The active controller's ``host:port``, kept current from etcd."""

    def __init__(self, endpoints: tuple[str, ...], keys: ClusterKeys) -> None:
        self._endpoints = endpoints
        self._keys = keys
        self._client: etcd3.Etcd3Client | None = None
        self._watch_id: int | None = None
        self._lock = threading.Lock()
        self._address: str | None = None
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def address(self) -> str | None:
        with self._lock:
            return self._address

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._client = await asyncio.to_thread(connect_etcd, self._endpoints)
        await self.refresh()

    async def refresh(self) -> str | None:
        """Read the leader key again and (re)start the watch; returns the address."""
        assert self._client is not None
        await asyncio.to_thread(self._read_and_watch)
        return self.address

    def _read_and_watch(self) -> None:
        assert self._client is not None
        response = self._client.get_response(self._keys.controller_leader)
        value = response.kvs[0].value if response.kvs else None
        self._set(value)
        if self._watch_id is not None:
            with contextlib.suppress(Exception):
                self._client.cancel_watch(self._watch_id)
        self._watch_id = self._client.add_watch_callback(
            self._keys.controller_leader,
            self._on_event,
            start_revision=int(response.header.revision) + 1,
        )

    def _on_event(self, response: Any) -> None:
        if isinstance(response, Exception):
            log.warning(
                "controller watch failed; will re-read on next request", error=str(response)
            )
            self._set(None)
            return
        for event in response.events:
            self._set(None if isinstance(event, etcd3.events.DeleteEvent) else event.value)

    def _set(self, raw: bytes | None) -> None:
        address = None
        if raw:
            try:
                leader = decode_value(raw)
                address = f"{leader['host']}:{int(leader['port'])}"
            except (ValueError, KeyError, TypeError) as exc:
                log.error("unreadable controller leader key", error=str(exc))
        with self._lock:
            changed, self._address = address != self._address, address
        if changed:
            log.info("active controller", address=address)

    async def close(self) -> None:
        if self._client is None:
            return
        with contextlib.suppress(Exception):
            if self._watch_id is not None:
                await asyncio.to_thread(self._client.cancel_watch, self._watch_id)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._client.close)
