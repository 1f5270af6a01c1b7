"""The storage node's link to etcd: its leased registration, and its partitions kept in line
with the controller's metadata through a watch (never a polling loop).

Start-up: register ``P/brokers/ids/<id>`` on a lease (refused when another live node holds the
id), read topics, partition states and broker defaults at one revision, apply them, then watch
the cluster prefix from the next revision. Each batch of relevant changes recomputes the
assignment (``assignment.assignments_for``) and applies it. A lost etcd connection is retried
with backoff and logged by ``EtcdStore``, whose watch resumes after the last revision it
delivered; the node keeps serving what it has meanwhile. A lease that expired while etcd was
unreachable is replaced by a new registration.

Keep-alive: on a thread of its own (``strom_server.etcd.lease_keeper``), so that a loop busy
applying thousands of partitions cannot starve it; it renews only while the event loop keeps
ticking (``node.loop_watch``: a tick within the last keep-alive interval), so a wedged node
still loses its session. A lease etcd reports expired is replaced, on the loop, by a new
registration. Every registration and keep-alive etcd answers renews the node's leader lease
(``node.leader_lease``): how long it may still acknowledge acks=all writes as a leader.

The same watch keeps what replication needs: every broker's address (followers fetch from
leaders), the active controller's address (leaders send ISR changes), this node's broker epoch
(the create revision of its registration) and the throttle of reassignments in progress; and
what transactions need: the live coordinators' addresses (``P/coordinators/ids/``), which
leaders ask to verify a transaction's first write to a partition.

Thread-safety: runs on the node's event loop (the keep-alive thread only calls back into it
through ``call_soon_threadsafe``).
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from strom.errors import DuplicateBrokerRegistrationError
from strom_server.etcd.keys import ClusterKeys, decode_value, encode_value
from strom_server.etcd.lease_keeper import LeaseKeeper
from strom_server.etcd.prefix_follower import PrefixFollower
from strom_server.etcd.store import (
    Compare,
    Delete,
    EtcdStore,
    KeyValue,
    Put,
    WatchBatch,
    WatchCompactedError,
)
from strom_storage.log import LogConfig
from strom_storage.membership.assignment import assignments_for
from strom_storage.node import ReplicaManager
from strom_storage.node.leader_lease import LeaderLease
from strom_storage.node.loop_watch import LoopWatch

log = structlog.get_logger(__name__)

__all__ = ["ClusterLink"]

#: How long a burst of metadata changes may accumulate before it is applied.
APPLY_COALESCE_S = 0.01
#: Pause before applying again after a pass that failed or left partitions unhosted.
APPLY_RETRY_S = 1.0


class ClusterLink:
    """Registration and metadata watch of one storage node."""

    def __init__(
        self,
        replicas: ReplicaManager,
        *,
        store: EtcdStore,
        keys: ClusterKeys,
        node_id: int,
        host: str,
        port: int,
        rack: str,
        session_timeout_s: float,
        base_config: LogConfig,
        lease: LeaderLease | None = None,
    ) -> None:
        """``lease``: renewed by every registration and keep-alive etcd answers (a new one
        when not given)."""
        self.replicas = replicas
        self.store = store
        self.keys = keys
        self.node_id = node_id
        self.registration = {"id": node_id, "host": host, "port": port, "rack": rack}
        self.session_timeout_s = session_timeout_s
        self.base_config = base_config
        self.lease = lease if lease is not None else LeaderLease()
        self._lease = 0
        self._topics: dict[str, dict[str, object]] = {}
        self._states: dict[tuple[str, int], dict[str, object]] = {}
        self._broker_defaults: dict[str, str] = {}
        self.broker_addresses: dict[int, str] = {}
        #: coordinator id -> host:port of every live coordinator
        self.coordinator_addresses: dict[int, str] = {}
        self.controller_address: str | None = None
        self.broker_epoch = 0
        self._throttles: dict[tuple[str, int], int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._dirty = asyncio.Event()
        self._expired = asyncio.Event()
        self.loop_watch = LoopWatch()
        interval = max(0.2, session_timeout_s / 3)
        self._keeper = LeaseKeeper(
            store.endpoints,
            lease=self.lease,
            interval_s=interval,
            # a tick within one keep-alive interval: a wedged loop loses the session as it
            # would if the keep-alive ran on it
            may_renew=lambda: self.loop_watch.tick_age_s() < interval,
            on_expired=self._on_expired,
            tls=store.tls,
            name=f"etcd-lease-keeper-{node_id}",
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._follower = PrefixFollower(
            store,
            self._prefix,
            on_snapshot=self._load_snapshot,
            on_batch=self._absorb_batch,
            on_compacted=self._compacted,
        )

    @property
    def _prefix(self) -> str:
        return self.keys.prefix.rstrip("/") + "/"

    # -- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Register and load the assignment; raises DuplicateBrokerRegistrationError."""
        self._loop = asyncio.get_running_loop()
        await self._register()
        self._tasks = [
            asyncio.ensure_future(self.loop_watch.run()),
            asyncio.ensure_future(self._reregister()),
        ]
        self._keeper.keep(self._lease)
        self._keeper.start()
        await self._follower.start()
        self._dirty.clear()  # the first snapshot is applied here, not by the applier
        await self._apply()
        self._tasks.append(asyncio.ensure_future(self._applier()))

    async def close(self) -> None:
        """Stop watching and revoke the lease, so the controller sees the node leave at once."""
        for task in self._tasks:
            task.cancel()
        await asyncio.to_thread(self._keeper.stop)
        await self._follower.close()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._lease:
            with contextlib.suppress(Exception):
                await self.store.revoke_lease(self._lease, retry=False)
        await self.store.close()

    # -- registration -------------------------------------------------------------------------

    async def _register(self) -> None:
        key = self.keys.broker(self.node_id)
        value = encode_value(self.registration)
        ttl = max(1, round(self.session_timeout_s))
        sent_at = self.lease.now()
        lease = await self.store.grant_lease(ttl)
        put = Put(key, value, lease)
        created = await self.store.txn([Compare.absent(key)], [put])
        if not created.succeeded:
            existing = await self.store.get(key)
            current = decode_value(existing.value) if existing else {}
            same_address = (current.get("host"), current.get("port")) == (
                self.registration["host"],
                self.registration["port"],
            )
            # Our own previous incarnation (killed before its lease expired): nobody else can
            # hold our address while we listen on it, so its registration is ours to replace.
            # Delete, then create: the new key's create revision is the new broker epoch.
            replaced = False
            if same_address and existing is not None:
                removed = await self.store.txn(
                    [Compare.value_equals(key, existing.value)], [Delete(key)]
                )
                replaced = (
                    removed.succeeded
                    and (await self.store.txn([Compare.absent(key)], [put])).succeeded
                )
            if not replaced:
                await self.store.revoke_lease(lease)
                raise DuplicateBrokerRegistrationError(
                    f"node id {self.node_id} is already registered by "
                    f"{current.get('host')}:{current.get('port')}; every storage node needs "
                    "its own --node-id"
                )
        self._lease = lease
        self.lease.renewed(sent_at, ttl)
        registered = await self.store.get(key)
        self.broker_epoch = registered.create_revision if registered is not None else 0
        log.info("registered", node_id=self.node_id, key=key, broker_epoch=self.broker_epoch)

    def _on_expired(self, lease_id: int) -> None:
        """etcd reported the lease expired (called from the keep-alive thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._expired.set)

    async def _reregister(self) -> None:
        """Register again each time the keep-alive finds the lease expired."""
        interval = self._keeper.interval_s
        while True:
            await self._expired.wait()
            self._expired.clear()
            log.warning("registration lease expired; registering again")
            while True:
                try:
                    await self._register()
                    break
                except Exception as exc:
                    # Registering again must never stop for good: etcd refuses the put when the
                    # new lease expired while it waited out a partition (NOT_FOUND), and another
                    # node may hold our id for a while.
                    log.warning("registering again failed; retrying", error=str(exc))
                    await asyncio.sleep(interval)
            self._keeper.keep(self._lease)

    # -- metadata -----------------------------------------------------------------------------

    def _load_snapshot(self, kvs: list[KeyValue], revision: int) -> None:
        """Mirror topics, states and defaults at one revision."""
        self._topics, self._states, self._broker_defaults = {}, {}, {}
        self.broker_addresses, self.controller_address, self._throttles = {}, None, {}
        self.coordinator_addresses = {}
        for kv in kvs:
            self._absorb(kv.key, kv.value)
        self._dirty.set()

    def _absorb_batch(self, batch: WatchBatch) -> None:
        changed = False
        for event in batch.events:
            value = None if event.kind == "delete" else event.kv.value
            changed |= self._absorb(event.kv.key, value)
        if changed:
            self._dirty.set()

    def _compacted(self, exc: WatchCompactedError) -> None:
        log.warning("metadata watch fell behind compaction; reloading")

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
            if (broker := self.keys.parse_broker_key(key)) is not None:
                if value is None:
                    self.broker_addresses.pop(broker, None)
                else:
                    broker_value = decode_value(value)
                    self.broker_addresses[broker] = (
                        f"{broker_value['host']}:{int(broker_value['port'])}"
                    )
                return False
            if (coordinator := self.keys.parse_coordinator_key(key)) is not None:
                if value is None:
                    self.coordinator_addresses.pop(coordinator, None)
                else:
                    registered = decode_value(value)
                    self.coordinator_addresses[coordinator] = (
                        f"{registered['host']}:{int(registered['port'])}"
                    )
                return False
            if key == self.keys.controller_leader:
                found = decode_value(value) if value is not None else None
                self.controller_address = (
                    f"{found['host']}:{int(found['port'])}" if found is not None else None
                )
                return False
            if (moving := self.keys.parse_reassignment_key(key)) is not None:
                throttle = 0
                if value is not None:
                    record = decode_value(value)
                    if self.node_id in record.get("adding", ()):
                        throttle = int(record.get("throttle_bytes_per_sec", 0) or 0)
                if throttle > 0:
                    self._throttles[moving] = throttle
                else:
                    self._throttles.pop(moving, None)
                return False
            if key == self.keys.broker_config:
                defaults = decode_value(value) if value is not None else {}
                self._broker_defaults = {str(k): str(v) for k, v in defaults.items()}
                return True
        except (ValueError, KeyError, TypeError) as exc:
            log.error("unreadable metadata value; ignored", key=key, error=str(exc))
        return False

    def address_of(self, node_id: int) -> str | None:
        return self.broker_addresses.get(node_id)

    def throttle_of(self, key: tuple[str, int]) -> int:
        """Replication throttle (bytes/s) while this node is an adding replica of ``key``."""
        return self._throttles.get(key, 0)

    async def _applier(self) -> None:
        """Apply the mirrored metadata after changes, coalescing bursts: a controller writing
        thousands of partition states costs a few passes, not one per write."""
        while True:
            await self._dirty.wait()
            await asyncio.sleep(APPLY_COALESCE_S)
            self._dirty.clear()
            try:
                await self._apply()
                retry = self.replicas.hosted.unapplied > 0  # partitions it could not host
            except Exception:  # never stop applying
                log.exception("applying the controller's metadata failed; retrying")
                retry = True
            if retry:
                await asyncio.sleep(APPLY_RETRY_S)
                self._dirty.set()

    async def _apply(self) -> None:
        desired = assignments_for(self.node_id, self._topics, self._states)
        base = self.base_config
        if self._broker_defaults:
            try:
                base = self.base_config.merged(self._broker_defaults)
            except ValueError as exc:
                log.error("invalid cluster-wide topic defaults; ignored", error=str(exc))
        await self.replicas.hosted.apply_assignments(desired, base, remove_others=True)
