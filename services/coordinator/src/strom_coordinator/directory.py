"""FindCoordinator: which coordinator serves a group, from the registrations and ownership keys
this instance watches (``ownership``), creating ``__consumer_offsets`` on first use.

A group belongs to partition ``abs(hashCode(group_id)) % partitions`` of the offsets topic
(the manager's ``partition_for``); its coordinator is that partition's owner. While the topic
does not exist yet, ``find`` creates it through the gateway (compacted; the configured
partition count; the configured replication factor capped by the live storage nodes;
min.insync.replicas = min(2, replication factor)). A racing instance creating it too is fine.
Until an owner is known, ``find`` answers COORDINATOR_NOT_AVAILABLE (clients retry).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from strom.aio import Admin
from strom.errors import CoordinatorNotAvailableError, StromError, TopicAlreadyExistsError
from strom.types import NewTopic
from strom_coordinator.config import CoordinatorConfig
from strom_coordinator.ownership import PartitionOwnership
from strom_server.runtime.logs import get_logger

__all__ = ["CoordinatorDirectory"]

log = get_logger(__name__)

#: How long ``find`` waits for the topic to appear / its partition to get an owner before
#: answering COORDINATOR_NOT_AVAILABLE.
_WAIT_S = 2.0


class CoordinatorDirectory:
    """Implements the servicer's ``CoordinatorDirectory`` (see the module docstring)."""

    def __init__(
        self,
        ownership: PartitionOwnership,
        partition_for: Callable[[str], int],
        admin: Admin,
        config: CoordinatorConfig,
    ) -> None:
        self._ownership = ownership
        self._partition_for = partition_for
        self._admin = admin
        self._config = config
        self._creating: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        previous = ownership.on_change

        def on_change() -> None:
            previous()
            self._changed.set()

        ownership.on_change = on_change

    async def find(self, group_id: str) -> tuple[int, str, int]:
        ownership = self._ownership
        topic = ownership.topic
        if ownership.partition_count is None:
            await self._create_topic()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _WAIT_S
        while True:
            if ownership.partition_count is not None:
                partition = self._partition_for(group_id)
                owner = ownership.owners.get(partition)
                member = ownership.members.get(owner.coordinator_id) if owner else None
                if member is not None:
                    return member.id, member.host, member.port
                reason = f"no coordinator owns {topic}-{partition} yet"
            else:
                reason = f"{topic} is being created"
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise CoordinatorNotAvailableError(reason)
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._changed.wait()

    async def _create_topic(self) -> None:
        """Create the offsets topic once (concurrent callers share the attempt)."""
        if self._creating is None or self._creating.done():
            self._creating = asyncio.ensure_future(self._create())
        try:
            await asyncio.shield(self._creating)
        except StromError as exc:
            raise CoordinatorNotAvailableError(
                f"cannot create {self._ownership.topic}: {exc}"
            ) from exc

    async def _create(self) -> None:
        config = self._config
        brokers = len((await self._admin.describe_cluster()).brokers)
        replication = max(1, min(config.offsets_topic_replication_factor, brokers))
        topic = NewTopic(
            self._ownership.topic,
            config.offsets_topic_num_partitions,
            replication,
            topic_configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
                "min.insync.replicas": str(min(2, replication)),
            },
        )
        try:
            await self._admin.create_topics([topic])
            log.info("offsets topic created", topic=topic.name,
                     partitions=topic.num_partitions, replication_factor=replication)  # fmt: skip
        except TopicAlreadyExistsError:
            pass
