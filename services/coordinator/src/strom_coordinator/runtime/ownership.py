"""Which coordinator serves which partition of an internal topic (``__consumer_offsets``,
``__transaction_state``), decided through etcd.

Registration and the watch of ``P/coordinators/`` are shared by every topic
(``registration.CoordinatorRegistration``); a ``PartitionOwnership`` per topic holds its owner
keys (``TopicOwnership``: ``P/coordinators/owners/<p>`` or ``P/coordinators/txn_owners/<p>``).

Placement: every partition has one preferred coordinator among the live ones, by rendezvous
(highest-random-weight) hashing of (coordinator id, partition), so that a coordinator joining
or leaving moves only the partitions it wins or held. Reacting to the watch (no polling), each
instance:

* claims each partition without an owner it is preferred for: a create-if-absent transaction
  of the owner key = {"coordinator_id", "epoch"} on its lease (an owner that died loses the key
  with its lease, so its partitions become claimable);
* releases each partition it owns whose preferred coordinator is another live instance:
  unload first, then delete the key (guarded by its value), and the preferred one claims it.

Taking a partition over (``_load``): the host answers COORDINATOR_LOAD_IN_PROGRESS for its
keys; InitProducerId for the topic's fencing transactional id (``__strom_coordinator-offsets-<p>``
or ``__strom_coordinator-transactions-<p>``) bumps the partition's producer epoch, which fences
the previous owner on the storage nodes (its next write fails with INVALID_PRODUCER_EPOCH, see
``writer``); an ownership marker is written with acks=all under the new epoch; then every
record up to the high watermark is replayed into the host, and the partition is served.
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
from strom.cluster.retry import Backoff
from strom.errors import NotCoordinatorError, StromError, for_code
from strom.protocol.v1 import controller_pb2
from strom.types import TopicPartition
from strom_coordinator.config import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from strom_coordinator.runtime.loader import read_partition
from strom_coordinator.runtime.registration import CoordinatorRegistration, Member
from strom_coordinator.runtime.writer import InternalTopicWriter
from strom_server.etcd.keys import ClusterKeys, decode_value, encode_value
from strom_server.etcd.store import Compare, Delete, EtcdUnavailableError, KeyValue, Put
from strom_server.runtime.logs import get_logger

__all__ = [
    "Member",
    "Owner",
    "PartitionHost",
    "PartitionOwnership",
    "TopicOwnership",
    "init_producer_id",
    "offsets_ownership",
    "preferred",
    "transaction_ownership",
    "transaction_state_id",
    "transactional_id",
]

log = get_logger(__name__)

_BACKOFF_S = 0.1
_BACKOFF_MAX_S = 2.0

Record = tuple[bytes, bytes | None]


class PartitionHost(Protocol):
    """The load life cycle of the hosted partitions (``partitions.hosting.HostedPartitions``
    implements it; ``GroupManager`` and ``TransactionManager`` hand it to their own through
    ``partitions.hosting.HostedShard``)."""

    partition_count: int | None

    def begin_loading(self, partition: int) -> None: ...
    def replay(
        self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int
    ) -> None: ...
    def finish_loading(self, partition: int) -> None: ...
    def unload(self, partition: int) -> None: ...


@dataclass(frozen=True)
class Owner:
    """The value of an owner key and the lease it lives on."""

    coordinator_id: int
    epoch: int
    raw: bytes
    lease: int


@dataclass(frozen=True)
class TopicOwnership:
    """What differs between the internal topics: their owner keys, the transactional id whose
    producer epoch fences a partition's writers, and the ownership marker record."""

    topic: str
    owner_key: Callable[[int], str]
    parse_owner_key: Callable[[str], int | None]
    fencing_id: Callable[[int], str]
    marker: Callable[[int, int], Record]


def transactional_id(partition: int) -> str:
    """The transactional id whose producer epoch fences writers of ``__consumer_offsets``
    partition ``partition``."""
    return f"__strom_coordinator-offsets-{partition}"


def transaction_state_id(partition: int) -> str:
    """The same for ``__transaction_state`` partition ``partition``."""
    return f"__strom_coordinator-transactions-{partition}"


def offsets_ownership(keys: ClusterKeys, marker: Callable[[int, int], Record]) -> TopicOwnership:
    """``__consumer_offsets``: ``marker`` is the group shard's ownership marker record."""
    return TopicOwnership(
        OFFSETS_TOPIC,
        keys.coordinator_owner,
        keys.parse_coordinator_owner_key,
        transactional_id,
        marker,
    )


def transaction_ownership(
    keys: ClusterKeys, marker: Callable[[int, int], Record]
) -> TopicOwnership:
    """``__transaction_state``: ``marker`` is the transaction shard's ownership marker record."""
    return TopicOwnership(
        TRANSACTION_STATE_TOPIC,
        keys.transaction_owner,
        keys.parse_transaction_owner_key,
        transaction_state_id,
        marker,
    )


def _weight(coordinator_id: int, partition: int) -> int:
    digest = hashlib.blake2b(f"{coordinator_id}/{partition}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def preferred(live: set[int] | frozenset[int], partition: int) -> int | None:
    """The live coordinator that should serve ``partition`` (rendezvous hashing), None if none."""
    if not live:
        return None
    return max(live, key=lambda c: (_weight(c, partition), c))


class PartitionOwnership:
    """Placement and take-over of one internal topic's partitions (see the module docstring).
    Not thread-safe: one event loop."""

    def __init__(
        self,
        registration: CoordinatorRegistration,
        spec: TopicOwnership,
        host: PartitionHost,
        writer: InternalTopicWriter,
        cluster: ClusterClient,
        *,
        request_timeout_s: float,
    ) -> None:
        self.registration = registration
        self.spec = spec
        self.topic = spec.topic
        self.host = host
        self.log = writer
        self.cluster = cluster
        self.coordinator_id = registration.coordinator_id
        self.request_timeout_s = request_timeout_s
        self.owners: dict[int, Owner] = {}
        self.partition_count: int | None = None
        self.on_change: Callable[[], None] = lambda: None
        """Called after every change of members, owners or the partition count."""
        self.on_loaded: Callable[[int], None] = lambda partition: None
        """Called once a partition is loaded and served."""
        self._owned: dict[int, asyncio.Task[None]] = {}
        self._loaded: set[int] = set()
        self._wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._releases: set[asyncio.Task[None]] = set()
        registration.attach(self)

    # --- life cycle ----------------------------------------------------------------------

    @property
    def members(self) -> dict[int, Member]:
        """The live coordinators."""
        return self.registration.members

    def owned(self) -> set[int]:
        """Partitions this instance holds the ownership key of (loaded or loading)."""
        return set(self._owned)

    def loaded(self) -> set[int]:
        """Partitions this instance serves (loaded)."""
        return set(self._loaded)

    def owner_epoch(self, partition: int) -> int | None:
        """This instance's owner epoch of ``partition`` (None when it does not own it)."""
        owner = self.owners.get(partition)
        if owner is None or partition not in self._owned:
            return None
        return owner.epoch

    def start(self) -> None:
        """Start placing partitions (after the registration started)."""
        self._task = asyncio.create_task(
            self._reconcile_loop(), name=f"coordinator-placement-{self.topic}"
        )
        self._wanted.set()

    async def close(self) -> None:
        """Stop placing and serving (the registration revokes the lease afterwards)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self.drop_all()

    # --- the registration's view ---------------------------------------------------------

    def absorb(self, kind: str, kv: KeyValue) -> bool:
        keys = self.registration.keys
        if kv.key == keys.topic(self.topic):
            count = None if kind == "delete" else len(decode_value(kv.value)["partitions"])
            self.partition_count = count
            self.host.partition_count = count
            return True
        partition = self.spec.parse_owner_key(kv.key)
        if partition is None:
            return False
        if kind == "delete":
            self.owners.pop(partition, None)
        else:
            v = decode_value(kv.value)
            self.owners[partition] = Owner(
                int(v["coordinator_id"]), int(v["epoch"]), kv.value, kv.lease
            )
        return True

    def reset(self) -> None:
        self.owners.clear()

    def changed(self) -> None:
        self._wanted.set()
        try:
            self.on_change()
        except Exception:
            log.exception("ownership listener failed")

    # --- placement -----------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            try:
                await self._reconcile()
                backoff.reset()
                continue
            except (EtcdUnavailableError, StromError) as exc:
                log.warning("placement failed; will retry", topic=self.topic, error=str(exc))
            except Exception:
                # Never let placement stop for good: etcd refuses a claim made on a lease that
                # expired while the claim waited out a partition (NOT_FOUND), and the next
                # round claims on the new lease.
                log.exception("placement failed; will retry", topic=self.topic)
            await backoff.sleep()
            self._wanted.set()

    async def _reconcile(self) -> None:
        me = self.coordinator_id
        lease = self.registration.lease
        # Partitions whose key is no longer ours (lease lost, deleted): stop serving them.
        for partition in list(self._owned):
            owner = self.owners.get(partition)
            if owner is None or owner.coordinator_id != me or owner.lease != lease:
                log.warning("ownership key lost; unloading", topic=self.topic,
                            partition=partition)  # fmt: skip
                self._drop(partition)
        count = self.partition_count
        if not lease or count is None or me not in self.members:
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
        registration = self.registration
        key = self.spec.owner_key(partition)
        # The epoch grows with each claim: above the revision that showed the key absent.
        epoch = registration.revision + 1
        value = encode_value({"coordinator_id": self.coordinator_id, "epoch": epoch})
        store = registration.store
        txn = await store.txn([Compare.absent(key)], [Put(key, value, registration.lease)])
        if not txn.succeeded:
            return  # someone else was quicker; the watch brings its key
        registration.absorb(
            "put", KeyValue(key, value, txn.revision, txn.revision, registration.lease)
        )
        log.info("partition claimed", topic=self.topic, partition=partition,
                 revision=txn.revision)  # fmt: skip
        self.host.begin_loading(partition)
        self._owned[partition] = asyncio.create_task(
            self._load(partition), name=f"coordinator-load-{self.topic}-{partition}"
        )
        self.changed()

    async def _release(self, partition: int, reason: str) -> None:
        owner = self.owners.get(partition)
        self._drop(partition)
        if owner is not None and owner.coordinator_id == self.coordinator_id:
            key = self.spec.owner_key(partition)
            store = self.registration.store
            txn = await store.txn([Compare.value_equals(key, owner.raw)], [Delete(key)])
            if txn.succeeded:
                self.registration.absorb("delete", KeyValue(key, b"", 0, txn.revision))
        log.info("partition released", topic=self.topic, partition=partition, reason=reason)
        self.changed()

    def _drop(self, partition: int) -> None:
        """Stop serving ``partition`` (unload, stop writing) without touching etcd."""
        task = self._owned.pop(partition, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._loaded.discard(partition)
        self.log.close(partition)
        self.host.unload(partition)

    def drop_all(self) -> None:
        for partition in list(self._owned):
            self._drop(partition)

    def fenced(self, partition: int) -> None:
        """The log (or a partition leader) saw another owner: give the partition up."""
        if partition in self._owned:
            self._release_later(partition, "fenced")

    def _release_later(self, partition: int, reason: str) -> None:
        task = asyncio.get_running_loop().create_task(self._release(partition, reason))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    # --- taking a partition over ---------------------------------------------------------

    async def _load(self, partition: int) -> None:
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        tp = TopicPartition(self.topic, partition)
        while self._owned.get(partition) is asyncio.current_task():
            started = time.monotonic()
            try:
                producer_id, epoch = await self.init_producer(partition)
                self.log.open(partition, producer_id, epoch)
                await self.log.append(partition, [self.spec.marker(self.coordinator_id, epoch)])
                count = await read_partition(
                    self.cluster,
                    tp,
                    lambda k, v, ts: self.host.replay(partition, k, v, ts),
                    timeout_s=self.request_timeout_s,
                )
            except NotCoordinatorError as exc:
                log.warning("fenced while taking over", topic=self.topic, partition=partition,
                            error=str(exc))  # fmt: skip
                self._release_later(partition, "fenced")
                return
            except Exception as exc:
                if isinstance(exc, StromError):
                    log.warning("taking over failed; retrying", topic=self.topic,
                                partition=partition, error=str(exc))  # fmt: skip
                else:
                    log.exception("taking over failed; retrying", topic=self.topic,
                                  partition=partition)  # fmt: skip
                self.log.close(partition)
                self.host.unload(partition)
                self.host.begin_loading(partition)
                await backoff.sleep()
                continue
            self.host.finish_loading(partition)
            self._loaded.add(partition)
            log.info("partition loaded", topic=self.topic, partition=partition, records=count,
                     producer_id=producer_id, producer_epoch=epoch,
                     seconds=round(time.monotonic() - started, 3))  # fmt: skip
            self.changed()
            try:
                self.on_loaded(partition)
            except Exception:
                log.exception("partition-loaded listener failed", topic=self.topic)
            return

    async def init_producer(self, partition: int) -> tuple[int, int]:
        """InitProducerId for the partition's fencing transactional id through the gateway:
        the same producer id with a bumped epoch (retried while retriable, within the request
        timeout). ``NotCoordinatorError`` instead when this instance no longer holds the
        partition or its etcd session lapsed: bumping the epoch fences the current owner, and a
        deposed coordinator resuming from a pause (its writer re-initialising after a failed
        write) would otherwise fence its successor and land its own late writes."""
        owner = self.owners.get(partition)
        session = self.registration.session
        if (
            partition not in self._owned
            or session.expired()
            or (owner is not None and owner.coordinator_id != self.coordinator_id)
        ):
            raise NotCoordinatorError(
                f"coordinator {self.coordinator_id} no longer holds {self.topic}-{partition}"
            )
        return await init_producer_id(
            self.cluster, self.spec.fencing_id(partition), self.request_timeout_s
        )


async def init_producer_id(
    cluster: ClusterClient, transactional_id: str, timeout_s: float
) -> tuple[int, int]:
    """InitProducerId through the gateway (an empty or ``__strom_`` id goes to the controller):
    (producer id, epoch), retried while retriable within ``timeout_s``."""
    request = controller_pb2.InitProducerIdRequest(
        transactional_id=transactional_id, producer_id=-1, producer_epoch=-1
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
    while True:
        try:
            response = await cluster.gateway.InitProducerId(
                request, timeout=max(0.1, deadline - loop.time())
            )
            if response.error_code:
                raise for_code(response.error_code, response.error_message)
            return int(response.producer_id), int(response.producer_epoch)
        except grpc.RpcError as exc:
            error = from_rpc_error(exc, cluster.gateway_address)
        except StromError as exc:
            error = exc
        delay = backoff.next()
        if not error.retriable or loop.time() + delay > deadline:
            raise error
        await asyncio.sleep(delay)
