"""FindCoordinator: which coordinator serves a group or a transactional id, from the
registrations and ownership keys this instance watches (``runtime.ownership``), creating the
internal topic (``__consumer_offsets`` or ``__transaction_state``) on first use.

A key belongs to partition ``abs(hashCode(key)) % partitions`` of its topic (the manager's
``partition_for``); its coordinator is that partition's owner. While the topic does not exist
yet, ``find`` creates it through the gateway (compacted; the configured partition count; the
configured replication factor capped by the live storage nodes; min.insync.replicas = min(2,
replication factor)). A racing instance creating it too is fine. Until an owner is known,
``find`` answers COORDINATOR_NOT_AVAILABLE (clients retry).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from strom.aio import Admin
from strom.errors import (
    CoordinatorNotAvailableError,
    InvalidRequestError,
    StromError,
    TopicAlreadyExistsError,
)
from strom.types import NewTopic
from strom_coordinator.runtime.ownership import PartitionOwnership
from strom_server.runtime.logs import get_logger

__all__ = ["GROUP", "TRANSACTION", "CoordinatorDirectory", "TopicSettings"]

log = get_logger(__name__)

#: FindCoordinatorRequest.key_type values (coordinator.proto's CoordinatorKeyType).
GROUP = 0
TRANSACTION = 1

#: How long ``find`` waits for the topic to appear / its partition to get an owner before
#: answering COORDINATOR_NOT_AVAILABLE.
_WAIT_S = 2.0


@dataclass(frozen=True)
class TopicSettings:
    """How an internal topic is created on first use."""

    partitions: int
    replication_factor: int
    segment_bytes: int


@dataclass
class _Kind:
    ownership: PartitionOwnership
    partition_for: Callable[[str], int]
    settings: TopicSettings
    creating: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class CoordinatorDirectory:
    """Implements the servicer's ``CoordinatorDirectory`` (see the module docstring); ``add``
    makes a key type answerable."""

    def __init__(self, admin: Admin) -> None:
        self._admin = admin
        self._kinds: dict[int, _Kind] = {}

    def add(
        self,
        key_type: int,
        ownership: PartitionOwnership,
        partition_for: Callable[[str], int],
        settings: TopicSettings,
    ) -> None:
        """Answer FindCoordinator(``key_type``) from ``ownership``, creating its topic with
        ``settings`` on first use."""
        kind = _Kind(ownership, partition_for, settings)
        self._kinds[key_type] = kind
        previous = ownership.on_change

        def on_change() -> None:
            previous()
            kind.changed.set()

        ownership.on_change = on_change

    def ownership(self, key_type: int) -> PartitionOwnership | None:
        """The ownership answering for ``key_type`` (None when not served)."""
        kind = self._kinds.get(key_type)
        return None if kind is None else kind.ownership

    async def find(self, key: str, key_type: int = GROUP) -> tuple[int, str, int]:
        """(coordinator id, host, port) serving ``key`` (a group id, or a transactional id when
        ``key_type`` is TRANSACTION)."""
        kind = self._kinds.get(key_type)
        if kind is None:
            raise InvalidRequestError(f"unknown coordinator key type {key_type}")
        ownership = kind.ownership
        topic = ownership.topic
        if ownership.partition_count is None:
            await self._create_topic(kind)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _WAIT_S
        while True:
            if ownership.partition_count is not None:
                partition = kind.partition_for(key)
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
            kind.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await kind.changed.wait()

    async def _create_topic(self, kind: _Kind) -> None:
        """Create the kind's topic once (concurrent callers share the attempt)."""
        if kind.creating is None or kind.creating.done():
            kind.creating = asyncio.ensure_future(self._create(kind))
        try:
            await asyncio.shield(kind.creating)
        except StromError as exc:
            raise CoordinatorNotAvailableError(
                f"cannot create {kind.ownership.topic}: {exc}"
            ) from exc

    async def _create(self, kind: _Kind) -> None:
        settings = kind.settings
        brokers = len((await self._admin.describe_cluster()).brokers)
        replication = max(1, min(settings.replication_factor, brokers))
        topic = NewTopic(
            kind.ownership.topic,
            settings.partitions,
            replication,
            topic_configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(settings.segment_bytes),
                "min.insync.replicas": str(min(2, replication)),
            },
        )
        try:
            await self._admin.create_topics([topic])
            log.info("internal topic created", topic=topic.name,
                     partitions=topic.num_partitions, replication_factor=replication)  # fmt: skip
        except TopicAlreadyExistsError:
            pass
