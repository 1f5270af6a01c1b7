"""Produce, fetch and offset requests over the partitions this node hosts.

Requests reach here as plain Python values (``node.results``) from the servicer; every
per-partition problem is returned as that partition's ``error`` (a
``strom.errors.BrokerResponseError``), so one bad partition never fails a whole request, and a
rejected append leaves its log untouched.

Data path (design rules 1, 3, 4): produce hands each partition's bytes to ``Log`` which checks
headers and CRCs and patches offsets in place; fetch returns raw byte ranges of whole batches
read from segment files (``node.reads``). A fetch short of ``min_bytes`` waits, up to
``max_wait_ms``, for an append to wake it (``AppendNotifier``), never polling; acks=all
produces, transaction markers and DeleteRecords wait as delayed operations (``node.delayed``).

Which partitions the node hosts, in which role, is ``node.hosted`` (``HostedPartitions``:
the controller's assignments, the followers' fetching).

Replication (design, "Replication"): a follower's fetch carries its node id and its log end
and log start offsets; the leader records them (``Partition.update_follower``), which may
advance the high watermark, complete acks=all produces and DeleteRecords waiting for it, and
admit the follower to the ISR. A DeleteRecords moves the leader's log start at once and wakes
the followers' waiting fetches, which return with the new start.
ISR changes are proposed to the controller through ``IsrUpdates`` (AlterPartition); the
followers' own fetching is ``Followers``' job (``replica_fetcher``). Both are absent on a
standalone node, whose partitions are their own ISR.

Ordering: ``append`` does all its work before its first ``await``, so requests handled in
arrival order append in that order (what pipelined ProduceStream relies on). The one exception
is a transaction's first write to a partition, which waits for the transaction coordinator's
verification (``node.deferred_appends``); later appends of that partition queue behind it, so
per partition the order still holds.

Transactions: ``write_txn_markers`` appends COMMIT/ABORT markers and answers once the high
watermark passes them; consumers' fetches and ListOffsets under read_committed stop at the last
stable offset; ``describe_producers`` lists a led partition's active producers.

Thread-safety: one event loop drives a ReplicaManager.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Protocol

import structlog

from strom.errors import (
    BrokerResponseError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTxnStateError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    StorageError,
)
from strom_storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchIsolation,
)
from strom_storage.log.log_manager import LogManager
from strom_storage.node.deferred_appends import DeferredAppends
from strom_storage.node.delayed import await_high_watermarks, await_log_starts
from strom_storage.node.hosted import HostedPartitions, monotonic_ms
from strom_storage.node.leader_lease import LeaderLease
from strom_storage.node.loop_watch import APPLY_SLICE_S, LoopSlice
from strom_storage.node.partition import IsrChange, Partition
from strom_storage.node.reads import read_partitions
from strom_storage.node.results import (
    FetchPartitionRequest,
    FetchPartitionResult,
    ListOffsetsResult,
    ProducePartitionResult,
    ProducersResult,
    as_broker_error,
)
from strom_storage.node.txn import DeferredAppend, TxnMarker, TxnMarkerResult, TxnVerifier
from strom_storage.stats import NodeStats

log = structlog.get_logger(__name__)

__all__ = ["IsrUpdates", "ReplicaManager"]

VALID_ACKS = (0, 1, -1)
CONSUMER_REPLICA_ID = -1
#: Kafka's debugging consumer: reads any replica (leader or follower) up to its high watermark
DEBUG_REPLICA_ID = -2


class IsrUpdates(Protocol):
    """Sends ISR changes to the active controller (``isr_updates``)."""

    def propose(self, change: IsrChange) -> None: ...


class ReplicaManager:
    """The requests served over the partitions of one storage node."""

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
        #: the partitions and their roles (what the controller's assignments change)
        self.hosted = HostedPartitions(logs, node_id=node_id)
        self.isr_updates: IsrUpdates | None = None
        #: asks transaction coordinators (absent on a standalone node: nothing to ask)
        self.txn_verifier: TxnVerifier | None = None
        #: bounds acks=all acknowledgements by the etcd session (absent on a standalone node)
        self.lease: LeaderLease | None = None
        self.verifications = DeferredAppends(self.hosted, self.stats)

    # -- produce ------------------------------------------------------------------------------

    async def append(
        self,
        acks: int,
        timeout_ms: int,
        entries: Sequence[tuple[str, int, bytes | memoryview]],
        transactional_id: str = "",
    ) -> list[ProducePartitionResult]:
        """Append each (topic, partition, batches) entry; results in the same order.

        ``transactional_id`` (the request's) is what a transaction's first write to a
        partition is verified under (see ``node.txn``)."""
        if acks not in VALID_ACKS:
            invalid = InvalidRequiredAcksError(f"acks must be 0, 1 or -1 (all), got {acks}")
            return [ProducePartitionResult(t, p, invalid) for t, p, _ in entries]
        if acks == -1 and self.lease is not None and self.lease.expired():
            return [
                ProducePartitionResult(t, p, self.lease.error(self.node_id, f"{t}-{p}"))
                for t, p, _ in entries
            ]
        hosted = self.hosted
        notifier = hosted.notifier
        results: list[ProducePartitionResult] = []
        waits: list[tuple[int, Partition, int]] = []  # (result index, partition, offset)
        deferred: list[DeferredAppend] | None = None
        queued = self.verifications.queue.tails
        for topic, index, data in entries:
            try:
                partition = hosted.get(topic, index)
                if queued and partition.key in queued:  # behind an append being verified
                    deferred = deferred or []
                    deferred.append(DeferredAppend(len(results), partition.key, data))
                    results.append(ProducePartitionResult(topic, index))
                    continue
                info = partition.append_as_leader(data, acks=acks)
            except InvalidTxnStateError as exc:
                entry = self.verifications.to_verify(len(results), topic, index, data, exc)
                if entry.needs:
                    deferred = deferred or []
                    deferred.append(entry)
                results.append(ProducePartitionResult(topic, index, entry.error))
                continue
            except Exception as exc:  # per-partition outcome; the others proceed
                error = as_broker_error(exc)
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
        if deferred is not None:
            await self.verifications.append(
                deferred, results, waits, acks, transactional_id, verifier=self.txn_verifier
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
        errors = await await_high_watermarks(
            [(p, o) for _, p, o in waits], timeout_ms, lease=self.lease, node_id=self.node_id
        )
        for (i, _, _), error in zip(waits, errors, strict=True):
            if error is not None:
                r = results[i]
                results[i] = ProducePartitionResult(r.topic, r.partition, error)

    # -- transactions -------------------------------------------------------------------------

    async def write_txn_markers(
        self, markers: Sequence[TxnMarker], timeout_ms: int
    ) -> list[TxnMarkerResult]:
        """WriteTxnMarkers: per marker and partition, append the COMMIT/ABORT control batch on
        this leader at its current leader epoch, then answer once the high watermark passed
        it (acks=all; REQUEST_TIMED_OUT after ``timeout_ms``). A marker the partition already
        has (its epoch already ended) writes nothing and waits only for what the log holds to
        be committed."""
        if self.lease is not None and self.lease.expired():
            return [
                TxnMarkerResult(
                    m.producer_id,
                    tuple(
                        (t, p, self.lease.error(self.node_id, f"{t}-{p}")) for t, p in m.partitions
                    ),
                )
                for m in markers
            ]
        notifier = self.hosted.notifier
        rows: list[list[tuple[str, int, BrokerResponseError | None]]] = []
        waits: list[tuple[int, int, Partition, int]] = []  # (marker, partition, p, offset)
        for marker in markers:
            row: list[tuple[str, int, BrokerResponseError | None]] = []
            for topic, index in marker.partitions:
                try:
                    partition = self.hosted.get(topic, index)
                    info = partition.append_txn_marker(
                        marker.producer_id,
                        marker.producer_epoch,
                        committed=marker.committed,
                        coordinator_epoch=marker.coordinator_epoch,
                    )
                except Exception as exc:
                    if not isinstance(exc, BrokerResponseError):
                        log.exception("marker append failed", topic=topic, partition=index)
                    row.append((topic, index, as_broker_error(exc)))
                    continue
                if info is not None:
                    notifier.notify(partition.key)  # read_committed fetches: the LSO may move
                    self.stats.marker_written(topic, committed=marker.committed)
                    required = info.last_offset + 1
                else:
                    required = partition.log.log_end_offset
                if partition.log.high_watermark < required:
                    waits.append((len(rows), len(row), partition, required))
                row.append((topic, index, None))
            rows.append(row)
        if waits:
            errors = await await_high_watermarks(
                [(p, offset) for _, _, p, offset in waits],
                timeout_ms,
                lease=self.lease,
                node_id=self.node_id,
            )
            for (m, i, _, _), error in zip(waits, errors, strict=True):
                if error is not None:
                    topic, index, _ = rows[m][i]
                    rows[m][i] = (topic, index, error)
        return [
            TxnMarkerResult(marker.producer_id, tuple(row))
            for marker, row in zip(markers, rows, strict=True)
        ]

    def describe_producers(self, topic: str, index: int) -> ProducersResult:
        """The active producers of a partition this node leads (NOT_LEADER_OR_FOLLOWER when it
        does not)."""
        try:
            partition = self.hosted.get(topic, index)
            if not partition.is_leader:
                raise NotLeaderOrFollowerError(f"node {self.node_id} does not lead {topic}-{index}")
            producers = tuple(partition.log.active_producers())
        except Exception as exc:
            return ProducersResult(topic, index, as_broker_error(exc))
        return ProducersResult(topic, index, producers=producers)

    # -- fetch --------------------------------------------------------------------------------

    async def fetch(
        self,
        requests: Sequence[FetchPartitionRequest],
        *,
        replica_id: int = CONSUMER_REPLICA_ID,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        read_committed: bool = False,
    ) -> list[FetchPartitionResult]:
        """Whole batches per partition; waits up to ``max_wait_ms`` for ``min_bytes``.

        ``read_committed`` (consumers only; replicas always read to the log end): batches up to
        the last stable offset, with the aborted transactions among them; ``min_bytes`` then
        counts only those bytes, and a marker moving the LSO wakes the wait."""
        if max_bytes < 0 or min_bytes < 0 or max_wait_ms < 0:
            raise InvalidRequestError("fetch max_bytes, min_bytes and max_wait_ms must be >= 0")
        if any(r.partition_max_bytes < 0 for r in requests):
            raise InvalidRequestError("fetch partition_max_bytes must be >= 0")
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        elif read_committed:
            isolation = FetchIsolation.TXN_COMMITTED
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000

        # A follower whose log starts before ours learns the new start at once (DeleteRecords
        # waits for every in-sync replica's log to start there).
        starts = {(r.topic, r.partition): r.log_start_offset for r in requests}

        def satisfied(results: list[FetchPartitionResult]) -> bool:
            return (
                sum(len(r.records) for r in results) >= min_bytes
                or loop.time() >= deadline
                or any(r.error is not None for r in results)
                or (
                    replica_id >= 0
                    and any(r.log_start_offset > starts[(r.topic, r.partition)] for r in results)
                )
            )

        # Most fetches are answered at once: read first, and only a fetch that will wait
        # registers for wake-ups (before reading again, so no append can slip between).
        refused: dict[tuple[str, int], Exception] = {}
        if replica_id >= 0:
            refused = await self._record_follower_fetches(replica_id, requests)
        read = functools.partial(
            read_partitions, self.hosted, requests, isolation, max_bytes, refused=refused,
            any_replica=replica_id == DEBUG_REPLICA_ID,
        )  # fmt: skip
        results = await read()
        keys = [(r.topic, r.partition) for r in requests]
        while not satisfied(results):
            waiter = self.hosted.notifier.watch(keys)
            try:
                results = await read()
                if satisfied(results):
                    break
                try:
                    async with asyncio.timeout(deadline - loop.time()):
                        await waiter.future
                except TimeoutError:
                    results = await read()
                    break
            finally:
                self.hosted.notifier.unwatch(waiter)
        for result in results:
            if result.records:
                self.stats.record_out(result.topic, result.records)
        return results

    async def _record_follower_fetches(
        self, replica_id: int, requests: Sequence[FetchPartitionRequest]
    ) -> dict[tuple[str, int], Exception]:
        """A follower's fetch reports its log end offsets: advance high watermarks, wake the
        reads and acks=all produces waiting for them, propose ISR expansions. Returns the
        partitions whose fetch is refused, with why. Yields the loop every ``APPLY_SLICE_S``
        (a follower of thousands of partitions)."""
        refused: dict[tuple[str, int], Exception] = {}
        now = monotonic_ms()
        loop_slice = LoopSlice(APPLY_SLICE_S)
        for request in requests:
            await loop_slice.pause()
            key = (request.topic, request.partition)
            try:
                partition = self.hosted.get(*key)
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
                moved = partition.update_follower(
                    replica_id, request.fetch_offset, now, request.log_start_offset
                )
                if moved:
                    self.hosted.wake(key)
                change = partition.isr_expansion(replica_id)
            except Exception as exc:
                refused[key] = exc
                continue
            if change is not None and self.isr_updates is not None:
                self.isr_updates.propose(change)
        return refused

    # -- offsets ------------------------------------------------------------------------------

    def list_offset(
        self,
        topic: str,
        index: int,
        timestamp: int,
        *,
        replica_id: int = CONSUMER_REPLICA_ID,
        current_leader_epoch: int = -1,
        read_committed: bool = False,
    ) -> ListOffsetsResult:
        """Kafka's ListOffsets for one partition: ``timestamp`` may be EARLIEST_TIMESTAMP (-2),
        LATEST_TIMESTAMP (-1), MAX_TIMESTAMP (-3) or a time in ms. A consumer's
        ``read_committed`` lookup sees only offsets below the last stable offset (LATEST: the
        LSO)."""
        try:
            partition = self.hosted.get(topic, index)
            partition.check_epoch(current_leader_epoch)
            if replica_id == CONSUMER_REPLICA_ID and not partition.is_leader:
                # A follower's log start and high watermark lag the leader's.
                raise NotLeaderOrFollowerError(f"node {self.node_id} does not lead {topic}-{index}")
            if timestamp < 0 and timestamp not in (
                EARLIEST_TIMESTAMP,
                LATEST_TIMESTAMP,
                MAX_TIMESTAMP,
            ):
                raise InvalidRequestError(f"ListOffsets timestamp {timestamp} is not valid")
            if replica_id != CONSUMER_REPLICA_ID:
                isolation = FetchIsolation.LOG_END
            elif read_committed:
                isolation = FetchIsolation.TXN_COMMITTED
            else:
                isolation = FetchIsolation.HIGH_WATERMARK
            found = partition.log.reader.offset_for_timestamp(timestamp, isolation=isolation)
        except Exception as exc:
            return ListOffsetsResult(topic, index, as_broker_error(exc))
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
            partition = self.hosted.get(topic, index)
            partition.check_epoch(current_leader_epoch)
            found_epoch, end = partition.log.end_offset_for_epoch(epoch)
        except Exception as exc:
            return as_broker_error(exc), -1, -1
        return None, found_epoch, end

    async def delete_records(
        self, entries: Sequence[tuple[str, int, int]], timeout_ms: int
    ) -> list[tuple[BrokerResponseError | None, int]]:
        """DeleteRecords: per (topic, partition, offset), the leader's log start moves up to
        the offset (-1: the high watermark) at once; the answer, (error, low watermark), comes
        once every in-sync replica's log starts there too (REQUEST_TIMED_OUT after
        ``timeout_ms``, 0: the default), as Kafka's delayed DeleteRecords."""
        if self.lease is not None and self.lease.expired():
            return [(self.lease.error(self.node_id, f"{t}-{p}"), -1) for t, p, _ in entries]
        answers: list[tuple[BrokerResponseError | None, int]] = []
        waits: list[tuple[Partition, int, asyncio.Future[int]]] = []
        waiting: list[int] = []  # the answer index of each wait
        for topic, index, offset in entries:
            try:
                partition = self.hosted.get(topic, index)
                target, future = partition.delete_records(offset)
            except Exception as exc:
                answers.append((as_broker_error(exc), -1))
                continue
            waiting.append(len(answers))
            waits.append((partition, target, future))
            answers.append((None, -1))
            self.hosted.wake(partition.key)  # followers' waiting fetches return with the new start
        for i, answer in zip(waiting, await await_log_starts(waits, timeout_ms), strict=True):
            answers[i] = answer
        return answers

    # -- the ISR ------------------------------------------------------------------------------

    def isr_committed(self, change: IsrChange, isr: tuple[int, ...], partition_epoch: int) -> None:
        """The controller accepted an ISR change this node proposed."""
        partition = self.hosted.find((change.topic, change.partition))
        if partition is None:
            return
        before = set(partition.isr)
        if partition.isr_committed(change, isr, partition_epoch):
            self.hosted.wake(partition.key)
        after = set(partition.isr)
        if after != before:
            self.stats.isr_changed(change.topic, expanded=len(after - before),
                                   shrunk=len(before - after))  # fmt: skip
            log.info("ISR changed", topic=change.topic, partition=change.partition,
                     isr=sorted(after), partition_epoch=partition_epoch)  # fmt: skip

    def isr_rejected(self, change: IsrChange) -> None:
        partition = self.hosted.find((change.topic, change.partition))
        if partition is not None:
            partition.isr_rejected(change)

    def shrink_lagging_isrs(self, now_ms: int | None = None) -> list[IsrChange]:
        """Propose dropping followers that have not caught up for replica.lag.time.max.ms."""
        now = monotonic_ms() if now_ms is None else now_ms
        changes = []
        for partition in self.hosted.partitions():
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
