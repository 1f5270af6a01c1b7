"""``ClusterClient``: what every asyncio client knows about the cluster.

Public (``strom.cluster``): the producer, consumer and admin are built on it, and so are the
services, the Spark connector and the benchmarks that talk to a cluster as a client. It
bootstraps through the gateway (``Metadata``), caches brokers and partition leaders, and
keeps one grpc.aio channel per storage node, since clients send data to partition leaders
directly. With ``gateway_only`` the "storage node" stubs are the gateway's own stub instead
(its Produce, ProduceStream, Fetch, ListOffsets and DeleteRecords take the same messages and
route them to the leaders): for networks where only the gateway is reachable. Not
thread-safe: it lives on one event loop (the background loop for the sync facades).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from strom.cluster.login import client_security
from strom.cluster.retry import Backoff, Deadline
from strom.cluster.transport import channel_options, translate_errors
from strom.errors import (
    ConfigurationError,
    ErrorCode,
    LeaderNotAvailableError,
    NetworkExceptionError,
    StromError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from strom.protocol.v1 import controller_pb2, gateway_pb2_grpc, storage_pb2_grpc
from strom.security import ChannelSecurity, SecurityConfig, default_security
from strom.types import TopicPartition

__all__ = ["DEFAULT_BOOTSTRAP_SERVERS", "ClusterClient", "PartitionLeader", "parse_servers"]

#: Where every client looks for the gateway unless told otherwise.
DEFAULT_BOOTSTRAP_SERVERS = "localhost:9092"

# Backoff between metadata refreshes while a partition has no leader (doubling, capped).
_LEADER_BACKOFF_S = 0.05
_LEADER_BACKOFF_MAX_S = 1.0
# A restarted storage node should be reachable again within a second, not after gRPC's
# default reconnect backoff (up to two minutes).
_NODE_OPTIONS = [
    *channel_options(),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    """A partition as the metadata describes it: its leader (-1: none), epoch and replicas."""

    topic: str
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def parse_servers(bootstrap_servers: str | Sequence[str]) -> list[str]:
    """``"a:1,b:2"`` or ``["a:1", "b:2"]`` as a list; ConfigurationError when empty."""
    items = (
        bootstrap_servers.split(",") if isinstance(bootstrap_servers, str) else bootstrap_servers
    )
    servers = [s.strip() for s in items if isinstance(s, str) and s.strip()]
    if not servers:
        raise ConfigurationError(f"bootstrap_servers is empty: {bootstrap_servers!r}")
    return servers


class ClusterClient:
    """Bootstrap through the gateway, cache metadata, one grpc.aio channel per storage node."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        request_timeout_ms: int = 30000,
        metadata_max_age_ms: int = 300000,
        client_id: str = "strom-python",
        gateway_only: bool = False,
        security: ChannelSecurity | SecurityConfig | None = None,
    ) -> None:
        """``security``: how channels are secured (``SecurityConfig``: a client's options,
        logging in with SCRAM when SASL; None: the process default, plaintext unless a
        service set its own)."""
        self.bootstrap_servers = parse_servers(bootstrap_servers)
        if isinstance(security, SecurityConfig):
            security = client_security(security, self.bootstrap_servers)
        self.security = security if security is not None else default_security()
        if not isinstance(gateway_only, bool):
            raise ConfigurationError(f"gateway_only must be a bool, got {gateway_only!r}")
        self.gateway_only = gateway_only
        if not isinstance(request_timeout_ms, int) or request_timeout_ms <= 0:
            raise ConfigurationError(f"request_timeout_ms must be > 0, got {request_timeout_ms!r}")
        if not isinstance(metadata_max_age_ms, int) or metadata_max_age_ms < 0:
            raise ConfigurationError(
                f"metadata_max_age_ms must be >= 0, got {metadata_max_age_ms!r}"
            )
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self._max_age = metadata_max_age_ms / 1000
        self._server_index = 0
        self._gateway_channel: grpc.aio.Channel | None = None
        self._gateway: gateway_pb2_grpc.GatewayStub | None = None
        self._brokers: dict[int, str] = {}
        self._topics: dict[str, tuple[PartitionLeader, ...]] = {}
        self._refreshed_at: dict[str, float] = {}
        self._stale: set[str] = set()
        # In-flight refreshes: (topics requested or None for all, task).
        self._inflight: list[tuple[frozenset[str] | None, asyncio.Future[None]]] = []
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, storage_pb2_grpc.StorageNodeStub] = {}
        self._closed = False

    # -- the gateway ---------------------------------------------------------------------------

    @property
    def gateway_address(self) -> str:
        return self.bootstrap_servers[self._server_index]

    @property
    def gateway(self) -> gateway_pb2_grpc.GatewayStub:
        """grpc.aio stub to the current bootstrap server (the next one after a network error)."""
        if self._gateway is None:
            self._gateway_channel = self.open_channel(self.gateway_address, channel_options())
            self._gateway = gateway_pb2_grpc.GatewayStub(self._gateway_channel)
        return self._gateway

    @property
    def gateway_channel(self) -> grpc.aio.Channel:
        """The channel of ``gateway`` (for the gateway's other services: Security)."""
        self.gateway  # noqa: B018  (opens it)
        assert self._gateway_channel is not None
        return self._gateway_channel

    async def _next_gateway(self) -> None:
        channel = self._gateway_channel
        self._gateway_channel = None
        self._gateway = None
        self._server_index = (self._server_index + 1) % len(self.bootstrap_servers)
        if channel is not None:
            await channel.close()

    async def _metadata(self, topics: Sequence[str]) -> controller_pb2.MetadataResponse:
        """One Metadata call, trying each bootstrap server once on network errors."""
        request = controller_pb2.MetadataRequest(topics=list(topics))
        error: StromError | None = None
        for _ in self.bootstrap_servers:
            try:
                with translate_errors(self.gateway_address):
                    response: controller_pb2.MetadataResponse = await self.gateway.Metadata(
                        request, timeout=self.request_timeout
                    )
                return response
            except NetworkExceptionError as exc:
                error = exc
                await self._next_gateway()
        assert error is not None
        raise error

    # -- metadata ------------------------------------------------------------------------------

    async def refresh(self, topics: Sequence[str] | None = None) -> None:
        """Fetch metadata for ``topics`` (None: every topic) with one Metadata call.

        Concurrent callers whose topics an in-flight refresh already covers wait for it instead
        of sending their own. Topics the caller may not describe raise
        ``TopicAuthorizationFailedError`` (naming them in ``unauthorized_topics``) after the
        others are cached.
        """
        wanted = frozenset(topics) if topics else None
        for covers, future in self._inflight:
            if covers is None or (wanted is not None and wanted <= covers):
                await asyncio.shield(future)
                return
        future = asyncio.ensure_future(self._refresh(wanted))
        entry = (wanted, future)
        self._inflight.append(entry)
        future.add_done_callback(lambda f: self._refresh_done(entry))
        await asyncio.shield(future)

    def _refresh_done(self, entry: tuple[frozenset[str] | None, asyncio.Future[None]]) -> None:
        if entry in self._inflight:
            self._inflight.remove(entry)
        future = entry[1]
        if not future.cancelled():
            future.exception()  # retrieved here: a cancelled waiter must not leave it unseen

    async def _refresh(self, wanted: frozenset[str] | None) -> None:
        response = await self._metadata(sorted(wanted) if wanted else [])
        now = time.monotonic()
        for broker in response.brokers:
            self._brokers[broker.node_id] = f"{broker.host}:{broker.port}"
        seen = set()
        denied: list[str] = []
        for topic in response.topics:
            seen.add(topic.name)
            if topic.error_code:
                self._forget(topic.name)
                if topic.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                    denied.append(topic.name)
                continue
            self._topics[topic.name] = tuple(
                PartitionLeader(
                    topic.name,
                    p.partition,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replicas),
                    tuple(p.isr),
                )
                for p in sorted(topic.partitions, key=lambda p: p.partition)
            )
            self._refreshed_at[topic.name] = now
            self._stale.discard(topic.name)
        gone = (set(self._topics) if wanted is None else set(wanted)) - seen
        for name in gone:
            self._forget(name)
        if denied:
            raise TopicAuthorizationFailedError(
                f"not authorized to describe topic(s) {', '.join(sorted(denied))}", denied
            )

    def _forget(self, topic: str) -> None:
        self._topics.pop(topic, None)
        self._refreshed_at.pop(topic, None)
        self._stale.discard(topic)

    def fresh(self, topic: str) -> bool:
        """True when the topic's cached metadata is neither stale nor older than max age."""
        return self._fresh(topic)

    def _fresh(self, topic: str) -> bool:
        at = self._refreshed_at.get(topic)
        return at is not None and topic not in self._stale and time.monotonic() - at < self._max_age

    async def partitions(self, topic: str) -> list[PartitionLeader]:
        """The topic's partitions; refreshes when unknown or stale. Raises
        UnknownTopicOrPartitionError for a topic the cluster does not have."""
        if not self._fresh(topic):
            await self.refresh([topic])
        found = self._topics.get(topic)
        if found is None:
            raise UnknownTopicOrPartitionError(f"unknown topic '{topic}'")
        return list(found)

    def cached(self, tp: TopicPartition) -> PartitionLeader | None:
        """The cached leader of ``tp`` without any I/O (None when unknown)."""
        found = self._topics.get(tp.topic)
        if found is None or not 0 <= tp.partition < len(found):
            return None
        leader = found[tp.partition]
        return leader if leader.partition == tp.partition else None

    @property
    def cached_topics(self) -> Mapping[str, tuple[PartitionLeader, ...]]:
        """Every cached topic's partitions: a live read-only view, no I/O (the producer's hot
        path reads partition counts from it)."""
        return self._topics

    def partition_count(self, topic: str) -> int | None:
        """Cached partition count (None when the topic is not cached)."""
        found = self._topics.get(topic)
        return None if found is None else len(found)

    async def leader(self, tp: TopicPartition) -> PartitionLeader:
        """The leader of ``tp``, refreshing metadata while it is unknown or -1 (with backoff,
        within request_timeout); then LeaderNotAvailableError."""
        cached = self.cached(tp)
        if cached is not None and cached.leader >= 0 and self._fresh(tp.topic):
            return cached
        deadline = Deadline(self.request_timeout)
        backoff = Backoff(_LEADER_BACKOFF_S, _LEADER_BACKOFF_MAX_S)
        while True:
            await self.refresh([tp.topic])
            if tp.topic not in self._topics:
                raise UnknownTopicOrPartitionError(f"unknown topic '{tp.topic}'")
            found = self.cached(tp)
            if found is None:
                raise UnknownTopicOrPartitionError(
                    f"{tp.topic}-{tp.partition}: the topic has "
                    f"{len(self._topics[tp.topic])} partitions"
                )
            if found.leader >= 0:
                return found
            delay = backoff.next()
            if not deadline.allows(delay):
                raise LeaderNotAvailableError(f"{tp.topic}-{tp.partition} has no leader")
            await asyncio.sleep(delay)

    def mark_stale(self, topic: str | None = None) -> None:
        """Make the next partitions()/leader() for ``topic`` (None: every topic) refresh."""
        if topic is None:
            self._stale.update(self._topics)
        elif topic in self._topics:
            self._stale.add(topic)

    async def topics(self) -> list[str]:
        """Every topic name (fresh Metadata)."""
        await self.refresh(None)
        return sorted(self._topics)

    # -- storage nodes -------------------------------------------------------------------------

    def node_address(self, node_id: int) -> str:
        address = self._brokers.get(node_id)
        if address is None:
            raise LeaderNotAvailableError(f"storage node {node_id} is not in the metadata")
        return address

    def storage(self, node_id: int) -> storage_pb2_grpc.StorageNodeStub:
        """A grpc.aio stub to the storage node (one cached channel per address); the gateway's
        stub when ``gateway_only`` (it has the same data-path methods)."""
        if self.gateway_only:
            if self._closed:
                raise StromError("the client is closed")
            return self.gateway  # type: ignore[return-value]
        address = self.node_address(node_id)
        stub = self._stubs.get(address)
        if stub is None:
            if self._closed:
                raise StromError("the client is closed")
            channel = self.open_channel(address, _NODE_OPTIONS)
            self._channels[address] = channel
            stub = self._stubs[address] = storage_pb2_grpc.StorageNodeStub(channel)
        return stub

    def open_channel(
        self, address: str, options: Sequence[tuple[str, Any]] = ()
    ) -> grpc.aio.Channel:
        """A channel to ``address`` with this client's security (TLS, login token)."""
        return self.security.channel(address, options=options)

    async def close(self) -> None:
        """Close every channel; a closed client refuses new storage stubs."""
        self._closed = True
        channels = list(self._channels.values())
        if self._gateway_channel is not None:
            channels.append(self._gateway_channel)
        self._channels.clear()
        self._stubs.clear()
        self._gateway_channel = None
        self._gateway = None
        for future in [f for _, f in self._inflight]:
            future.cancel()
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)
