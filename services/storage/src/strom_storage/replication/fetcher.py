"""Followers pull from leaders: one fetcher per leader node, one FetchStream per fetcher.

Each fetcher keeps one fetch in flight on a long-lived bidirectional stream (the next fetch's
offsets depend on the previous answer, so the stream saves the per-call cost rather than
overlapping requests). A fetch carries this node's id and, per partition, its log end offset
and leader epoch: that is how the leader learns where its followers are (no separate report).

A partition joining a fetcher (new leader or new epoch) first reconciles its log with the
leader's through OffsetForLeaderEpoch (``node.follower.next_truncation``), then fetches.
Per-partition errors back that partition off for ``replica.fetch.backoff.ms``; a broken stream
or unreachable leader backs the whole fetcher off. Adding replicas of a reassignment fetch under
the reassignment's throttle (bytes per second, per fetcher).

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import structlog

from strom.errors import (
    BrokerResponseError,
    OffsetOutOfRangeError,
    for_code,
)
from strom.protocol.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from strom_server.rpc.channels import PeerChannel
from strom_storage.node import ReplicaManager
from strom_storage.node.follower import FetchedData, apply_fetched, next_truncation
from strom_storage.node.loop_watch import APPLY_SLICE_S, LoopSlice
from strom_storage.node.partition import Partition

log = structlog.get_logger(__name__)

__all__ = ["FetcherSettings", "ReplicaFetcherManager"]

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """Kafka's replica.fetch.* settings."""

    max_bytes: int = 1 << 20  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10 << 20  # replica.fetch.response.max.bytes
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    request_timeout_s: float = 30.0


@dataclass(slots=True)
class _Followed:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    backoff_until: float = 0.0


@dataclass(slots=True)
class _Throttle:
    """A token bucket in bytes per second (0: unlimited)."""

    rate: int = 0
    allowance: float = 0.0
    stamp: float = field(default_factory=time.monotonic)

    def delay_for(self, size: int) -> float:
        """Seconds to wait before taking ``size`` more bytes."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        self.allowance = min(self.rate, self.allowance + (now - self.stamp) * self.rate)
        self.stamp = now
        self.allowance -= size
        return 0.0 if self.allowance >= 0 else -self.allowance / self.rate


class ReplicaFetcherManager:
    """Implements ``node.hosted.Followers``: which leader each followed partition is
    fetched from."""

    def __init__(
        self,
        replicas: ReplicaManager,
        *,
        node_id: int,
        address_of: Callable[[int], str | None],
        settings: FetcherSettings | None = None,
        throttle_of: Callable[[Key], int] = lambda key: 0,
    ) -> None:
        self._replicas = replicas
        self._node_id = node_id
        self._address_of = address_of
        self._throttle_of = throttle_of
        self.settings = settings or FetcherSettings()
        self._fetchers: dict[int, _ReplicaFetcher] = {}
        self._leader_of: dict[Key, int] = {}

    def follow(self, partition: Partition) -> None:
        key = partition.key
        previous = self._leader_of.get(key)
        if previous is not None and previous != partition.leader:
            self._fetchers[previous].remove(key)
        fetcher = self._fetchers.get(partition.leader)
        if fetcher is None:
            fetcher = _ReplicaFetcher(self, partition.leader)
            self._fetchers[partition.leader] = fetcher
            fetcher.start()
        self._leader_of[key] = partition.leader
        fetcher.add(partition)

    def unfollow(self, key: Key) -> None:
        leader = self._leader_of.pop(key, None)
        if leader is not None:
            self._fetchers[leader].remove(key)

    async def close(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            await fetcher.close()


class _ReplicaFetcher:
    """Fetches every partition this node follows from one leader node."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self._manager = manager
        self.leader_id = leader_id
        self.partitions: dict[Key, _Followed] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._channel = PeerChannel()
        self._stub_cache: storage_pb2_grpc.StorageNodeStub | None = None
        self._stream: grpc.aio.StreamStreamCall | None = None
        self._throttle = _Throttle()
        self._correlation = 0

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def add(self, partition: Partition) -> None:
        self.partitions[partition.key] = _Followed(partition, partition.leader_epoch)
        self._changed.set()

    def remove(self, key: Key) -> None:
        if self.partitions.pop(key, None) is not None:
            self._changed.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._reset()

    # -- connection ---------------------------------------------------------------------------

    def _stub(self) -> storage_pb2_grpc.StorageNodeStub | None:
        address = self._manager._address_of(self.leader_id)
        if address is None:
            return None
        if address != self._channel.address or self._stub_cache is None:
            self._stream = None
            self._stub_cache = storage_pb2_grpc.StorageNodeStub(self._channel.get(address))
        return self._stub_cache

    async def _reset(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        await self._channel.close()
        self._stub_cache = None

    # -- the loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        settings = self._manager.settings
        while True:
            if not self.partitions:
                self._changed.clear()
                await self._changed.wait()
                continue
            stub = self._stub()
            if stub is None:
                log.warning("leader address unknown; waiting", leader=self.leader_id)
                await self._wait_changed(settings.backoff_ms / 1000)
                continue
            try:
                if any(f.truncating for f in self.partitions.values()):
                    await self._truncate(stub)
                fetched = await self._fetch(stub)
                if not fetched:
                    await self._wait_changed(self._next_backoff())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("replica fetch failed; backing off", leader=self.leader_id,
                            address=self._channel.address, error=str(exc)[:300])  # fmt: skip
                if self._stream is not None:
                    self._stream.cancel()
                    self._stream = None
                await self._wait_changed(settings.backoff_ms / 1000)

    async def _wait_changed(self, seconds: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(seconds, 0.01)):
                await self._changed.wait()

    def _next_backoff(self) -> float:
        now = time.monotonic()
        waits = [f.backoff_until - now for f in self.partitions.values() if not f.truncating]
        return max(min(waits, default=0.1), 0.01)

    def _back_off(self, followed: _Followed) -> None:
        followed.backoff_until = time.monotonic() + self._manager.settings.backoff_ms / 1000

    def _current(self, key: Key, followed: _Followed) -> bool:
        """Still followed, from this leader, at the epoch the request was made for."""
        p = followed.partition
        return (
            self.partitions.get(key) is followed
            and p.leader == self.leader_id
            and p.leader_epoch == followed.leader_epoch
            and not p.log.closed
        )

    # -- truncation ---------------------------------------------------------------------------

    async def _truncate(self, stub: storage_pb2_grpc.StorageNodeStub) -> None:
        asking: dict[Key, _Followed] = {}
        now = time.monotonic()
        for key, followed in self.partitions.items():
            if not followed.truncating or followed.backoff_until > now:
                continue
            log_ = followed.partition.log
            if log_.latest_epoch < 0:
                # No epoch history: nothing past the high watermark can be trusted.
                log_.truncate_to(log_.high_watermark)
                followed.truncating = False
                continue
            asking[key] = followed
        if not asking:
            return
        request = storage_pb2.OffsetForLeaderEpochRequest(
            replica_id=self._manager._node_id,
            partitions=[
                storage_pb2.OffsetForLeaderEpochPartition(
                    topic=key[0],
                    partition=key[1],
                    current_leader_epoch=f.leader_epoch,
                    leader_epoch=f.partition.log.latest_epoch,
                )
                for key, f in asking.items()
            ],
        )
        response = await stub.OffsetForLeaderEpoch(
            request, timeout=self._manager.settings.request_timeout_s
        )
        for result in response.partitions:
            key = (result.topic, result.partition)
            asked = asking.get(key)
            if asked is None or not self._current(key, asked):
                continue
            if result.error_code:
                log.info("OffsetForLeaderEpoch refused; retrying", topic=key[0],
                         partition=key[1], error=result.error_message)  # fmt: skip
                self._back_off(asked)
                continue
            log_ = asked.partition.log
            step = next_truncation(log_, result.leader_epoch, result.end_offset)
            if step.offset < log_.log_end_offset:
                log.warning("truncating to the leader's history", topic=key[0], partition=key[1],
                            from_offset=log_.log_end_offset, to_offset=step.offset,
                            leader_epoch=result.leader_epoch)  # fmt: skip
                log_.truncate_to(step.offset)
            asked.truncating = not step.done

    # -- fetching -----------------------------------------------------------------------------

    async def _fetch(self, stub: storage_pb2_grpc.StorageNodeStub) -> bool:
        """One fetch round trip; False when nothing could be fetched (all backing off)."""
        settings = self._manager.settings
        now = time.monotonic()
        sent: dict[Key, tuple[_Followed, int]] = {}
        request = storage_pb2.FetchRequest(
            replica_id=self._manager._node_id,
            max_wait_ms=settings.max_wait_ms,
            min_bytes=settings.min_bytes,
            max_bytes=settings.response_max_bytes,
        )
        throttle = 0
        for key, followed in self.partitions.items():
            if followed.truncating or followed.backoff_until > now:
                continue
            log_ = followed.partition.log
            offset = log_.log_end_offset
            sent[key] = (followed, offset)
            throttle = max(throttle, self._manager._throttle_of(key))
            request.partitions.append(
                storage_pb2.FetchPartition(
                    topic=key[0],
                    partition=key[1],
                    fetch_offset=offset,
                    current_leader_epoch=followed.leader_epoch,
                    log_start_offset=log_.log_start_offset,
                    partition_max_bytes=settings.max_bytes,
                    last_fetched_epoch=log_.latest_epoch,
                )
            )
        if not sent:
            return False
        self._correlation += 1
        request.correlation_id = self._correlation
        if self._stream is None:
            self._stream = stub.FetchStream()
        await self._stream.write(request)
        # asyncio.timeout, not wait_for: no task per read on this per-round path.
        async with asyncio.timeout(settings.max_wait_ms / 1000 + settings.request_timeout_s):
            response = await self._stream.read()
        if response is grpc.aio.EOF:
            raise ConnectionError(f"leader {self.leader_id} closed the fetch stream")
        received = 0
        # A response for thousands of partitions (each new epoch's first batch fsyncs the
        # epoch checkpoint) is applied a slice at a time, not in one hold of the loop.
        loop_slice = LoopSlice(APPLY_SLICE_S)
        for result in response.partitions:
            key = (result.topic, result.partition)
            entry = sent.get(key)
            if entry is None:
                continue
            await loop_slice.pause()
            followed, offset = entry
            if not self._current(key, followed) or followed.partition.log.log_end_offset != offset:
                continue
            if result.error_code:
                await self._on_error(stub, key, followed, for_code(result.error_code,
                                     result.error_message))  # fmt: skip
                continue
            try:
                info = apply_fetched(
                    followed.partition.log,
                    FetchedData(result.records, result.high_watermark, result.log_start_offset),
                )
            except BrokerResponseError as exc:
                log.error("replicated batches refused", topic=key[0], partition=key[1],
                          error=str(exc))  # fmt: skip
                self._back_off(followed)
                continue
            if info is not None:
                received += info.size_bytes
                self._manager._replicas.stats.replicated_in(key[0], info.size_bytes)
        self._throttle.rate = throttle
        delay = self._throttle.delay_for(received)
        if delay > 0:
            await asyncio.sleep(delay)
        return True

    async def _on_error(
        self,
        stub: storage_pb2_grpc.StorageNodeStub,
        key: Key,
        followed: _Followed,
        error: BrokerResponseError,
    ) -> None:
        if isinstance(error, OffsetOutOfRangeError):
            await self._reset_out_of_range(stub, key, followed)
            return
        log.info("replica fetch refused; backing off", topic=key[0], partition=key[1],
                 leader=self.leader_id, error=str(error))  # fmt: skip
        self._back_off(followed)

    async def _reset_out_of_range(
        self, stub: storage_pb2_grpc.StorageNodeStub, key: Key, followed: _Followed
    ) -> None:
        """Our log end is outside the leader's log: below its start (retention moved on while
        we were away) restarts our log there; above its end, truncation runs again."""
        spec = storage_pb2.ListOffsetsPartition
        request = storage_pb2.ListOffsetsRequest(
            replica_id=self._manager._node_id,
            partitions=[
                spec(topic=key[0], partition=key[1], spec=common_pb2.EARLIEST,
                     current_leader_epoch=followed.leader_epoch),
            ],
        )  # fmt: skip
        response = await stub.ListOffsets(request, timeout=self._manager.settings.request_timeout_s)
        (result,) = response.partitions
        log_ = followed.partition.log
        if result.error_code == 0 and log_.log_end_offset < result.offset:
            log.warning("follower fell below the leader's log start; restarting its log",
                        topic=key[0], partition=key[1], start=result.offset)  # fmt: skip
            log_.truncate_fully_and_start_at(result.offset)
        else:
            followed.truncating = True
