"""Which coordinator serves which ``__consumer_offsets`` partition, decided through etcd.

Registration: ``P/coordinators/ids/<id>`` on this process's lease, kept alive. A lost lease (it
expired, e.g. after the process was paused, or etcd was unreachable for longer than its TTL)
stops serving every partition at once; the process then registers again with a new lease.

Placement: every partition has one preferred coordinator among the live ones, by rendezvous
(highest-random-weight) hashing of (coordinator id, partition), so that a coordinator joining
or leaving moves only the partitions it wins or held. Reacting to the watch of
``P/coordinators/`` (no polling), each instance:

* claims each partition without an owner it is preferred for: a create-if-absent transaction
  of ``P/coordinators/owners/<p>`` = {"coordinator_id", "epoch"} on its lease (an owner that
  died loses the key with its lease, so its partitions become claimable);
* releases each partition it owns whose preferred coordinator is another live instance:
  unload first, then delete the key (guarded by its value), and the preferred one claims it.

Taking a partition over (``_load``): the manager answers COORDINATOR_LOAD_IN_PROGRESS for its
groups; InitProducerId for the transactional id ``__strom_coordinator-offsets-<p>`` bumps the
partition's producer epoch, which fences the previous owner on the storage nodes (its next
write fails with INVALID_PRODUCER_EPOCH, see ``offsets_log``); an ownership marker is written
with acks=all under the new epoch; then every record up to the high watermark is replayed
into the manager, and the partition is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import grpc

from strom.cluster import ClusterClient, from_rpc_error
from strom.errors import ConfigurationError, NotCoordinatorError, StromError, for_code
from strom.protocol.v1 import controller_pb2
from strom.types import TopicPartition
from strom_coordinator.config import OFFSETS_TOPIC
from strom_coordinator.group.records import ownership_marker
from strom_coordinator.loader import read_partition
from strom_coordinator.offsets_log import OffsetsLog
from strom_server.etcd.keys import ClusterKeys, decode_value, encode_value
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

__all__ = [
    "Member",
    "Owner",
    "PartitionHost",
    "PartitionOwnership",
    "preferred",
    "transactional_id",
]

log = get_logger(__name__)

_BACKOFF_S = 0.1
_BACKOFF_MAX_S = 2.0


class PartitionHost(Protocol):
    """The load life cycle of the hosted partitions (``partitions.hosting.HostedPartitions``
    implements it; ``GroupManager`` delegates to its own)."""

    partition_count: int | None

    def begin_loading(self, partition: int) -> None: ...
    def replay(
        self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int
    ) -> None: ...
    def finish_loading(self, partition: int) -> None: ...
    def unload(self, partition: int) -> None: ...


@dataclass(frozen=True)
class Member:
    """A live coordinator (its registration)."""

    id: int
    host: str
    port: int


@dataclass(frozen=True)
class Owner:
    """The value of ``P/coordinators/owners/<p>`` and the lease it lives on."""

    coordinator_id: int
    epoch: int
    raw: bytes
    lease: int


def transactional_id(partition: int) -> str:
    """The transactional id whose producer epoch fences writers of ``partition``."""
    return f"__strom_coordinator-offsets-{partition}"


def _weight(coordinator_id: int, partition: int) -> int:
    digest = hashlib.blake2b(f"{coordinator_id}/{partition}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def preferred(live: set[int] | frozenset[int], partition: int) -> int | None:
    """The live coordinator that should serve ``partition`` (rendezvous hashing), None if none."""
    if not live:
        return None
    return max(live, key=lambda c: (_weight(c, partition), c))


class PartitionOwnership:
    """Registration, placement and take-over of ``__consumer_offsets`` partitions (see the
    module docstring). Not thread-safe: one event loop."""

    def __init__(
        self,
        store: EtcdStore,
        keys: ClusterKeys,
        host: PartitionHost,
        offsets_log: OffsetsLog,
        cluster: ClusterClient,
        *,
        coordinator_id: int,
        ttl_s: int,
        request_timeout_s: float,
        topic: str = OFFSETS_TOPIC,
    ) -> None:
        self.store = store
        self.keys = keys
        self.host = host
        self.log = offsets_log
        self.cluster = cluster
        self.coordinator_id = coordinator_id
        self.ttl_s = ttl_s
        self.request_timeout_s = request_timeout_s
        self.topic = topic
        self.members: dict[int, Member] = {}
        self.owners: dict[int, Owner] = {}
        self.partition_count: int | None = None
        self.on_change: Callable[[], None] = lambda: None
        """Called after every change of members, owners or the partition count."""
        self._address: tuple[str, int] = ("", 0)
        self._lease = 0
        self._revision = 0
        self._revs: dict[str, int] = {}
        self._owned: dict[int, asyncio.Task[None]] = {}
        self._loaded: set[int] = set()
        self._wanted = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._releases: set[asyncio.Task[None]] = set()

    # --- life cycle ----------------------------------------------------------------------

    @property
    def registered(self) -> bool:
        return self._lease != 0

    def owned(self) -> set[int]:
        """Partitions this instance holds the ownership key of (loaded or loading)."""
        return set(self._owned)

    def loaded(self) -> set[int]:
        """Partitions this instance serves (loaded)."""
        return set(self._loaded)

    async def start(self, host: str, port: int) -> None:
        """Register as ``host:port``, read the current owners, and start following etcd."""
        self._address = (host, port)
        await self._register()
        revision = await self._load_snapshot()
        self._tasks = [
            asyncio.create_task(self._keep_alive(), name="coordinator-keep-alive"),
            asyncio.create_task(self._watch(revision + 1), name="coordinator-watch"),
            asyncio.create_task(self._reconcile_loop(), name="coordinator-placement"),
        ]
        self._wanted.set()

    async def close(self) -> None:
        """Stop serving, then revoke the lease: every partition's key goes at once, so the
        other instances take over without waiting for the lease to expire."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._drop_all()
        if self._lease:
            with contextlib.suppress(Exception):
                await self.store.revoke_lease(self._lease, retry=False)
            self._lease = 0

    # --- registration and lease ----------------------------------------------------------

    async def _register(self) -> None:
        key = self.keys.coordinator(self.coordinator_id)
        host, port = self._address
        value = encode_value({"id": self.coordinator_id, "host": host, "port": port})
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
        self._lease = lease
        log.info("registered", coordinator_id=self.coordinator_id, host=host, port=port)

    async def _keep_alive(self) -> None:
        interval = max(0.2, self.ttl_s / 3)
        last_ok = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            try:
                ttl = await self.store.keep_alive_once(self._lease, timeout_s=interval)
            except EtcdUnavailableError as exc:
                if time.monotonic() - last_ok < self.ttl_s:
                    log.warning("etcd keep-alive failed; retrying", error=str(exc))
                    continue
                ttl = 0
            if ttl > 0:
                last_ok = time.monotonic()
                continue
            log.warning("registration lease lost: no longer serving any partition; "
                        "registering again", coordinator_id=self.coordinator_id)  # fmt: skip
            self._drop_all()
            self._lease = 0
            while True:
                try:
                    await self._register()
                    break
                except Exception as exc:  # etcd trouble, or our id taken meanwhile
                    log.warning("registration failed; retrying", error=str(exc))
                    await asyncio.sleep(interval)
            last_ok = time.monotonic()
            self._wanted.set()

    # --- following etcd ------------------------------------------------------------------

    @property
    def _prefix(self) -> str:
        """``P/coordinators/``: registrations and ownership keys."""
        return self.keys.coordinators.removesuffix("ids/")

    async def _load_snapshot(self) -> int:
        kvs, revision = await self.store.get_prefix(self._prefix)
        topic_kv = await self.store.get(self.keys.topic(self.topic))
        self.members.clear()
        self.owners.clear()
        self._revs.clear()
        for kv in kvs:
            self._absorb("put", kv)
        if topic_kv is not None:
            self._absorb("put", topic_kv)
        self._revision = revision
        self._changed()
        return revision

    async def _watch(self, revision: int) -> None:
        while True:
            try:
                async with asyncio.TaskGroup() as watches:
                    watches.create_task(self._follow(self._prefix, revision))
                    watches.create_task(self._follow(self.keys.topic(self.topic), revision))
            except* WatchCompactedError:
                log.warning("coordinator watch fell behind compaction; reloading")
            revision = await self._load_snapshot() + 1

    async def _follow(self, prefix: str, revision: int) -> None:
        async for batch in self.store.watch_prefix(prefix, revision):
            for event in batch.events:
                self._absorb(event.kind, event.kv)
            self._revision = max(self._revision, batch.revision)
            self._changed()

    def _absorb(self, kind: str, kv: KeyValue) -> None:
        if kv.mod_revision and kv.mod_revision <= self._revs.get(kv.key, 0):
            return
        self._revs[kv.key] = kv.mod_revision
        try:
            if kv.key == self.keys.topic(self.topic):
                count = None if kind == "delete" else len(decode_value(kv.value)["partitions"])
                self.partition_count = count
                self.host.partition_count = count
            elif (member := self.keys.parse_coordinator_key(kv.key)) is not None:
                if kind == "delete":
                    self.members.pop(member, None)
                else:
                    v = decode_value(kv.value)
                    self.members[member] = Member(member, str(v["host"]), int(v["port"]))
            elif (partition := self.keys.parse_coordinator_owner_key(kv.key)) is not None:
                if kind == "delete":
                    self.owners.pop(partition, None)
                else:
                    v = decode_value(kv.value)
                    self.owners[partition] = Owner(
                        int(v["coordinator_id"]), int(v["epoch"]), kv.value, kv.lease
                    )
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring a malformed coordinator key", key=kv.key, error=str(exc))

    def _changed(self) -> None:
        self._wanted.set()
        try:
            self.on_change()
        except Exception:
            log.exception("ownership listener failed")

    # --- placement -----------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        backoff = _BACKOFF_S
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            try:
                await self._reconcile()
                backoff = _BACKOFF_S
            except (EtcdUnavailableError, StromError) as exc:
                log.warning("placement failed; will retry", error=str(exc))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)
                self._wanted.set()

    async def _reconcile(self) -> None:
        me = self.coordinator_id
        # Partitions whose key is no longer ours (lease lost, deleted): stop serving them.
        for partition in list(self._owned):
            owner = self.owners.get(partition)
            if owner is None or owner.coordinator_id != me or owner.lease != self._lease:
                log.warning("ownership key lost; unloading", partition=partition)
                self._drop(partition)
        count = self.partition_count
        if not self._lease or count is None or me not in self.members:
            return
        live = frozenset(self.members)
        for partition in range(count):
            target = preferred(live, partition)
            owner = self.owners.get(partition)
            if owner is None and target == me:
                await self._claim(partition)
            elif partition in self._owned and target != me:
                await self._release(partition, f"coordinator {target} is preferred")

    async def _claim(self, partition: int) -> None:
        key = self.keys.coordinator_owner(partition)
        # The epoch grows with each claim: above the revision that showed the key absent.
        value = encode_value({"coordinator_id": self.coordinator_id, "epoch": self._revision + 1})
        txn = await self.store.txn([Compare.absent(key)], [Put(key, value, self._lease)])
        if not txn.succeeded:
            return  # someone else was quicker; the watch brings its key
        self._absorb("put", KeyValue(key, value, txn.revision, txn.revision, self._lease))
        log.info("partition claimed", partition=partition, revision=txn.revision)
        self.host.begin_loading(partition)
        self._owned[partition] = asyncio.create_task(
            self._load(partition), name=f"coordinator-load-{partition}"
        )
        self._changed()

    async def _release(self, partition: int, reason: str) -> None:
        owner = self.owners.get(partition)
        self._drop(partition)
        if owner is not None and owner.coordinator_id == self.coordinator_id:
            key = self.keys.coordinator_owner(partition)
            txn = await self.store.txn([Compare.value_equals(key, owner.raw)], [Delete(key)])
            if txn.succeeded:
                self._absorb("delete", KeyValue(key, b"", 0, txn.revision))
        log.info("partition released", partition=partition, reason=reason)
        self._changed()

    def _drop(self, partition: int) -> None:
        """Stop serving ``partition`` (unload, stop writing) without touching etcd."""
        task = self._owned.pop(partition, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._loaded.discard(partition)
        self.log.close(partition)
        self.host.unload(partition)

    def _drop_all(self) -> None:
        for partition in list(self._owned):
            self._drop(partition)

    def fenced(self, partition: int) -> None:
        """The offsets log saw another owner's epoch: give the partition up."""
        if partition in self._owned:
            self._release_later(partition, "fenced")

    def _release_later(self, partition: int, reason: str) -> None:
        task = asyncio.get_running_loop().create_task(self._release(partition, reason))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    # --- taking a partition over ---------------------------------------------------------

    async def _load(self, partition: int) -> None:
        backoff = _BACKOFF_S
        tp = TopicPartition(self.topic, partition)
        while self._owned.get(partition) is asyncio.current_task():
            started = time.monotonic()
            try:
                producer_id, epoch = await self.init_producer(partition)
                self.log.open(partition, producer_id, epoch)
                await self.log.append(partition, [ownership_marker(self.coordinator_id, epoch)])
                count = await read_partition(
                    self.cluster,
                    tp,
                    lambda k, v, ts: self.host.replay(partition, k, v, ts),
                    timeout_s=self.request_timeout_s,
                )
            except NotCoordinatorError as exc:
                log.warning("fenced while taking over", partition=partition, error=str(exc))
                self._release_later(partition, "fenced")
                return
            except Exception as exc:
                if isinstance(exc, StromError):
                    log.warning("taking over failed; retrying", partition=partition,
                                error=str(exc))  # fmt: skip
                else:
                    log.exception("taking over failed; retrying", partition=partition)
                self.log.close(partition)
                self.host.unload(partition)
                self.host.begin_loading(partition)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)
                continue
            self.host.finish_loading(partition)
            self._loaded.add(partition)
            log.info("partition loaded", partition=partition, records=count,
                     producer_id=producer_id, producer_epoch=epoch,
                     seconds=round(time.monotonic() - started, 3))  # fmt: skip
            self._changed()
            return

    async def init_producer(self, partition: int) -> tuple[int, int]:
        """InitProducerId for the partition's transactional id through the gateway: the same
        producer id with a bumped epoch (retried while retriable, within the request timeout)."""
        request = controller_pb2.InitProducerIdRequest(
            transactional_id=transactional_id(partition), producer_id=-1, producer_epoch=-1
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.request_timeout_s
        backoff = _BACKOFF_S
        while True:
            try:
                response = await self.cluster.gateway.InitProducerId(
                    request, timeout=max(0.1, deadline - loop.time())
                )
                if response.error_code:
                    raise for_code(response.error_code, response.error_message)
                return int(response.producer_id), int(response.producer_epoch)
            except grpc.RpcError as exc:
                error = from_rpc_error(exc, self.cluster.gateway_address)
            except StromError as exc:
                error = exc
            if not error.retriable or loop.time() + backoff > deadline:
                raise error
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)
