"""Partition leaders and storage-node addresses, as the gateway last saw them.

Filled from the controller's ``Metadata`` (through ``ControllerRouter``) per topic on first
use, and refreshed when a leader answers NOT_LEADER_OR_FOLLOWER or cannot be reached (the
data path calls ``mark_stale``) or when an entry is older than the maximum age. Concurrent
refreshes of the same topics share one Metadata call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from strom.protocol.v1 import controller_pb2
from strom_gateway.routing.controller import ControllerRouter

__all__ = ["LeaderInfo", "MetadataCache"]


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    """One partition's leader: its node id (-1: none) and address ("" when unknown)."""

    node_id: int
    address: str
    leader_epoch: int


class MetadataCache:
    """Leaders per partition, refreshed on demand; one event loop, no locks."""

    def __init__(self, router: ControllerRouter, *, max_age_s: float) -> None:
        self._router = router
        self._max_age_s = max_age_s
        self._brokers: dict[int, str] = {}
        #: topic -> (partition -> (leader, epoch)), when the topic exists.
        self._topics: dict[str, dict[int, tuple[int, int]]] = {}
        self._refreshed_at: dict[str, float] = {}
        self._stale: set[str] = set()
        self._inflight: dict[frozenset[str], asyncio.Future[None]] = {}

    def _fresh(self, topic: str) -> bool:
        at = self._refreshed_at.get(topic)
        if at is None or topic in self._stale:
            return False
        return time.monotonic() - at < self._max_age_s

    def mark_stale(self, topics: Iterable[str]) -> None:
        """The next lookup of these topics asks the controller again."""
        self._stale.update(topics)

    def partition_count(self, topic: str) -> int | None:
        """Partitions of ``topic`` as cached (None: unknown or missing)."""
        found = self._topics.get(topic)
        return None if found is None else len(found)

    async def ensure(self, topics: Iterable[str], timeout_s: float) -> None:
        """Refresh whichever of ``topics`` is missing, stale or too old (one Metadata call)."""
        wanted = frozenset(t for t in topics if not self._fresh(t))
        if not wanted:
            return
        for covers, future in self._inflight.items():
            if wanted <= covers:
                await asyncio.shield(future)
                return
        future = asyncio.ensure_future(self._refresh(wanted, timeout_s))
        self._inflight[wanted] = future
        try:
            await asyncio.shield(future)
        finally:
            if future.done() and self._inflight.get(wanted) is future:
                del self._inflight[wanted]

    async def _refresh(self, wanted: frozenset[str], timeout_s: float) -> None:
        try:
            answer = await self._router.call(
                "Metadata", controller_pb2.MetadataRequest(topics=sorted(wanted)), timeout_s
            )
            response = cast(controller_pb2.MetadataResponse, answer)  # Metadata's answer
        finally:
            self._inflight.pop(wanted, None)
        now = time.monotonic()
        for broker in response.brokers:
            self._brokers[broker.node_id] = f"{broker.host}:{broker.port}"
        for topic in response.topics:
            if topic.error_code:
                self._topics.pop(topic.name, None)
            else:
                self._topics[topic.name] = {
                    p.partition: (p.leader_id, p.leader_epoch) for p in topic.partitions
                }
            self._refreshed_at[topic.name] = now
            self._stale.discard(topic.name)
        for name in wanted - {t.name for t in response.topics}:
            self._topics.pop(name, None)
            self._refreshed_at[name] = now
            self._stale.discard(name)

    def refreshed_since(self, topic: str, when: float) -> bool:
        """Whether the controller was asked about ``topic`` at or after ``when`` (monotonic)."""
        at = self._refreshed_at.get(topic)
        return at is not None and at >= when

    def topic_exists(self, topic: str) -> bool:
        return topic in self._topics

    def leader(self, topic: str, partition: int) -> LeaderInfo | None:
        """The cached leader (None when the topic or partition is unknown)."""
        found = self._topics.get(topic, {}).get(partition)
        if found is None:
            return None
        node_id, epoch = found
        return LeaderInfo(node_id, self._brokers.get(node_id, ""), epoch)
