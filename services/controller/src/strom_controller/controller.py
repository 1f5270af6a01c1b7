"""The controller runtime: metadata cache, election, and the managers, behind one async API.

Each admin call checks that this controller is active, then, under one write lock, asks a
manager for a ``ControllerResult`` computed against the cache, commits its effects in an etcd
transaction guarded by the election key (``ControllerElection.fence``), applies them to the
cache, and returns per-item ``Outcome``s. A refused guard means this controller was deposed:
it steps down and the item fails with NOT_CONTROLLER naming the active controller.

On becoming active it waits until its cache holds everything up to its election revision,
creates ``P/cluster/id`` and seeds ``P/config/brokers`` if absent, reconciles every partition
with the live brokers (brokers may have died while no controller was active), and only then
serves. Afterwards any change of the broker set, partition states or reassignments schedules a
reconciliation (leader moves, ISR shrinks, reassignment completions). While active, and with
``auto.leader.rebalance.enable``, its ``LeaderBalancer`` checks the leader imbalance every
``leader.imbalance.check.interval.seconds`` and runs preferred elections where it is too high
(``leader_balancer``).

Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

from strom.errors import (
    BrokerResponseError,
    InvalidRequestError,
    InvalidTopicError,
    NotControllerError,
    RequestTimedOutError,
    StromError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from strom_controller.config import ControllerConfig
from strom_controller.election import ControllerElection
from strom_controller.keys import ControllerRecord, KeyLayout, PartitionRecord, encode
from strom_controller.leader_balancer import LeaderBalancer
from strom_controller.managers.brokers import BrokerTracker
from strom_controller.managers.configs import ConfigManager
from strom_controller.managers.producer_ids import MAX_PRODUCER_EPOCH, ProducerIdManager
from strom_controller.managers.reassignment import ReassignmentManager
from strom_controller.managers.replication import ReplicationManager
from strom_controller.managers.result import MAX_TXN_OPS, ControllerResult
from strom_controller.managers.topics import TopicDefaults, TopicManager
from strom_controller.managers.transactional_ids import TransactionalIdManager
from strom_controller.membership import controller_membership
from strom_controller.metadata_cache import CacheFeeder, Change, MetadataCache
from strom_controller.model import (
    AlterConfigOp,
    AlterPartitionItem,
    ConfigResourceRef,
    ConfigValue,
    CreatedTopic,
    MetadataView,
    NewPartitions,
    NewTopicSpec,
    OngoingReassignment,
    Outcome,
    TopicView,
)
from strom_controller.topic_names import validate_topic_name
from strom_server.etcd.lease_registration import LeaseRegistration
from strom_server.etcd.store import Compare, EtcdStore, EtcdUnavailableError, KeyValue, Put
from strom_server.runtime.clock import Clock, SystemClock
from strom_server.runtime.logs import get_logger

__all__ = ["Controller"]

#: How long a refusal waits for etcd to name the active controller before it names the
#: metadata cache's: a refusal must stay quick while etcd is unreachable.
_REFUSAL_READ_S = 0.5

log = get_logger(__name__)

T = TypeVar("T")


class Controller:
    """One controller process's domain object (see the module docstring)."""

    def __init__(
        self,
        config: ControllerConfig,
        *,
        store: EtcdStore | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.keys = KeyLayout(config.etcd_prefix)
        self.store = store or EtcdStore(
            config.etcd_endpoints,
            clock=self.clock,
            backoff_max_s=config.etcd_retry_backoff_max_ms / 1000,
        )
        self.cache = MetadataCache(self.keys)
        self._feeder = CacheFeeder(self.store, self.cache)
        self.topics = TopicManager(
            self.keys, TopicDefaults(config.num_partitions, config.default_replication_factor)
        )
        self.configs = ConfigManager(
            self.keys,
            {
                "auto.create.topics.enable": str(config.auto_create_topics_enable).lower(),
                "num.partitions": str(config.num_partitions),
                "default.replication.factor": str(config.default_replication_factor),
            },
        )
        self.replication = ReplicationManager(self.keys)
        self.reassignments = ReassignmentManager(self.keys)
        self.producer_ids = ProducerIdManager(self.keys)
        self.transactional_ids = TransactionalIdManager(self.keys)
        self._brokers = BrokerTracker()
        self._write_lock = asyncio.Lock()
        self._serving = False
        self._election: ControllerElection | None = None
        self._membership: LeaseRegistration | None = None
        self._reconcile_wanted = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.leader_balancer = LeaderBalancer(
            config,
            self.cache,
            self.replication,
            admin=self._admin,
            is_active=lambda: self.is_active,
            clock=self.clock,
        )

    # --- life cycle ----------------------------------------------------------------------

    async def start(self, host: str, port: int) -> None:
        """Load the metadata, then campaign as ``host:port`` in the background."""
        await self._feeder.start()
        self._brokers.observe(self.cache.brokers)
        self.cache.add_listener(self._on_change)
        self._election = ControllerElection(
            self.store,
            self.keys,
            self.cache,
            controller_id=self.config.controller_id,
            host=host,
            port=port,
            ttl_s=self.config.lease_ttl_s,
            on_elected=self._on_elected,
            on_deposed=self._on_deposed,
            clock=self.clock,
            backoff_max_s=self.config.etcd_retry_backoff_max_ms / 1000,
        )
        self._membership = controller_membership(
            self.store,
            self.keys.shared,
            controller_id=self.config.controller_id,
            host=host,
            port=port,
            ttl_s=self.config.lease_ttl_s,
            clock=self.clock,
        )
        self._tasks = [
            asyncio.create_task(self._election.run(), name="controller-election"),
            asyncio.create_task(self._reconcile_loop(), name="controller-reconcile"),
            asyncio.create_task(self._membership.run(), name="controller-membership"),
        ]

    async def close(self) -> None:
        """Stop campaigning first (so it cannot win again), then resign: the leader key goes
        at once and a standby takes over without waiting for the lease to expire."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._election is not None:
            await self._election.resign()
        if self._membership is not None:
            await self._membership.close()
        balancer = self.leader_balancer.stop()
        if balancer is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await balancer
        await self._feeder.stop()
        await self.store.close()

    @property
    def election(self) -> ControllerElection:
        if self._election is None:
            raise RuntimeError("the controller has not started")
        return self._election

    @property
    def is_active(self) -> bool:
        return self._serving and self._election is not None and self._election.leading

    async def _require_active(self) -> None:
        """Raise NotControllerError unless active, naming the active controller as etcd has it
        now: the metadata cache of a controller that was paused may not have seen the
        takeover yet (it read "no controller is active" or itself)."""
        if self.is_active:
            return
        if self._election is None:
            raise NotControllerError("the controller is starting")
        try:
            current = await self.store.get(
                self.keys.controller_leader, retry=False, timeout_s=_REFUSAL_READ_S
            )
        except StromError:  # etcd did not answer: the cache's view is all there is
            active = self.cache.controller
        else:
            active = _leader_of(current)
        raise NotControllerError(self._election.not_controller_message(active))

    # --- activation ----------------------------------------------------------------------

    async def _on_elected(self, revision: int) -> None:
        async with asyncio.timeout(self.config.lease_ttl_s):
            await self.cache.wait_for_revision(revision)
        async with self._write_lock:
            self.producer_ids.reset()
            if not self.cache.cluster_id:
                cluster_id = str(uuid.uuid4())
                await self._commit_if_absent(
                    self.keys.cluster_id, encode({"cluster_id": cluster_id})
                )
                log.info("cluster id created", cluster_id=self.cache.cluster_id)
            defaults = self.config.broker_topic_defaults()
            if defaults and self.cache.mod_revision(self.keys.broker_config) == 0:
                await self._commit_if_absent(self.keys.broker_config, encode(defaults))
            await self._reconcile_locked()
        self._serving = True
        log.info("serving as the active controller", controller_id=self.config.controller_id,
                 epoch=self.election.record.epoch if self.election.record else None)  # fmt: skip
        self.leader_balancer.stop()
        if self.config.auto_leader_rebalance_enable:
            self.leader_balancer.start()

    async def _commit_if_absent(self, key: str, value: bytes) -> None:
        result: ControllerResult[None] = ControllerResult(
            [Put(key, value)], None, [Compare.absent(key)]
        )
        try:
            await self._commit(result)
        except UnknownServerError:  # created meanwhile by someone else: fine
            kvs, revision = await self.store.get_prefix(key)
            self.cache.apply_events((("put", kv) for kv in kvs if kv.key == key), revision)

    def _on_deposed(self, reason: str) -> None:
        self._serving = False
        self.leader_balancer.stop()

    # --- reacting to changes -------------------------------------------------------------

    def _on_change(self, changes: set[Change]) -> None:
        if "brokers" in changes:
            diff = self._brokers.observe(self.cache.brokers)
            for broker in diff.joined:
                record = self.cache.brokers[broker]
                log.info("broker registered", broker=broker, host=record.host, port=record.port,
                         rack=record.rack, broker_epoch=record.epoch)  # fmt: skip
            for broker in diff.restarted:
                log.info("broker re-registered", broker=broker,
                         broker_epoch=self.cache.brokers[broker].epoch)  # fmt: skip
            for broker in diff.left:
                log.warning("broker left (registration gone)", broker=broker)
        if changes & {"brokers", "partitions", "reassignments", "topics"}:
            self._reconcile_wanted.set()

    async def _reconcile_loop(self) -> None:
        while True:
            await self._reconcile_wanted.wait()
            self._reconcile_wanted.clear()
            if not self.is_active:
                continue
            try:
                async with self._write_lock:
                    await self._reconcile_locked()
            except (NotControllerError, EtcdUnavailableError, UnknownServerError) as exc:
                log.warning("reconciliation failed; will retry", error=str(exc))
                await self.clock.sleep(0.5)
                self._reconcile_wanted.set()
            except Exception:
                log.exception("reconciliation failed")
                await self.clock.sleep(0.5)
                self._reconcile_wanted.set()

    async def _reconcile_locked(self) -> None:
        for result in self.replication.reconcile(self.cache):
            await self._commit(result)
            topic, partition = self._partition_of(result)
            state = result.response
            if state is not None:
                log.info("partition state changed", topic=topic, partition=partition,
                         leader=state.leader, leader_epoch=state.leader_epoch,
                         isr=list(state.isr))  # fmt: skip
        for done in self.reassignments.completions(self.cache):
            await self._commit(done)
            log.info("reassignment completed", key=done.effects[0].key)

    def _partition_of(self, result: ControllerResult[PartitionRecord]) -> tuple[str, int]:
        key = result.effects[0].key
        tp = self.keys.split_topic_partition(key[len(self.keys.partitions) :])
        return tp if tp else ("?", -1)

    # --- committing ----------------------------------------------------------------------

    async def _commit(self, result: ControllerResult[T]) -> None:
        """Write ``result.effects`` guarded by the election key; the caller holds the lock."""
        if not result.effects:
            return
        election = self.election
        effects = result.effects
        for start in range(0, len(effects), MAX_TXN_OPS):
            chunk = effects[start : start + MAX_TXN_OPS]
            fence = election.fence()
            txn = await self.store.txn(
                [fence, *result.compares], chunk, deadline_s=self.config.lease_ttl_s
            )
            if not txn.succeeded:
                current = await self.store.get(self.keys.controller_leader, retry=False)
                if current is None or current.value != election.record_raw:
                    log.warning(
                        "metadata write refused by etcd: this controller was deposed (fenced)",
                        controller_id=self.config.controller_id,
                        epoch=election.record.epoch if election.record else None,
                    )
                    await election.step_down("a guarded write was fenced")
                    raise NotControllerError(election.not_controller_message(_leader_of(current)))
                raise UnknownServerError("the metadata changed concurrently; retry")
            self.cache.apply_ops(chunk, txn.revision)

    async def _admin(self, decide: Callable[[], ControllerResult[T]]) -> Outcome[T]:
        try:
            await self._require_active()
            async with self._write_lock:
                await self._require_active()
                result = decide()
                await self._commit(result)
            return Outcome(result.response)
        except BrokerResponseError as exc:
            return Outcome(error=exc)
        except EtcdUnavailableError as exc:
            return Outcome(error=RequestTimedOutError(f"etcd unreachable: {exc}"))

    # --- topics --------------------------------------------------------------------------

    async def create_topics(
        self, specs: Sequence[NewTopicSpec], *, validate_only: bool = False
    ) -> list[Outcome[CreatedTopic]]:
        counts: dict[str, int] = {}
        for spec in specs:
            counts[spec.name] = counts.get(spec.name, 0) + 1
        out: list[Outcome[CreatedTopic]] = []
        for spec in specs:
            if counts[spec.name] > 1:
                out.append(
                    Outcome(error=InvalidRequestError(f"topic '{spec.name}' is listed twice"))
                )
                continue
            outcome = await self._admin(
                functools.partial(self.topics.create, self.cache, spec, validate_only=validate_only)
            )
            if outcome.error is None and not validate_only:
                log.info("topic created", topic=spec.name)
                if "." in spec.name or "_" in spec.name:
                    log.warning(
                        "topic names with '.' or '_' may collide in metric names; avoid mixing "
                        "them",
                        topic=spec.name,
                    )
            out.append(outcome)
        return out

    async def delete_topics(self, names: Sequence[str]) -> list[Outcome[None]]:
        out: list[Outcome[None]] = []
        for name in names:
            outcome = await self._admin(functools.partial(self.topics.delete, self.cache, name))
            if outcome.error is None:
                log.info("topic deleted", topic=name)
            out.append(outcome)
        return out

    async def create_partitions(
        self, requests: Sequence[NewPartitions], *, validate_only: bool = False
    ) -> list[Outcome[None]]:
        return [
            await self._admin(
                functools.partial(
                    self.topics.create_partitions, self.cache, r, validate_only=validate_only
                )
            )
            for r in requests
        ]

    # --- configs -------------------------------------------------------------------------

    async def describe_configs(
        self, resources: Sequence[ConfigResourceRef]
    ) -> list[Outcome[list[ConfigValue]]]:
        try:
            await self._require_active()  # once: a refusal reads the leader key from etcd
        except NotControllerError as exc:
            return [Outcome(error=exc) for _ in resources]
        out: list[Outcome[list[ConfigValue]]] = []
        for resource in resources:
            try:
                out.append(Outcome(self.configs.describe(self.cache, resource)))
            except BrokerResponseError as exc:
                out.append(Outcome(error=exc))
        return out

    async def incremental_alter_configs(
        self,
        changes: Sequence[tuple[ConfigResourceRef, Sequence[AlterConfigOp]]],
        *,
        validate_only: bool = False,
    ) -> list[Outcome[None]]:
        return [
            await self._admin(
                functools.partial(
                    self.configs.alter, self.cache, r, ops, validate_only=validate_only
                )
            )
            for r, ops in changes
        ]

    # --- leaders, ISR, reassignments -----------------------------------------------------

    async def elect_leaders(
        self, election_type: str, partitions: Sequence[tuple[str, int]]
    ) -> list[tuple[str, int, Outcome[PartitionRecord]]]:
        if partitions:
            wanted = list(partitions)
        elif election_type == "preferred":
            wanted = self.replication.needs_preferred_election(self.cache)
        else:
            live = self.cache.live_brokers()
            wanted = [tp for tp, s in sorted(self.cache.partitions.items()) if s.leader not in live]
        out = []
        for topic, partition in wanted:
            outcome = await self._admin(
                functools.partial(
                    self.replication.elect, self.cache, topic, partition, election_type
                )
            )
            if outcome.error is None and outcome.value is not None:
                log.info("leader elected", topic=topic, partition=partition, type=election_type,
                         leader=outcome.value.leader)  # fmt: skip
            out.append((topic, partition, outcome))
        return out

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> list[Outcome[PartitionRecord]]:
        out = [
            await self._admin(
                functools.partial(
                    self.replication.alter_partition, self.cache, broker_id, broker_epoch, item
                )
            )
            for item in items
        ]
        self._reconcile_wanted.set()  # an ISR change may complete a reassignment
        return out

    async def alter_reassignments(
        self, items: Sequence[tuple[str, int, tuple[int, ...]]], throttle_bytes_per_sec: int
    ) -> list[Outcome[None]]:
        out = []
        for topic, partition, target in items:
            outcome = await self._admin(
                functools.partial(
                    self.reassignments.alter,
                    self.cache,
                    topic,
                    partition,
                    target,
                    throttle_bytes_per_sec,
                )
            )
            if outcome.error is None:
                log.info("reassignment " + ("started" if target else "cancelled"),
                         topic=topic, partition=partition, target=list(target))  # fmt: skip
            out.append(outcome)
        self._reconcile_wanted.set()
        return out

    async def list_reassignments(
        self, partitions: Sequence[tuple[str, int]]
    ) -> list[OngoingReassignment]:
        await self._require_active()
        return self.reassignments.list(self.cache, partitions)

    # --- producer ids --------------------------------------------------------------------

    async def init_producer_id(
        self, producer_id: int, producer_epoch: int, transactional_id: str = ""
    ) -> Outcome[tuple[int, int]]:
        """A new producer id at epoch 0, the epoch after ``producer_epoch`` for an existing
        id, or, with a ``transactional_id``, that id's one producer id with its epoch bumped
        (stored in etcd: fences the id's previous user on the storage nodes)."""
        if not transactional_id and producer_id >= 0 and 0 <= producer_epoch < MAX_PRODUCER_EPOCH:
            try:
                await self._require_active()
            except NotControllerError as exc:
                return Outcome(error=exc)
            return Outcome((producer_id, producer_epoch + 1))
        try:
            await self._require_active()
            async with self._write_lock:
                await self._require_active()
                if not transactional_id:
                    return Outcome((await self._next_producer_id_locked(), 0))
                fresh = None
                if self.transactional_ids.needs_new_id(self.cache, transactional_id):
                    fresh = await self._next_producer_id_locked()
                result = self.transactional_ids.init(self.cache, transactional_id, fresh)
                await self._commit(result)
            if fresh is not None:
                log.info("transactional id mapped to a producer id",
                         transactional_id=transactional_id, producer_id=fresh)  # fmt: skip
            return Outcome(result.response)
        except BrokerResponseError as exc:
            return Outcome(error=exc)
        except EtcdUnavailableError as exc:
            return Outcome(error=RequestTimedOutError(f"etcd unreachable: {exc}"))

    async def _next_producer_id_locked(self) -> int:
        """A never-used producer id (claims a new block when needed); the caller holds the lock."""
        value = self.producer_ids.next_id()
        if value is None:
            claim = self.producer_ids.claim_block(self.cache)
            await self._commit(claim)
            assert claim.response is not None
            self.producer_ids.block_claimed(*claim.response)
            value = self.producer_ids.next_id()
        assert value is not None
        return value

    # --- metadata ------------------------------------------------------------------------

    async def metadata(self, topics: Sequence[str], allow_auto_creation: bool) -> MetadataView:
        """Served by every controller from its cache; auto-creation only by the active one
        (a standby answers a missing topic with NOT_CONTROLLER naming the active one)."""
        cache = self.cache
        names = list(dict.fromkeys(topics)) if topics else sorted(cache.topics)
        views = []
        for name in names:
            if name not in cache.topics:
                views.append(await self._missing_topic(name, allow_auto_creation and bool(topics)))
            else:
                views.append(cache.topic_view(name))
        controller = cache.controller
        own_stale = controller is not None and controller.id == self.config.controller_id
        if own_stale and not self.is_active:  # e.g. etcd is unreachable: name nobody
            controller = None
        return MetadataView(
            cluster_id=cache.cluster_id,
            brokers=tuple((b.id, b.host, b.port, b.rack) for _, b in sorted(cache.brokers.items())),
            controller=(controller.id, controller.host, controller.port) if controller else None,
            topics=tuple(views),
        )

    async def _missing_topic(self, name: str, auto_create: bool) -> TopicView:
        try:
            validate_topic_name(name)
        except InvalidTopicError as exc:
            return TopicView(name, error=exc)
        if not (auto_create and self.config.auto_create_topics_enable):
            return TopicView(name, error=UnknownTopicOrPartitionError(f"unknown topic '{name}'"))
        outcome = await self._admin(lambda: self.topics.create(self.cache, NewTopicSpec(name)))
        if outcome.error is not None and name not in self.cache.topics:
            return TopicView(name, error=outcome.error)
        log.info("topic auto-created", topic=name)
        return self.cache.topic_view(name)


def _leader_of(current: KeyValue | None) -> ControllerRecord | None:
    """The active controller a read of the leader key names (None: the key is absent)."""
    return ControllerRecord.from_json(current.value) if current is not None else None
