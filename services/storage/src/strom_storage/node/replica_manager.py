"""Produce, fetch and offset requests over the partitions this node hosts.

Requests reach here as plain Python values from the servicer; every per-partition problem is
returned as that partition's ``error`` (a ``strom.errors.BrokerResponseError``), so one bad
partition never fails a whole request, and a rejected append leaves its log untouched.

Data path (design rules 1, 3, 4): produce hands each partition's bytes to ``Log`` which checks
headers and CRCs and patches offsets in place; fetch returns raw byte ranges of whole batches
read from segment files. A fetch short of ``min_bytes`` waits, up to ``max_wait_ms``, for an
append to wake it (``AppendNotifier``), never polling.

Replication (design, "Replication"): a follower's fetch carries its node id and log end
offset; the leader records it (``Partition.update_follower``), which may advance the high
watermark, complete acks=all produces waiting for it, and admit the follower to the ISR.
ISR changes are proposed to the controller through ``IsrUpdates`` (AlterPartition); the
followers' own fetching is ``Followers``' job (``replica_fetcher``). Both are absent on a
standalone node, whose partitions are their own ISR.

Ordering: ``append`` does all its work before its first ``await``, so requests handled in
arrival order append in that order (what pipelined ProduceStream relies on).

Thread-safety: one event loop drives a ReplicaManager.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from strom.errors import (
    BrokerResponseError,
    ConfigurationError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    StorageError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from strom_storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchIsolation,
    LogConfig,
)
from strom_storage.log.log_manager import LogManager
from strom_storage.membership.assignment import PartitionAssignment
from strom_storage.node.notifier import AppendNotifier
from strom_storage.node.partition import IsrChange, Partition
from strom_storage.stats import NodeStats

log = structlog.get_logger(__name__)

__all__ = [
    "FetchPartitionRequest",
    "FetchPartitionResult",
    "Followers",
    "IsrUpdates",
    "ListOffsetsResult",
    "PartitionOutcome",
    "ProducePartitionResult",
    "ReplicaManager",
]

VALID_ACKS = (0, 1, -1)
#: acks=all wait when a produce request leaves timeout_ms unset (0), as Kafka's request.timeout.ms
DEFAULT_PRODUCE_TIMEOUT_MS = 30000
#: Partitions apply_assignments handles between two yields to the event loop.
APPLY_BATCH = 32
CONSUMER_REPLICA_ID = -1
#: Kafka's debugging consumer: reads any replica (leader or follower) up to its high watermark
DEBUG_REPLICA_ID = -2


@dataclass(frozen=True, slots=True)
class PartitionOutcome:
    """Outcome of an operation on one partition: an error, or None for success."""

    topic: str
    partition: int
    error: BrokerResponseError | None = None


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview = b""


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None
    offset: int = -1
    timestamp_ms: int = -1
    leader_epoch: int = -1


class Followers(Protocol):
    """Fetches the partitions this node follows from their leaders (``replica_fetcher``)."""

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its leader at its leader epoch (after truncating)."""

    def unfollow(self, key: tuple[str, int]) -> None: ...


class IsrUpdates(Protocol):
    """Sends ISR changes to the active controller (``isr_updates``)."""

    def propose(self, change: IsrChange) -> None: ...


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _as_broker_error(exc: Exception) -> BrokerResponseError:
    if isinstance(exc, BrokerResponseError):
        return exc
    return UnknownServerError(f"{type(exc).__name__}: {exc}")


class ReplicaManager:
    """The partitions of one storage node and the requests served over them."""

    def __init__(
        self,
        logs: LogManager,
        *,
        node_id: int,
        stats: NodeStats | None = None,
        replica_lag_time_max_ms: int = 30000,
    ) -> None:
        self.logs = logs
        self.node_id = node_id
        self.stats = stats or NodeStats()
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.followers: Followers | None = None
        self.isr_updates: IsrUpdates | None = None
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._notifier: AppendNotifier | None = None
        # What apply_assignments last applied, to skip partitions that did not change.
        self._applied: dict[tuple[str, int], PartitionAssignment] = {}
        self._applied_base: LogConfig | None = None

    # -- hosting ------------------------------------------------------------------------------

    def open_existing(self) -> list[tuple[str, int]]:
        """Serve every partition found in the log directories."""
        found = self.logs.startup()
        for topic, index in found:
            log_ = self.logs.get_log(topic, index)
            assert log_ is not None
            self._partitions[(topic, index)] = Partition(topic, index, log_, node_id=self.node_id)
        return found

    def host(self, topic: str, index: int, config: LogConfig | None = None) -> Partition:
        """Create (or reconfigure) the partition's log and serve it."""
        partition = self._partitions.get((topic, index))
        log_ = self.logs.get_or_create_log(topic, index, config)
        if partition is None:
            partition = Partition(topic, index, log_, node_id=self.node_id)
            self._partitions[(topic, index)] = partition
        return partition

    async def apply_assignments(
        self,
        desired: Mapping[tuple[str, int], PartitionAssignment],
        base_config: LogConfig,
        *,
        remove_others: bool,
    ) -> int:
        """Host what the controller assigned here, in the role it gave; with
        ``remove_others``, delete the logs of partitions no longer assigned to this node.

        Incremental: a partition whose assignment (and the broker defaults) did not change since
        the last call is skipped, so a change to one partition costs one partition's work, not
        the node's. Yields to the event loop every ``APPLY_BATCH`` partitions, so that creating
        thousands of logs never starves the registration keep-alive. Returns how many
        partitions it touched.
        """
        if base_config != self._applied_base:
            self._applied.clear()
            self._applied_base = base_config
        touched = 0
        for key, assignment in desired.items():
            if self._applied.get(key) == assignment and key in self._partitions:
                continue
            self._apply_one(key, assignment, base_config)
            self._applied[key] = assignment
            touched += 1
            if touched % APPLY_BATCH == 0:
                await asyncio.sleep(0)
        if remove_others:
            for key in [k for k in self._partitions if k not in desired]:
                self.remove(*key)
                touched += 1
                if touched % APPLY_BATCH == 0:
                    await asyncio.sleep(0)
        return touched

    def _apply_one(
        self, key: tuple[str, int], assignment: PartitionAssignment, base_config: LogConfig
    ) -> None:
        try:
            config = base_config.merged(assignment.configs)
        except ConfigurationError as exc:
            log.error(
                "invalid topic config; keeping the broker defaults",
                topic=assignment.topic,
                error=str(exc),
            )
            config = base_config
        partition = self.host(assignment.topic, assignment.partition, config)
        if assignment.leader == self.node_id:
            changed = partition.make_leader(
                assignment.leader_epoch,
                assignment.isr,
                replicas=assignment.replicas,
                partition_epoch=assignment.partition_epoch,
                now_ms=monotonic_ms(),
            )
            if changed and self.followers is not None:
                self.followers.unfollow(key)
            self._wake(key)  # a smaller ISR may have moved the high watermark
        else:
            changed = partition.make_follower(
                assignment.leader,
                assignment.leader_epoch,
                replicas=assignment.replicas,
                isr=assignment.isr,
                partition_epoch=assignment.partition_epoch,
            )
            if changed and self.followers is not None:
                if assignment.leader >= 0:
                    self.followers.follow(partition)
                else:
                    self.followers.unfollow(key)
        if changed:
            log.info(
                "partition role",
                topic=assignment.topic,
                partition=assignment.partition,
                leader=assignment.leader,
                leader_epoch=assignment.leader_epoch,
            )
            self._wake(key)

    def remove(self, topic: str, index: int) -> bool:
        """Stop serving the partition and delete its log."""
        self._applied.pop((topic, index), None)
        partition = self._partitions.pop((topic, index), None)
        if partition is None:
            return False
        if self.followers is not None:
            self.followers.unfollow((topic, index))
        partition.fail_waiters(
            NotLeaderOrFollowerError(f"node {self.node_id} no longer hosts {topic}-{index}")
        )
        self.logs.delete_log(topic, index)
        log.info("partition removed", topic=topic, partition=index)
        self._wake((topic, index))
        return True

    def _wake(self, key: tuple[str, int]) -> None:
        if self._notifier is not None:
            self._notifier.notify(key)

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def _partition(self, topic: str, index: int) -> Partition:
        partition = self._partitions.get((topic, index))
        if partition is None:
            raise UnknownTopicOrPartitionError(f"node {self.node_id} does not host {topic}-{index}")
        return partition

    @property
    def notifier(self) -> AppendNotifier:
        if self._notifier is None:
            self._notifier = AppendNotifier(asyncio.get_running_loop())
        return self._notifier

    # -- produce ------------------------------------------------------------------------------

    async def append(
        self, acks: int, timeout_ms: int, entries: Sequence[tuple[str, int, bytes | memoryview]]
    ) -> list[ProducePartitionResult]:
        """Append each (topic, partition, batches) entry; results in the same order."""
        if acks not in VALID_ACKS:
            invalid = InvalidRequiredAcksError(f"acks must be 0, 1 or -1 (all), got {acks}")
            return [ProducePartitionResult(t, p, invalid) for t, p, _ in entries]
        notifier = self.notifier
        results = []
        waits: list[tuple[int, Partition, int]] = []  # (result index, partition, offset)
        for topic, index, data in entries:
            try:
                partition = self._partition(topic, index)
                info = partition.append_as_leader(data, acks=acks)
            except Exception as exc:  # per-partition outcome; the others proceed
                error = _as_broker_error(exc)
                if not isinstance(exc, BrokerResponseError):
                    log.exception("append failed", topic=topic, partition=index)
                results.append(ProducePartitionResult(topic, index, error))
                continue
            if not info.duplicate:
                notifier.notify(partition.key)
                self.stats.record_in(topic, info.size_bytes, info.record_count)
            if acks == -1 and partition.log.high_watermark <= info.last_offset:
                waits.append((len(results), partition, info.last_offset + 1))
            results.append(
                ProducePartitionResult(
                    topic,
                    index,
                    base_offset=info.first_offset,
                    log_append_time_ms=info.log_append_time,
                    log_start_offset=info.log_start_offset,
                )
            )
        if waits:
            await self._await_replication(results, waits, timeout_ms)
        return results

    async def _await_replication(
        self,
        results: list[ProducePartitionResult],
        waits: list[tuple[int, Partition, int]],
        timeout_ms: int,
    ) -> None:
        """acks=all: the delayed produce, completed by the high watermark reaching each
        partition's last offset (futures resolved by ``Partition``, no polling)."""
        futures = [partition.wait_for_high_watermark(offset) for _, partition, offset in waits]
        pending: set[asyncio.Future[None]] = {f for f in futures if not f.done()}
        if pending:
            timeout_ms = timeout_ms if timeout_ms > 0 else DEFAULT_PRODUCE_TIMEOUT_MS
            _, pending = await asyncio.wait(pending, timeout=timeout_ms / 1000)
        for (i, partition, offset), future in zip(waits, futures, strict=True):
            error: BrokerResponseError | None
            if future in pending:
                future.cancel()
                error = RequestTimedOutError(
                    f"{partition.topic}-{partition.index}: the in-sync replicas "
                    f"{list(partition.isr)} did not reach offset {offset - 1} within "
                    f"{timeout_ms} ms (the write is on the leader and may still commit)"
                )
            else:
                exc = future.exception()
                error = None if exc is None else _as_broker_error(exc)  # type: ignore[arg-type]
            if error is not None:
                r = results[i]
                results[i] = ProducePartitionResult(r.topic, r.partition, error)

    # -- fetch --------------------------------------------------------------------------------

    async def fetch(
        self,
        requests: Sequence[FetchPartitionRequest],
        *,
        replica_id: int = CONSUMER_REPLICA_ID,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
    ) -> list[FetchPartitionResult]:
        """Whole batches per partition; waits up to ``max_wait_ms`` for ``min_bytes``."""
        if max_bytes < 0 or min_bytes < 0 or max_wait_ms < 0:
            raise InvalidRequestError("fetch max_bytes, min_bytes and max_wait_ms must be >= 0")
        if any(r.partition_max_bytes < 0 for r in requests):
            raise InvalidRequestError("fetch partition_max_bytes must be >= 0")
        isolation = FetchIsolation.HIGH_WATERMARK if replica_id < 0 else FetchIsolation.LOG_END
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000

        def satisfied(results: list[FetchPartitionResult]) -> bool:
            return (
                sum(len(r.records) for r in results) >= min_bytes
                or loop.time() >= deadline
                or any(r.error is not None for r in results)
            )

        # Most fetches are answered at once: read first, and only a fetch that will wait
        # registers for wake-ups (before reading again, so no append can slip between).
        refused: dict[tuple[str, int], Exception] = {}
        if replica_id >= 0:
            refused = self._record_follower_fetches(replica_id, requests)
        any_replica = replica_id == DEBUG_REPLICA_ID
        results = self._read_all(requests, isolation, max_bytes, refused, any_replica)
        keys = [(r.topic, r.partition) for r in requests]
        while not satisfied(results):
            waiter = self.notifier.watch(keys)
            try:
                results = self._read_all(requests, isolation, max_bytes, refused, any_replica)
                if satisfied(results):
                    break
                try:
                    async with asyncio.timeout(deadline - loop.time()):
                        await waiter.future
                except TimeoutError:
                    results = self._read_all(requests, isolation, max_bytes, refused, any_replica)
                    break
            finally:
                self.notifier.unwatch(waiter)
        for result in results:
            if result.records:
                self.stats.record_out(result.topic, result.records)
        return results

    def _record_follower_fetches(
        self, replica_id: int, requests: Sequence[FetchPartitionRequest]
    ) -> dict[tuple[str, int], Exception]:
        """A follower's fetch reports its log end offsets: advance high watermarks, wake the
        reads and acks=all produces waiting for them, propose ISR expansions. Returns the
        partitions whose fetch is refused, with why."""
        refused: dict[tuple[str, int], Exception] = {}
        now = monotonic_ms()
        for request in requests:
            key = (request.topic, request.partition)
            try:
                partition = self._partition(*key)
                partition.check_epoch(request.current_leader_epoch)
                if not partition.is_leader:
                    raise NotLeaderOrFollowerError(
                        f"node {self.node_id} does not lead {request.topic}-{request.partition}"
                    )
                if request.fetch_offset > partition.log.log_end_offset:
                    # A follower past our end has not reconciled with us yet: its position must
                    # not count towards the high watermark.
                    raise OffsetOutOfRangeError(
                        f"replica {replica_id} fetches {request.topic}-{request.partition} from "
                        f"{request.fetch_offset}, past the leader's log end "
                        f"{partition.log.log_end_offset}"
                    )
                if partition.update_follower(replica_id, request.fetch_offset, now):
                    self._wake(key)
                change = partition.isr_expansion(replica_id)
            except Exception as exc:
                refused[key] = exc
                continue
            if change is not None and self.isr_updates is not None:
                self.isr_updates.propose(change)
        return refused

    def _read_all(
        self,
        requests: Sequence[FetchPartitionRequest],
        isolation: FetchIsolation,
        max_bytes: int,
        refused: Mapping[tuple[str, int], Exception],
        any_replica: bool = False,
    ) -> list[FetchPartitionResult]:
        results = []
        budget = max_bytes
        returned_any = False
        for request in requests:
            try:
                if (reason := refused.get((request.topic, request.partition))) is not None:
                    raise reason
                partition = self._partition(request.topic, request.partition)
                partition.check_epoch(request.current_leader_epoch)
                if not partition.is_leader and not any_replica:
                    raise NotLeaderOrFollowerError(
                        f"node {self.node_id} does not lead {request.topic}-{request.partition}"
                    )
                limit = min(request.partition_max_bytes, budget)
                data = partition.log.read(
                    request.fetch_offset,
                    limit,
                    isolation=isolation,
                    # The first batch of the first non-empty partition always comes back, so a
                    # consumer makes progress even past a batch larger than its limits.
                    min_one_batch=not returned_any,
                )
            except Exception as exc:
                error = _as_broker_error(exc)
                if not isinstance(exc, BrokerResponseError):
                    log.exception("read failed", topic=request.topic, partition=request.partition)
                hw, start = self._offsets_or_unknown(request.topic, request.partition)
                results.append(
                    FetchPartitionResult(request.topic, request.partition, error, hw, start)
                )
                continue
            if data.records:
                returned_any = True
                budget = max(0, budget - len(data.records))
            results.append(
                FetchPartitionResult(
                    request.topic,
                    request.partition,
                    high_watermark=data.high_watermark,
                    log_start_offset=data.log_start_offset,
                    records=data.records,
                )
            )
        return results

    def _offsets_or_unknown(self, topic: str, index: int) -> tuple[int, int]:
        partition = self._partitions.get((topic, index))
        if partition is None:
            return -1, -1
        return partition.log.high_watermark, partition.log.log_start_offset

    # -- offsets ------------------------------------------------------------------------------

    def list_offset(
        self,
        topic: str,
        index: int,
        timestamp: int,
        *,
        replica_id: int = CONSUMER_REPLICA_ID,
        current_leader_epoch: int = -1,
    ) -> ListOffsetsResult:
        """Kafka's ListOffsets for one partition: ``timestamp`` may be EARLIEST_TIMESTAMP (-2),
        LATEST_TIMESTAMP (-1), MAX_TIMESTAMP (-3) or a time in ms."""
        try:
            partition = self._partition(topic, index)
            partition.check_epoch(current_leader_epoch)
            if timestamp < 0 and timestamp not in (
                EARLIEST_TIMESTAMP,
                LATEST_TIMESTAMP,
                MAX_TIMESTAMP,
            ):
                raise InvalidRequestError(f"ListOffsets timestamp {timestamp} is not valid")
            isolation = (
                FetchIsolation.HIGH_WATERMARK
                if replica_id == CONSUMER_REPLICA_ID
                else FetchIsolation.LOG_END
            )
            found = partition.log.offset_for_timestamp(timestamp, isolation=isolation)
        except Exception as exc:
            return ListOffsetsResult(topic, index, _as_broker_error(exc))
        if found is None:
            return ListOffsetsResult(topic, index, leader_epoch=partition.leader_epoch)
        return ListOffsetsResult(
            topic,
            index,
            offset=found.offset,
            timestamp_ms=found.timestamp,
            leader_epoch=partition.leader_epoch,
        )

    def end_offset_for_epoch(
        self, topic: str, index: int, epoch: int, current_leader_epoch: int = -1
    ) -> tuple[BrokerResponseError | None, int, int]:
        """OffsetForLeaderEpoch: (error, largest epoch <= ``epoch``, its end offset)."""
        try:
            partition = self._partition(topic, index)
            partition.check_epoch(current_leader_epoch)
            found_epoch, end = partition.log.end_offset_for_epoch(epoch)
        except Exception as exc:
            return _as_broker_error(exc), -1, -1
        return None, found_epoch, end

    def delete_records(
        self, topic: str, index: int, offset: int
    ) -> tuple[BrokerResponseError | None, int]:
        """Advance the log start offset to ``offset`` (-1: the high watermark)."""
        try:
            partition = self._partition(topic, index)
            target = partition.log.high_watermark if offset == -1 else offset
            if target < 0:
                raise OffsetOutOfRangeError(f"cannot delete records up to offset {offset}")
            low = partition.log.delete_records(target)
        except Exception as exc:
            return _as_broker_error(exc), -1
        return None, low

    # -- the ISR ------------------------------------------------------------------------------

    def isr_committed(self, change: IsrChange, isr: tuple[int, ...], partition_epoch: int) -> None:
        """The controller accepted an ISR change this node proposed."""
        partition = self._partitions.get((change.topic, change.partition))
        if partition is None:
            return
        before = set(partition.isr)
        if partition.isr_committed(change, isr, partition_epoch):
            self._wake(partition.key)
        after = set(partition.isr)
        if after != before:
            self.stats.isr_changed(change.topic, expanded=len(after - before),
                                   shrunk=len(before - after))  # fmt: skip
            log.info("ISR changed", topic=change.topic, partition=change.partition,
                     isr=sorted(after), partition_epoch=partition_epoch)  # fmt: skip

    def isr_rejected(self, change: IsrChange) -> None:
        partition = self._partitions.get((change.topic, change.partition))
        if partition is not None:
            partition.isr_rejected(change)

    def shrink_lagging_isrs(self, now_ms: int | None = None) -> list[IsrChange]:
        """Propose dropping followers that have not caught up for replica.lag.time.max.ms."""
        now = monotonic_ms() if now_ms is None else now_ms
        changes = []
        for partition in self._partitions.values():
            change = partition.isr_shrink(now, self.replica_lag_time_max_ms)
            if change is not None:
                changes.append(change)
                log.warning(
                    "follower(s) fell out of sync; shrinking the ISR",
                    topic=partition.topic,
                    partition=partition.index,
                    isr=list(partition.isr),
                    new_isr=list(change.new_isr),
                )
                if self.isr_updates is not None:
                    self.isr_updates.propose(change)
        return changes

    async def run_isr_checks(self) -> None:
        """Check for lagging followers every half replica.lag.time.max.ms (Kafka's rhythm)."""
        while True:
            await asyncio.sleep(self.replica_lag_time_max_ms / 2000)
            try:
                self.shrink_lagging_isrs()
            except Exception:
                log.exception("ISR check failed")

    # -- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        try:
            self.logs.close()
        except StorageError:
            log.exception("closing logs failed")
            raise
