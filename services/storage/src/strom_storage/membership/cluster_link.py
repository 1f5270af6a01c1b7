"""The storage node's link to etcd: its leased registration, and its partitions kept in line
with the controller's metadata through a watch (never a polling loop).

Start-up: register ``P/brokers/ids/<id>`` on a lease (refused when another live node holds the
id), read topics, partition states and broker defaults at one revision, apply them, then watch
the cluster prefix from the next revision. Each relevant change recomputes the assignment
(``assignment.assignments_for``) and applies it on the event loop. A lost etcd connection is
retried with backoff and logged; the node keeps serving what it has meanwhile, and resyncs
from a fresh snapshot when etcd is back. A lease lost while etcd was unreachable is replaced by
a new registration.

Thread-safety: runs on the node's event loop; etcd calls go through ``asyncio.to_thread`` and
watch callbacks (on the etcd client's thread) hop back with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import etcd3
import structlog

from strom.errors import DuplicateBrokerRegistrationError
from strom_server.cluster_keys import ClusterKeys, decode_value, encode_value
from strom_server.etcd_client import connect_etcd
from strom_storage.log import LogConfig
from strom_storage.membership.assignment import assignments_for
from strom_storage.node import ReplicaManager

log = structlog.get_logger(__name__)

__all__ = ["ClusterLink"]

RETRY_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)


class ClusterLink:
    """Registration and metadata watch of one storage node."""

    def __init__(
        self,
        replicas: ReplicaManager,
        *,
        endpoints: tuple[str, ...],
        keys: ClusterKeys,
        node_id: int,
        host: str,
        port: int,
        rack: str,
        session_timeout_s: float,
        base_config: LogConfig,
        connect: Callable[[tuple[str, ...]], etcd3.Etcd3Client] = connect_etcd,
    ) -> None:
        self.replicas = replicas
        self.keys = keys
        self.node_id = node_id
        self.registration = {"id": node_id, "host": host, "port": port, "rack": rack}
        self.session_timeout_s = session_timeout_s
        self.base_config = base_config
        self._endpoints = endpoints
        self._connect = connect
        self._client: etcd3.Etcd3Client | None = None
        self._lease: etcd3.Lease | None = None
        self._watch_id: int | None = None
        self._topics: dict[str, dict[str, Any]] = {}
        self._states: dict[tuple[str, int], dict[str, Any]] = {}
        self._broker_defaults: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._apply_scheduled = False
        self._tasks: list[asyncio.Task[None]] = []
        self._resync = asyncio.Event()
        self._closed = False

    # -- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Register and load the assignment; raises DuplicateBrokerRegistrationError."""
        self._loop = asyncio.get_running_loop()
        self._client = await asyncio.to_thread(self._connect, self._endpoints)
        await asyncio.to_thread(self._register)
        await self._sync()
        self._tasks = [
            asyncio.ensure_future(self._keep_alive()),
            asyncio.ensure_future(self._resync_on_error()),
        ]

    async def close(self) -> None:
        """Stop watching and revoke the lease, so the controller sees the node leave at once."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        client = self._client
        if client is None:
            return
        with contextlib.suppress(Exception):
            if self._watch_id is not None:
                await asyncio.to_thread(client.cancel_watch, self._watch_id)
        with contextlib.suppress(Exception):
            if self._lease is not None:
                await asyncio.to_thread(self._lease.revoke)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(client.close)

    # -- registration -------------------------------------------------------------------------

    def _register(self) -> None:
        client = self._require_client()
        key = self.keys.broker(self.node_id)
        value = encode_value(self.registration)
        lease = client.lease(max(1, round(self.session_timeout_s)))
        created, responses = client.transaction(
            compare=[client.transactions.create(key) == 0],
            success=[client.transactions.put(key, value, lease)],
            failure=[client.transactions.get(key)],
        )
        if not created:
            existing_raw = _first_value(responses)
            existing = decode_value(existing_raw) if existing_raw else {}
            same_address = (existing.get("host"), existing.get("port")) == (
                self.registration["host"],
                self.registration["port"],
            )
            # Our own previous incarnation (killed before its lease expired): nobody else can
            # hold our address while we listen on it, so the registration is ours to replace.
            replaced = (
                same_address
                and client.transaction(
                    compare=[client.transactions.value(key) == existing_raw],
                    success=[client.transactions.put(key, value, lease)],
                    failure=[],
                )[0]
            )
            if not replaced:
                lease.revoke()
                raise DuplicateBrokerRegistrationError(
                    f"node id {self.node_id} is already registered by "
                    f"{existing.get('host')}:{existing.get('port')}; every storage node needs "
                    "its own --node-id"
                )
        self._lease = lease
        log.info("registered", node_id=self.node_id, lease_ttl_s=lease.ttl, key=key)

    async def _keep_alive(self) -> None:
        interval = max(0.2, self.session_timeout_s / 3)
        failures = 0
        while not self._closed:
            await asyncio.sleep(interval)
            try:
                alive = await asyncio.to_thread(self._refresh)
                if not alive:
                    log.warning("registration lease expired; registering again")
                    await asyncio.to_thread(self._register)
                failures = 0
            except DuplicateBrokerRegistrationError:
                log.error("node id taken by another node while this one was away; exiting")
                raise
            except Exception as exc:
                failures += 1
                log.warning("etcd keep-alive failed; retrying", error=str(exc), failures=failures)

    def _refresh(self) -> bool:
        assert self._lease is not None
        responses = list(self._lease.refresh())
        return bool(responses) and responses[0].TTL > 0

    # -- metadata -----------------------------------------------------------------------------

    async def _sync(self) -> None:
        """Snapshot topics, states and defaults at one revision, apply, watch from there."""
        revision = await asyncio.to_thread(self._load_snapshot)
        self._apply(remove_others=True)
        self._watch_id = await asyncio.to_thread(self._watch_from, revision + 1)

    def _load_snapshot(self) -> int:
        client = self._require_client()
        response = client.get_prefix_response(self.keys.prefix.rstrip("/") + "/")
        self._topics, self._states, self._broker_defaults = {}, {}, {}
        for kv in response.kvs:
            self._absorb(kv.key.decode(), kv.value)
        return int(response.header.revision)

    def _watch_from(self, revision: int) -> int:
        client = self._require_client()
        return int(
            client.add_watch_prefix_callback(
                self.keys.prefix.rstrip("/") + "/", self._on_watch, start_revision=revision
            )
        )

    def _on_watch(self, response: Any) -> None:
        """Watch callback, on the etcd client's thread."""
        if isinstance(response, Exception):
            log.warning("etcd watch failed; will resync", error=str(response))
            self._call_on_loop(self._resync.set)
            return
        changed = False
        for event in response.events:
            key = event.key.decode()
            deleted = isinstance(event, etcd3.events.DeleteEvent)
            changed |= self._absorb(key, None if deleted else event.value)
        if changed:
            self._call_on_loop(self._schedule_apply)

    def _absorb(self, key: str, value: bytes | None) -> bool:
        """Mirror one key; returns whether it matters for this node's assignment."""
        try:
            if (topic := self.keys.parse_topic_key(key)) is not None:
                if value is None:
                    self._topics.pop(topic, None)
                else:
                    self._topics[topic] = decode_value(value)
                return True
            if (partition := self.keys.parse_partition_key(key)) is not None:
                if value is None:
                    self._states.pop(partition, None)
                else:
                    self._states[partition] = decode_value(value)
                return True
            if key == self.keys.broker_config:
                self._broker_defaults = {} if value is None else {
                    str(k): str(v) for k, v in decode_value(value).items()
                }  # fmt: skip
                return True
        except ValueError as exc:
            log.error("unreadable metadata value; ignored", key=key, error=str(exc))
        return False

    def _call_on_loop(self, callback: Callable[[], None]) -> None:
        if self._loop is not None and not self._closed:
            self._loop.call_soon_threadsafe(callback)

    def _schedule_apply(self) -> None:
        # Coalesce a burst of watch events into one pass.
        if not self._apply_scheduled:
            self._apply_scheduled = True
            asyncio.get_running_loop().call_soon(self._apply_now)

    def _apply_now(self) -> None:
        self._apply_scheduled = False
        self._apply(remove_others=True)

    def _apply(self, *, remove_others: bool) -> None:
        desired = assignments_for(self.node_id, self._topics, self._states, self._broker_defaults)
        self.replicas.apply_assignments(desired, self.base_config, remove_others=remove_others)

    async def _resync_on_error(self) -> None:
        while not self._closed:
            await self._resync.wait()
            self._resync.clear()
            for attempt, delay in enumerate((*RETRY_BACKOFF_S, *[RETRY_BACKOFF_S[-1]] * 1000)):
                if self._closed:
                    return
                try:
                    if self._watch_id is not None:
                        with contextlib.suppress(Exception):
                            await asyncio.to_thread(
                                self._require_client().cancel_watch, self._watch_id
                            )
                    await self._sync()
                    log.info("metadata resynced from etcd", attempts=attempt + 1)
                    break
                except Exception as exc:
                    log.warning("etcd unreachable; retrying", error=str(exc), retry_in_s=delay)
                    await asyncio.sleep(delay)

    def _require_client(self) -> etcd3.Etcd3Client:
        if self._client is None:
            raise RuntimeError("the cluster link has not started")
        return self._client


def _first_value(responses: Any) -> bytes | None:
    """The value of the first key in a transaction's get responses (python3-etcd3 returns a
    list of ``[(value, metadata), ...]`` per get), if any."""
    for response in responses or ():
        for value, _metadata in response:
            return bytes(value)
    return None
