"""Produce, fetch and offset requests over the partitions this node hosts.

Requests reach here as plain Python values from the servicer; every per-partition problem is
returned as that partition's ``error`` (a ``strom.errors.BrokerResponseError``), so one bad
partition never fails a whole request, and a rejected append leaves its log untouched.

Data path (design rules 1, 3, 4): produce hands each partition's bytes to ``Log`` which checks
headers and CRCs and patches offsets in place; fetch returns raw byte ranges of whole batches
read from segment files. A fetch short of ``min_bytes`` waits, up to ``max_wait_ms``, for an
append to wake it (``AppendNotifier``), never polling.

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
verification (``node.txn``); later appends of that partition queue behind it, so per partition
the order still holds.

Transactions: ``write_txn_markers`` appends COMMIT/ABORT markers and answers once the high
watermark passes them; consumers' fetches and ListOffsets under read_committed stop at the last
stable offset; ``describe_producers`` lists a led partition's active producers.

Thread-safety: one event loop drives a ReplicaManager.
"""

from __future__ import annotations

import asyncio
import errno
import resource
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

from strom.errors import (
    BrokerResponseError,
    ConfigurationError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTxnStateError,
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
from strom_storage.node.leader_lease import LeaderLease
from strom_storage.node.loop_watch import LoopSlice
from strom_storage.node.notifier import AppendNotifier
from strom_storage.node.partition import IsrChange, Partition
from strom_storage.node.txn import (
    DeferredAppend,
    TxnMarker,
    TxnMarkerResult,
    TxnVerifier,
    VerificationQueue,
    verification_requests,
)
from strom_storage.stats import NodeStats

if TYPE_CHECKING:
    from strom_storage.log.producer_state import ActiveProducer

log = structlog.get_logger(__name__)

__all__ = [
    "FetchPartitionRequest",
    "FetchPartitionResult",
    "Followers",
    "IsrUpdates",
    "ListOffsetsResult",
    "PartitionOutcome",
    "ProducePartitionResult",
    "ProducersResult",
    "ReplicaManager",
]

VALID_ACKS = (0, 1, -1)
#: acks=all wait when a produce request leaves timeout_ms unset (0), as Kafka's request.timeout.ms
DEFAULT_PRODUCE_TIMEOUT_MS = 30000
#: How long apply_assignments, and a fetch over many partitions, may hold the event loop
#: before they yield (seconds).
APPLY_SLICE_S = 0.02
#: New partition logs apply_assignments creates per worker-thread call.
CREATE_CHUNK = 64
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
    #: A follower's log start offset (replica fetches; -1 when not reported).
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview = b""
    last_stable_offset: int = -1
    #: read_committed only: (producer id, first offset) of the aborted transactions overlapping
    #: the returned batches
    aborted_transactions: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None
    offset: int = -1
    timestamp_ms: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ProducersResult:
    """DescribeProducers for one partition: its leader's active producers, or the error."""

    topic: str
    partition: int
    error: BrokerResponseError | None = None
    producers: tuple[ActiveProducer, ...] = ()


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


def open_files_hint(exc: BaseException) -> str:
    """What to do when ``exc`` (or its cause) is the process running out of file descriptors
    (EMFILE); empty otherwise."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.EMFILE:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            return (
                f"the node hit its open-files limit ({soft}): every hosted partition keeps 3 "
                "files open (log, offset index, time index), so raise the limit (ulimit -n, "
                "LimitNOFILE, docker --ulimit nofile) above 3 x partitions plus connections"
            )
        seen = seen.__cause__ or seen.__context__
    return ""


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
        #: asks transaction coordinators (absent on a standalone node: nothing to ask)
        self.txn_verifier: TxnVerifier | None = None
        #: bounds acks=all acknowledgements by the etcd session (absent on a standalone node)
        self.lease: LeaderLease | None = None
        self._verifications = VerificationQueue()
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._notifier: AppendNotifier | None = None
        # What apply_assignments last applied, to skip partitions that did not change.
        self._applied: dict[tuple[str, int], PartitionAssignment] = {}
        self._applied_base: LogConfig | None = None
        #: partitions the last apply_assignments could not host (retried by the next call)
        self.unapplied = 0

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
        the node's. The logs of partitions new to this node are created in a worker thread,
        ``CREATE_CHUNK`` at a time (``_create_logs``): directories, empty segments and their
        fsyncs never block the event loop. The rest (roles, fetchers) runs on the loop, which it
        yields once it has held it for ``APPLY_SLICE_S``: a controller pushing thousands of
        partitions at once delays requests and the node's etcd keep-alive by a slice at a time,
        never by the whole burst. Returns how many partitions it touched.
        """
        if base_config != self._applied_base:
            self._applied.clear()
            self._applied_base = base_config
        changed = [
            (key, assignment)
            for key, assignment in desired.items()
            if self._applied.get(key) != assignment or key not in self._partitions
        ]
        loop_slice = LoopSlice(APPLY_SLICE_S)
        failed: list[tuple[tuple[str, int], Exception]] = []
        for start in range(0, len(changed), CREATE_CHUNK):
            chunk = changed[start : start + CREATE_CHUNK]
            configs = [self._config_of(assignment, base_config) for _, assignment in chunk]
            new = [
                (assignment, config)
                for (key, assignment), config in zip(chunk, configs, strict=True)
                if key not in self._partitions and self.logs.get_log(*key) is None
            ]
            if new:
                await asyncio.to_thread(self._create_logs, new)
            for (key, assignment), config in zip(chunk, configs, strict=True):
                try:
                    self._apply_one(key, assignment, config)
                except Exception as exc:  # this partition waits for the next pass; the others go on
                    failed.append((key, exc))
                else:
                    self._applied[key] = assignment
                await loop_slice.pause()
        self.unapplied = len(failed)
        if failed:
            (topic, index), first = failed[0]
            log.error("partitions could not be hosted; retrying", count=len(failed),
                      topic=topic, partition=index, error=str(first),
                      hint=open_files_hint(first))  # fmt: skip
        touched = len(changed) - len(failed)
        if remove_others:
            for key in [k for k in self._partitions if k not in desired]:
                self.remove(*key)
                touched += 1
                await loop_slice.pause()
        return touched

    def _create_logs(self, new: Sequence[tuple[PartitionAssignment, LogConfig]]) -> None:
        """Create the logs of partitions new to this node (in a worker thread: ``LogManager``
        and ``Log`` are thread-safe, and no request reaches these logs before ``_apply_one``
        serves them). A partition this node is to lead gets its leader epoch recorded here
        too (the epoch checkpoint's fsync), so ``make_leader`` finds it done. A failure is
        logged and left to ``_apply_one``, which tries again on the loop."""
        for assignment, config in new:
            try:
                log_ = self.logs.get_or_create_log(assignment.topic, assignment.partition, config)
                if assignment.leader == self.node_id:
                    log_.assign_leader_epoch(assignment.leader_epoch)
            except Exception as exc:
                log.warning("creating a partition log failed", topic=assignment.topic,
                            partition=assignment.partition, error=str(exc),
                            hint=open_files_hint(exc))  # fmt: skip

    def _config_of(self, assignment: PartitionAssignment, base_config: LogConfig) -> LogConfig:
        """The partition's log config: the broker defaults merged with its topic's configs."""
        try:
            return base_config.merged(assignment.configs)
        except ConfigurationError as exc:
            log.error(
                "invalid topic config; keeping the broker defaults",
                topic=assignment.topic,
                error=str(exc),
            )
            return base_config

    def _apply_one(
        self, key: tuple[str, int], assignment: PartitionAssignment, config: LogConfig
    ) -> None:
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
        notifier = self.notifier
        results: list[ProducePartitionResult] = []
        waits: list[tuple[int, Partition, int]] = []  # (result index, partition, offset)
        deferred: list[DeferredAppend] | None = None
        queued = self._verifications.tails
        for topic, index, data in entries:
            try:
                partition = self._partition(topic, index)
                if queued and partition.key in queued:  # behind an append being verified
                    deferred = deferred or []
                    deferred.append(DeferredAppend(len(results), partition.key, data))
                    results.append(ProducePartitionResult(topic, index))
                    continue
                info = partition.append_as_leader(data, acks=acks)
            except InvalidTxnStateError as exc:
                entry = self._to_verify(len(results), topic, index, data, exc)
                if entry.needs:
                    deferred = deferred or []
                    deferred.append(entry)
                results.append(ProducePartitionResult(topic, index, entry.error))
                continue
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
        if deferred is not None:
            await self._append_deferred(deferred, results, waits, acks, transactional_id)
        if waits:
            await self._await_replication(results, waits, timeout_ms)
        return results

    def _to_verify(
        self, result_index: int, topic: str, index: int, data: bytes | memoryview,
        refusal: InvalidTxnStateError,
    ) -> DeferredAppend:  # fmt: skip
        """A leader refused ``data`` with INVALID_TXN_STATE: the transactions to verify before
        appending it (``needs``), or, when none, the refusal stands (``error``)."""
        entry = DeferredAppend(result_index, (topic, index), data)
        try:
            entry.needs = self._partition(topic, index).log.transactions_to_verify(data)
        except Exception as exc:
            entry.error = _as_broker_error(exc)
            return entry
        if not entry.needs:
            entry.error = refusal
        return entry

    async def _append_deferred(
        self,
        deferred: list[DeferredAppend],
        results: list[ProducePartitionResult],
        waits: list[tuple[int, Partition, int]],
        acks: int,
        transactional_id: str,
    ) -> None:
        """Verify and append the entries ``append`` could not append at once, in order after
        the earlier deferred appends of their partitions."""
        keys = [entry.key for entry in deferred]
        queue = self._verifications
        turn = queue.enter(keys)
        try:
            await queue.wait(turn)
            for entry in deferred:
                if entry.needs is None:  # queued only: its predecessor may have opened it
                    self._try_append(entry, results, waits, acks)
            await self._verify(transactional_id, deferred)
            for entry in deferred:
                if entry.needs and entry.error is None:
                    self._try_append(entry, results, waits, acks, verified=entry.needs)
                if entry.error is not None:
                    r = results[entry.result_index]
                    results[entry.result_index] = ProducePartitionResult(
                        r.topic, r.partition, entry.error
                    )
        finally:
            queue.leave(turn, keys)

    def _try_append(
        self,
        entry: DeferredAppend,
        results: list[ProducePartitionResult],
        waits: list[tuple[int, Partition, int]],
        acks: int,
        verified: set[tuple[int, int]] | None = None,
    ) -> None:
        """Append a deferred entry: its result, or ``entry.needs`` set when it must be
        verified first, or ``entry.error``."""
        topic, index = entry.key
        try:
            partition = self._partition(topic, index)
            info = partition.append_as_leader(entry.data, acks=acks, verified=verified)
        except InvalidTxnStateError as exc:
            if verified is None:
                found = self._to_verify(entry.result_index, topic, index, entry.data, exc)
                entry.needs, entry.error = found.needs, found.error
            else:
                entry.error = exc
            return
        except Exception as exc:
            entry.error = _as_broker_error(exc)
            if not isinstance(exc, BrokerResponseError):
                log.exception("append failed", topic=topic, partition=index)
            return
        entry.needs = None
        if not info.duplicate:
            self.notifier.notify(partition.key)
            self.stats.record_in(topic, info.size_bytes, info.record_count)
        if acks == -1 and partition.log.high_watermark <= info.last_offset:
            waits.append((entry.result_index, partition, info.last_offset + 1))
        results[entry.result_index] = ProducePartitionResult(
            topic,
            index,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time,
            log_start_offset=info.log_start_offset,
        )

    async def _verify(self, transactional_id: str, deferred: list[DeferredAppend]) -> None:
        """Ask the coordinators about every (producer id, epoch) the entries need (one call
        each, concurrently); a refused entry gets the coordinator's error."""
        requests = verification_requests(transactional_id, deferred)
        if not requests:
            return
        verifier = self.txn_verifier
        if verifier is None:
            refusal = InvalidTxnStateError(
                f"node {self.node_id} runs without a cluster: it has no transaction coordinator "
                "to verify a transaction with"
            )
            for entry in deferred:
                if entry.needs and entry.error is None:
                    entry.error = refusal
            return
        producers = list(requests)
        answers = await asyncio.gather(
            *(
                verifier.verify(transactional_id, pid, epoch, requests[(pid, epoch)])
                for pid, epoch in producers
            ),
            return_exceptions=True,
        )
        verdicts: dict[tuple[int, int], Mapping[tuple[str, int], BrokerResponseError | None]] = {}
        for producer, outcome in zip(producers, answers, strict=True):
            if isinstance(outcome, BaseException):
                log.error("transaction verification failed", producer_id=producer[0],
                          error=repr(outcome))  # fmt: skip
                failure = UnknownServerError(f"verification failed: {outcome!r}")
                answer: Mapping[tuple[str, int], BrokerResponseError | None] = dict.fromkeys(
                    requests[producer], failure
                )
            else:
                answer = outcome
            verdicts[producer] = answer
            refused = sum(1 for error in answer.values() if error is not None)
            self.stats.txn_verified(ok=len(answer) - refused, refused=refused)
        for entry in deferred:
            if not entry.needs or entry.error is not None:
                continue
            for producer in entry.needs:
                answer = verdicts[producer]
                error = (
                    answer[entry.key]
                    if entry.key in answer
                    else UnknownServerError(f"the transaction coordinator left {entry.key} out")
                )
                if error is not None:
                    entry.error = error
                    break

    async def _await_replication(
        self,
        results: list[ProducePartitionResult],
        waits: list[tuple[int, Partition, int]],
        timeout_ms: int,
    ) -> None:
        """acks=all: the delayed produce, completed by the high watermark reaching each
        partition's last offset (futures resolved by ``Partition``, no polling)."""
        errors = await self._await_high_watermarks([(p, o) for _, p, o in waits], timeout_ms)
        for (i, _, _), error in zip(waits, errors, strict=True):
            if error is not None:
                r = results[i]
                results[i] = ProducePartitionResult(r.topic, r.partition, error)

    async def _await_high_watermarks(
        self, waits: Sequence[tuple[Partition, int]], timeout_ms: int
    ) -> list[BrokerResponseError | None]:
        """Per (partition, offset): None once the high watermark reached the offset, else why
        not (REQUEST_TIMED_OUT after ``timeout_ms``, 0: the default; NOT_LEADER_OR_FOLLOWER
        when the leader lease ran out first)."""
        futures = [partition.wait_for_high_watermark(offset) for partition, offset in waits]
        pending: set[asyncio.Future[None]] = {f for f in futures if not f.done()}
        timeout_ms = timeout_ms if timeout_ms > 0 else DEFAULT_PRODUCE_TIMEOUT_MS
        deadline = time.monotonic() + timeout_ms / 1000
        lease_lost = False
        while pending:
            left = deadline - time.monotonic()
            if self.lease is not None:
                if self.lease.expired():
                    lease_lost = True
                    break
                left = min(left, self.lease.remaining_s())
            if left <= 0:
                break
            _, pending = await asyncio.wait(pending, timeout=left)
        errors: list[BrokerResponseError | None] = []
        for (partition, offset), future in zip(waits, futures, strict=True):
            error: BrokerResponseError | None
            if lease_lost:
                # nothing is acknowledged once the lease ran out, not even what made it
                future.cancel()
                assert self.lease is not None
                error = self.lease.error(self.node_id, f"{partition.topic}-{partition.index}")
            elif future in pending:
                future.cancel()
                error = RequestTimedOutError(
                    f"{partition.topic}-{partition.index}: the in-sync replicas "
                    f"{list(partition.isr)} did not reach offset {offset - 1} within "
                    f"{timeout_ms} ms (the write is on the leader and may still commit)"
                )
            else:
                exc = future.exception()
                error = None if exc is None else _as_broker_error(exc)  # type: ignore[arg-type]
            errors.append(error)
        return errors

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
        notifier = self.notifier
        rows: list[list[tuple[str, int, BrokerResponseError | None]]] = []
        waits: list[tuple[int, int, Partition, int]] = []  # (marker, partition, p, offset)
        for marker in markers:
            row: list[tuple[str, int, BrokerResponseError | None]] = []
            for topic, index in marker.partitions:
                try:
                    partition = self._partition(topic, index)
                    info = partition.append_txn_marker(
                        marker.producer_id,
                        marker.producer_epoch,
                        committed=marker.committed,
                        coordinator_epoch=marker.coordinator_epoch,
                    )
                except Exception as exc:
                    if not isinstance(exc, BrokerResponseError):
                        log.exception("marker append failed", topic=topic, partition=index)
                    row.append((topic, index, _as_broker_error(exc)))
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
            errors = await self._await_high_watermarks(
                [(p, offset) for _, _, p, offset in waits], timeout_ms
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
            partition = self._partition(topic, index)
            if not partition.is_leader:
                raise NotLeaderOrFollowerError(f"node {self.node_id} does not lead {topic}-{index}")
            producers = tuple(partition.log.active_producers())
        except Exception as exc:
            return ProducersResult(topic, index, _as_broker_error(exc))
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
        any_replica = replica_id == DEBUG_REPLICA_ID
        results = await self._read_all(requests, isolation, max_bytes, refused, any_replica)
        keys = [(r.topic, r.partition) for r in requests]
        while not satisfied(results):
            waiter = self.notifier.watch(keys)
            try:
                results = await self._read_all(requests, isolation, max_bytes, refused, any_replica)
                if satisfied(results):
                    break
                try:
                    async with asyncio.timeout(deadline - loop.time()):
                        await waiter.future
                except TimeoutError:
                    results = await self._read_all(
                        requests, isolation, max_bytes, refused, any_replica
                    )
                    break
            finally:
                self.notifier.unwatch(waiter)
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
                moved = partition.update_follower(
                    replica_id, request.fetch_offset, now, request.log_start_offset
                )
                if moved:
                    self._wake(key)
                change = partition.isr_expansion(replica_id)
            except Exception as exc:
                refused[key] = exc
                continue
            if change is not None and self.isr_updates is not None:
                self.isr_updates.propose(change)
        return refused

    async def _read_all(
        self,
        requests: Sequence[FetchPartitionRequest],
        isolation: FetchIsolation,
        max_bytes: int,
        refused: Mapping[tuple[str, int], Exception],
        any_replica: bool = False,
    ) -> list[FetchPartitionResult]:
        """Read every requested partition, yielding the loop every ``APPLY_SLICE_S`` (each
        partition is read on its own; a fetch was never a snapshot across partitions)."""
        results = []
        budget = max_bytes
        returned_any = False
        loop_slice = LoopSlice(APPLY_SLICE_S)
        for request in requests:
            await loop_slice.pause()
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
                    last_stable_offset=data.last_stable_offset,
                    aborted_transactions=(
                        data.aborted_transactions
                        if isolation is FetchIsolation.TXN_COMMITTED
                        else ()
                    ),
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
        read_committed: bool = False,
    ) -> ListOffsetsResult:
        """Kafka's ListOffsets for one partition: ``timestamp`` may be EARLIEST_TIMESTAMP (-2),
        LATEST_TIMESTAMP (-1), MAX_TIMESTAMP (-3) or a time in ms. A consumer's
        ``read_committed`` lookup sees only offsets below the last stable offset (LATEST: the
        LSO)."""
        try:
            partition = self._partition(topic, index)
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
        waits: list[tuple[int, Partition, int, asyncio.Future[int]]] = []
        for topic, index, offset in entries:
            try:
                partition = self._partition(topic, index)
                target, future = partition.delete_records(offset)
            except Exception as exc:
                answers.append((_as_broker_error(exc), -1))
                continue
            waits.append((len(answers), partition, target, future))
            answers.append((None, -1))
            self._wake(partition.key)  # followers' waiting fetches return with the new start
        pending = {future for *_, future in waits if not future.done()}
        timeout_ms = timeout_ms if timeout_ms > 0 else DEFAULT_PRODUCE_TIMEOUT_MS
        if pending:
            await asyncio.wait(pending, timeout=timeout_ms / 1000)
        for i, partition, target, future in waits:
            if not future.done():
                future.cancel()
                answers[i] = (
                    RequestTimedOutError(
                        f"{partition.topic}-{partition.index}: the in-sync replicas "
                        f"{list(partition.isr)} did not start their logs at {target} within "
                        f"{timeout_ms} ms (the leader's log starts there)"
                    ),
                    -1,
                )
            elif future.exception() is not None:
                answers[i] = (_as_broker_error(future.exception()), -1)  # type: ignore[arg-type]
            else:
                answers[i] = (None, future.result())
        return answers

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
