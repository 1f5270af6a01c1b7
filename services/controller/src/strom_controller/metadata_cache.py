"""The controller's in-memory image of the cluster metadata, rebuilt from etcd and kept current
by one watch on the whole prefix.

Every controller (active or standby) keeps one: the standby answers Metadata from it and names
the active controller from it; the active controller's managers compute their effects against
it. Updates are revision-guarded per key (``apply`` ignores anything not newer than what it
holds), so the active controller can apply its own committed writes at once and the watch
delivering the same writes later changes nothing.

``CacheFeeder`` runs the load-then-watch loop and reloads from scratch on a compacted watch.

Thread-safety: one event loop; the managers read it synchronously between awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

from strom.errors import LeaderNotAvailableError
from strom_controller.keys import (
    BrokerRecord,
    ControllerRecord,
    KeyLayout,
    PartitionRecord,
    ReassignmentRecord,
    TopicRecord,
    decode,
)
from strom_controller.model import PartitionView, TopicView
from strom_controller.topic_names import is_internal
from strom_server.etcd.prefix_follower import PrefixFollower
from strom_server.etcd.store import EtcdStore, KeyValue, Op, Put, WatchBatch, WatchCompactedError
from strom_server.runtime.logs import get_logger

__all__ = ["CacheFeeder", "Change", "MetadataCache"]

log = get_logger(__name__)

Change = str
"""What a batch touched: "controller", "brokers", "topics", "partitions", "config",
"reassignments", "cluster", "producer_ids", "transactional_ids"."""

Listener = Callable[[set[Change]], None]


class MetadataCache:
    """Typed maps of everything under the prefix; ``revision`` is the last etcd revision seen."""

    def __init__(self, keys: KeyLayout) -> None:
        self.keys = keys
        self.revision = 0
        self.cluster_id = ""
        self.controller: ControllerRecord | None = None
        self.controller_raw: bytes | None = None
        self.controller_epoch = 0
        self.brokers: dict[int, BrokerRecord] = {}
        self.topics: dict[str, TopicRecord] = {}
        self.partitions: dict[tuple[str, int], PartitionRecord] = {}
        self.broker_config: dict[str, str] = {}
        self.reassignments: dict[tuple[str, int], ReassignmentRecord] = {}
        self.next_producer_id_block = 0
        self.transactional_ids: dict[str, tuple[int, int]] = {}
        """transactional id -> (producer id, producer epoch)"""
        self._revs: dict[str, int] = {}
        self._listeners: list[Listener] = []
        self._advanced = asyncio.Event()

    # --- queries -------------------------------------------------------------------------

    def live_brokers(self) -> dict[int, BrokerRecord]:
        return self.brokers

    def topic_view(self, name: str) -> TopicView:
        """What Metadata answers for the existing topic ``name``."""
        record = self.topics[name]
        live = self.live_brokers()
        partitions = []
        for p, replicas in sorted(record.partitions.items()):
            state = self.partitions.get((name, p)) or PartitionRecord(-1, 0, (), 0)
            error = (
                LeaderNotAvailableError(f"partition {name}-{p} has no leader")
                if state.leader == -1
                else None
            )
            partitions.append(
                PartitionView(
                    p,
                    state.leader,
                    state.leader_epoch,
                    replicas,
                    state.isr,
                    tuple(b for b in replicas if b not in live),
                    error,
                )
            )
        return TopicView(name, record.topic_id, is_internal(name), tuple(partitions))

    def partition_count(self, topic: str) -> int:
        record = self.topics.get(topic)
        return len(record.partitions) if record else 0

    def mod_revision(self, key: str) -> int:
        """The etcd revision of the last change to ``key`` this cache applied (0: none)."""
        return self._revs.get(key, 0)

    def topic_partitions(self, topic: str) -> list[tuple[int, tuple[int, ...]]]:
        record = self.topics.get(topic)
        return sorted(record.partitions.items()) if record else []

    # --- updates -------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def reset(self, kvs: Iterable[KeyValue], revision: int) -> None:
        """Replace everything with a full read taken at ``revision``."""
        self.cluster_id = ""
        self.controller = None
        self.controller_raw = None
        self.controller_epoch = 0
        self.brokers.clear()
        self.topics.clear()
        self.partitions.clear()
        self.broker_config = {}
        self.reassignments.clear()
        self.next_producer_id_block = 0
        self.transactional_ids.clear()
        self._revs.clear()
        for kv in kvs:
            self._put(kv.key, kv.value, kv.mod_revision, kv.create_revision)
        self.revision = revision
        self._notify(
            {"controller", "brokers", "topics", "partitions", "config", "reassignments", "cluster"}
        )

    def apply_ops(self, ops: Iterable[Op], revision: int) -> None:
        """Apply a committed transaction's operations (the active controller's own writes)."""
        changes: set[Change] = set()
        for op in ops:
            if isinstance(op, Put):
                kind = self._put(op.key, op.value, revision, revision)
            elif op.prefix:
                kind = None
                for key in [k for k in self._revs if k.startswith(op.key)]:
                    kind = self._delete(key, revision) or kind
            else:
                kind = self._delete(op.key, revision)
            if kind:
                changes.add(kind)
        self.revision = max(self.revision, revision)
        self._notify(changes)

    def apply_events(self, events: Iterable[tuple[str, KeyValue]], revision: int) -> None:
        changes: set[Change] = set()
        for kind, kv in events:
            if kind == "put":
                change = self._put(kv.key, kv.value, kv.mod_revision, kv.create_revision)
            else:
                change = self._delete(kv.key, kv.mod_revision)
            if change:
                changes.add(change)
        self.revision = max(self.revision, revision)
        self._notify(changes)

    async def wait_for_revision(self, revision: int) -> None:
        while self.revision < revision:
            self._advanced.clear()
            await self._advanced.wait()

    def _notify(self, changes: set[Change]) -> None:
        self._advanced.set()
        if not changes:
            return
        for listener in list(self._listeners):
            try:
                listener(changes)
            except Exception:
                log.exception("metadata listener failed")

    def _put(
        self, key: str, value: bytes, mod_revision: int, create_revision: int
    ) -> Change | None:
        if mod_revision <= self._revs.get(key, 0):
            return None
        self._revs[key] = mod_revision
        try:
            return self._decode_put(key, value, create_revision)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring a malformed metadata value", key=key, error=str(exc))
            return None

    def _decode_put(self, key: str, value: bytes, create_revision: int) -> Change | None:
        k = self.keys
        if key == k.controller_leader:
            self.controller = ControllerRecord.from_json(value)
            self.controller_raw = value
            return "controller"
        if key == k.controller_epoch:
            self.controller_epoch = int(decode(value)["epoch"])
            return "controller"
        if key == k.cluster_id:
            self.cluster_id = str(decode(value)["cluster_id"])
            return "cluster"
        if key == k.broker_config:
            self.broker_config = {str(n): str(v) for n, v in decode(value).items()}
            return "config"
        if key == k.producer_ids:
            self.next_producer_id_block = int(decode(value)["next"])
            return "producer_ids"
        if key.startswith(k.transactional_ids):
            tid = k.shared.parse_transactional_id_key(key)
            if tid is None:
                return None
            v = decode(value)
            self.transactional_ids[tid] = (int(v["producer_id"]), int(v["producer_epoch"]))
            return "transactional_ids"
        if key.startswith(k.brokers):
            rest = key[len(k.brokers) :]
            if rest.isdigit():
                self.brokers[int(rest)] = BrokerRecord.from_json(value, epoch=create_revision)
                return "brokers"
            return None
        if key.startswith(k.topics):
            name = key[len(k.topics) :]
            if name and "/" not in name:
                self.topics[name] = TopicRecord.from_json(value)
                return "topics"
            return None
        if key.startswith(k.partitions):
            tp = k.split_topic_partition(key[len(k.partitions) :])
            if tp:
                self.partitions[tp] = PartitionRecord.from_json(value)
                return "partitions"
            return None
        if key.startswith(k.reassignments):
            tp = k.split_topic_partition(key[len(k.reassignments) :])
            if tp:
                self.reassignments[tp] = ReassignmentRecord.from_json(value)
                return "reassignments"
        return None

    def _delete(self, key: str, mod_revision: int) -> Change | None:
        if mod_revision <= self._revs.get(key, 0):
            return None
        self._revs[key] = mod_revision  # a tombstone: older puts must not resurrect the key
        k = self.keys
        if key == k.controller_leader:
            self.controller = None
            self.controller_raw = None
            return "controller"
        if key == k.broker_config:
            self.broker_config = {}
            return "config"
        if key.startswith(k.transactional_ids):
            tid = k.shared.parse_transactional_id_key(key)
            found = tid is not None and self.transactional_ids.pop(tid, None) is not None
            return "transactional_ids" if found else None
        if key.startswith(k.brokers):
            rest = key[len(k.brokers) :]
            if rest.isdigit() and self.brokers.pop(int(rest), None) is not None:
                return "brokers"
            return None
        if key.startswith(k.topics):
            return "topics" if self.topics.pop(key[len(k.topics) :], None) else None
        if key.startswith(k.partitions):
            tp = k.split_topic_partition(key[len(k.partitions) :])
            return "partitions" if tp and self.partitions.pop(tp, None) else None
        if key.startswith(k.reassignments):
            tp = k.split_topic_partition(key[len(k.reassignments) :])
            return "reassignments" if tp and self.reassignments.pop(tp, None) else None
        return None


class CacheFeeder:
    """Loads the cache from etcd, then follows the watch; reloads after a compaction."""

    def __init__(self, store: EtcdStore, cache: MetadataCache) -> None:
        self._cache = cache
        self._follower = PrefixFollower(
            store,
            cache.keys.root,
            on_snapshot=self._reset,
            on_batch=self._apply,
            on_compacted=self._compacted,
        )
        self._task: asyncio.Task[None] | None = None
        self._loaded = asyncio.Event()

    async def start(self) -> None:
        """Start following etcd; returns once the first full load is in the cache."""
        self._task = asyncio.create_task(self._run(), name="metadata-cache-feeder")
        loaded = asyncio.create_task(self._loaded.wait())
        done, _ = await asyncio.wait({self._task, loaded}, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            loaded.cancel()
            self._task.result()  # re-raise why it stopped

    async def _run(self) -> None:
        while True:
            try:
                await self._follower.run()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("metadata watch failed, reloading in 1 s")
                await asyncio.sleep(1.0)

    def _reset(self, kvs: list[KeyValue], revision: int) -> None:
        self._cache.reset(kvs, revision)
        log.info("metadata loaded", revision=revision, keys=len(kvs))
        self._loaded.set()

    def _apply(self, batch: WatchBatch) -> None:
        self._cache.apply_events(((e.kind, e.kv) for e in batch.events), batch.revision)

    def _compacted(self, exc: WatchCompactedError) -> None:
        log.warning("metadata watch compacted, reloading", error=str(exc))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
