"""``CoordinatorRuntime``: hosts the partitions of the coordinator's internal topics, one
``CoordinatorShard`` per topic (Kafka's CoordinatorRuntime, KIP-848's group-coordinator
module).

For each topic ``host`` builds the fenced writer (``writer.InternalTopicWriter``: its producer
epoch re-initialised through the topic's ownership, a fenced write giving the partition up),
the shard on that writer (``ShardContext``), and the topic's ``ownership.PartitionOwnership``,
which claims, loads (replaying each partition's records into the shard), fences and releases
partitions through the one shared ``registration.CoordinatorRegistration``. ``start`` registers
the process and starts placing partitions and the ticks (``Tick``: expiry, timeouts);
``close`` stops everything in the order of ``close_plan``.

``locate`` answers which coordinator serves a key of a topic, from the owners and
registrations this instance follows: peers are called there directly (``peers``).

Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from strom.cluster import ClusterClient
from strom.errors import StromError
from strom_coordinator.runtime.ownership import PartitionOwnership, TopicOwnership
from strom_coordinator.runtime.peers import PeerCoordinators
from strom_coordinator.runtime.registration import CoordinatorRegistration
from strom_coordinator.runtime.shard import CoordinatorShard, ShardContext, Tick
from strom_coordinator.runtime.writer import InternalTopicWriter

__all__ = ["CoordinatorRuntime", "HostedTopic"]

S = TypeVar("S", bound=CoordinatorShard)
S_co = TypeVar("S_co", bound=CoordinatorShard, covariant=True)

#: One step of closing: (what, how).
CloseStep = tuple[str, Callable[[], Awaitable[None]]]


@dataclass(frozen=True)
class HostedTopic(Generic[S_co]):
    """One internal topic the runtime hosts: its shard, writer and ownership."""

    topic: str
    shard: S_co
    writer: InternalTopicWriter
    ownership: PartitionOwnership

    def loaded_count(self) -> int:
        """How many partitions this instance serves (for the metrics)."""
        return len(self.ownership.loaded())


class CoordinatorRuntime:
    """The internal topics' partitions of this coordinator (see the module docstring)."""

    def __init__(
        self,
        registration: CoordinatorRegistration,
        cluster: ClusterClient,
        *,
        write_timeout_s: float,
        request_timeout_s: float,
    ) -> None:
        self.registration = registration
        self._cluster = cluster
        self._write_timeout_s = write_timeout_s
        self._request_timeout_s = request_timeout_s
        self._topics: dict[str, HostedTopic[CoordinatorShard]] = {}
        self._ticks: list[Tick] = []
        self._running: list[asyncio.Task[None]] = []
        #: Channels to the other coordinators, found with ``locate``.
        self.peers = PeerCoordinators(self.locate)

    # -- hosting -------------------------------------------------------------------------------

    def host(self, spec: TopicOwnership, build: Callable[[ShardContext], S]) -> HostedTopic[S]:
        """Host ``spec.topic``: its writer, the shard ``build`` makes on it, its ownership."""
        topic = spec.topic
        if topic in self._topics:
            raise ValueError(f"{topic} is hosted already")

        async def reinit(partition: int) -> tuple[int, int]:
            return await self._topics[topic].ownership.init_producer(partition)

        writer = InternalTopicWriter(
            self._cluster,
            timeout_s=self._write_timeout_s,
            reinit=reinit,
            on_fenced=lambda partition: self.fenced(topic, partition),
            topic=topic,
        )
        context = ShardContext(
            log=writer,
            owner_epoch=lambda partition: self.owner_epoch(topic, partition),
            fenced=lambda partition: self.fenced(topic, partition),
        )
        shard = build(context)
        shard.use_session(self.registration.session)
        ownership = PartitionOwnership(
            self.registration, spec, shard, writer, self._cluster,
            request_timeout_s=self._request_timeout_s,
        )  # fmt: skip
        hosted = HostedTopic(topic, shard, writer, ownership)
        self._topics[topic] = hosted
        return hosted

    def every(self, tick: Tick) -> None:
        """Run ``tick`` from ``start`` until ``close``."""
        self._ticks.append(tick)

    def hosted(self, topic: str) -> HostedTopic[CoordinatorShard] | None:
        return self._topics.get(topic)

    @property
    def topics(self) -> list[str]:
        """The hosted topics, in the order they were added."""
        return list(self._topics)

    # -- ownership -----------------------------------------------------------------------------

    def owner_epoch(self, topic: str, partition: int) -> int | None:
        """This instance's owner epoch of ``topic``-``partition`` (None: not its owner)."""
        hosted = self._topics.get(topic)
        return None if hosted is None else hosted.ownership.owner_epoch(partition)

    def fenced(self, topic: str, partition: int) -> None:
        """Another coordinator owns ``topic``-``partition`` now: give it up."""
        hosted = self._topics.get(topic)
        if hosted is not None:
            hosted.ownership.fenced(partition)

    def locate(self, topic: str, key: str) -> tuple[str, int] | None:
        """(address "host:port" of the coordinator serving ``key`` of ``topic``, its
        partition); None while the topic, the partition's owner or its registration is
        unknown (moving)."""
        hosted = self._topics.get(topic)
        if hosted is None:
            return None
        try:
            partition = hosted.shard.partition_for(key)
        except StromError:  # the partition count is unknown
            return None
        owner = hosted.ownership.owners.get(partition)
        member = self.registration.members.get(owner.coordinator_id) if owner else None
        return None if member is None else (f"{member.host}:{member.port}", partition)

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self, host: str, port: int) -> None:
        """Register as ``host:port``, start placing every topic's partitions and the ticks."""
        await self.registration.start(host, port)
        for hosted in self._topics.values():
            hosted.ownership.start()
        self._running = [asyncio.create_task(t.loop(), name=t.name) for t in self._ticks]

    def close_plan(self) -> list[CloseStep]:
        """The steps of ``close``, in order: stop the ticks and following etcd, stop placing
        and serving, stop the shards, revoke the lease (every ownership key goes with it), and
        only then close the writers and the channels to the peers."""
        topics = list(self._topics.values())
        registration = self.registration
        return [
            ("stop the ticks", self._stop_ticks),
            ("stop following etcd", registration.stop_following),
            *[(f"stop placing {t.topic}", t.ownership.close) for t in topics],
            *[(f"close the {t.topic} shard", t.shard.close) for t in topics],
            ("revoke the lease", registration.revoke),
            *[(f"close the {t.topic} writer", t.writer.close_all) for t in topics],
            ("close the channels to the peers", self.peers.close),
        ]

    async def close(self) -> None:
        for _, step in self.close_plan():
            await step()

    async def _stop_ticks(self) -> None:
        running, self._running = self._running, []
        for task in running:
            task.cancel()
        for task in running:
            with contextlib.suppress(asyncio.CancelledError):
                await task
