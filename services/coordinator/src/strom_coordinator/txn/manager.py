"""The transaction coordinator's API over the ``__transaction_state`` partitions this instance
hosts: what the gRPC servicer and the process call.

Each request is routed to its id's partition (``partitions.hosting.HostedPartitions``:
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR), checked and transformed by the pure state
machine (``state``), written to the ``PartitionLog`` (acks=all), and only then applied to the
in-memory table. Requests of one transactional id run one at a time (a lock per id).

Ending a transaction: the Prepare* state is written, the caller is answered, and a background
task sends the markers (``MarkerWriter``, retried until acknowledged) and then writes
Complete*. A partition loaded from the log restarts that task for every Prepare* id it holds;
unloading a partition cancels its tasks. ``abort_timed_out`` aborts Ongoing transactions past
their timeout, ``expire`` removes idle ids (tombstones).

Safety: one event loop, not thread-safe. Across an await the table may change (a partition can
be unloaded): every write checks afterwards that the partition is still the same load.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from strom.cluster.retry import Backoff
from strom.errors import (
    BrokerResponseError,
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidRequestError,
    NotCoordinatorError,
    StromError,
    TransactionalIdNotFoundError,
    TransactionCoordinatorFencedError,
)
from strom_coordinator.partitions.hosting import HostedPartitions
from strom_coordinator.partitions.log import PartitionLog
from strom_coordinator.txn import records, state
from strom_coordinator.txn.staged_commits import MemberCalls, StagedCommits
from strom_coordinator.txn.state import (
    EndAnswer,
    FreshProducerIdNeeded,
    TxnMetadata,
    TxnState,
)
from strom_server.etcd.session_lease import SessionLease
from strom_server.runtime.logs import get_logger

__all__ = [
    "MarkerJob",
    "MarkerWriter",
    "NullTxnStats",
    "TransactionManager",
    "TxnConfig",
    "TxnStatsListener",
]

log = get_logger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
_BACKOFF_S = 0.1
_BACKOFF_MAX_S = 2.0

TopicPartition = tuple[str, int]
_T = TypeVar("_T")


@dataclass(frozen=True)
class TxnConfig:
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    #: How long InitProducerId, AddPartitionsToTxn and AddOffsetsToTxn wait for the previous
    #: transaction's markers before answering CONCURRENT_TRANSACTIONS (the client retries).
    init_wait_ms: int = 5_000


@dataclass(frozen=True)
class MarkerJob:
    """The markers ending one transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    #: Data partitions (``__consumer_offsets`` ones are reached through ``groups``).
    partitions: tuple[TopicPartition, ...]
    groups: tuple[str, ...]


class MarkerWriter(Protocol):
    async def write(self, job: MarkerJob) -> None:
        """Return once every partition leader and group coordinator acknowledged the marker
        (retrying everything else); raise TransactionCoordinatorFencedError when a leader
        saw a newer coordinator epoch."""
        ...


class TxnStatsListener(Protocol):
    def on_markers(self, committed: bool, count: int) -> None:
        """``count`` markers (partitions and groups) of one transaction were acknowledged."""
        ...

    def on_staged_commit(self, members: int, failed: int) -> None:
        """A staged decision of ``members`` members completed, ``failed`` of them lost."""
        ...


class NullTxnStats:
    def on_markers(self, committed: bool, count: int) -> None:
        pass

    def on_staged_commit(self, members: int, failed: int) -> None:
        pass


@dataclass(frozen=True)
class PartitionError:
    topic: str
    partition: int
    error: BrokerResponseError | None


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class DescribedTransaction:
    transactional_id: str
    metadata: TxnMetadata | None
    error: BrokerResponseError | None = None


FreshProducerId = Callable[[], Awaitable[int]]


class TransactionManager:
    """Transactional ids of the hosted ``__transaction_state`` partitions."""

    def __init__(
        self,
        log: PartitionLog,
        config: TxnConfig,
        *,
        fresh_producer_id: FreshProducerId,
        group_partition_for: Callable[[str], int],
        markers: MarkerWriter,
        coordinator_epoch: Callable[[int], int | None],
        on_fenced: Callable[[int], None] = lambda partition: None,
        stats: TxnStatsListener | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
        staged_members: MemberCalls | None = None,
    ) -> None:
        self._log = log
        self._config = config
        self._fresh = fresh_producer_id
        self._group_partition_for = group_partition_for
        self._markers = markers
        self._coordinator_epoch = coordinator_epoch
        self._on_fenced = on_fenced
        self._stats: TxnStatsListener = stats or NullTxnStats()
        self._now = wall_clock_ms or (lambda: int(time.time() * 1000))
        self._txns: dict[str, TxnMetadata] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        #: Load generation of each hosted partition (bumped on load and unload).
        self._generation: dict[int, int] = {}
        self._completions: dict[str, asyncio.Task[None]] = {}
        self._partitions = HostedPartitions(
            _Loader(self), topic=TRANSACTION_STATE_TOPIC, key_kind="transactional id"
        )
        #: The staged commits (commit ids) of the same partitions.
        self.staged = StagedCommits(
            log,
            route=self._partitions.route,
            partition_of=self._partition_of,
            check=self._check,
            is_served=self._partitions.is_served,
            check_generation=self._check_generation,
            generation=lambda partition: self._generation.get(partition, 0),
            members=staged_members,
            stats=self._stats,
            wall_clock_ms=self._now,
        )

    # -- hosted partitions (called by the process: ownership.PartitionHost) -------------------

    @property
    def partition_count(self) -> int | None:
        return self._partitions.partition_count

    @partition_count.setter
    def partition_count(self, count: int | None) -> None:
        self._partitions.partition_count = count

    def use_session(self, session: SessionLease) -> None:
        """Answer NOT_COORDINATOR for every transactional id while ``session`` may have expired."""
        self._partitions.session = session

    def partition_for(self, transactional_id: str) -> int:
        """The __transaction_state partition of a transactional id (Kafka's formula)."""
        return self._partitions.partition_for(transactional_id)

    def begin_loading(self, partition: int) -> None:
        self._partitions.begin_loading(partition)

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> None:
        self._partitions.replay(partition, key, value, timestamp_ms)

    def finish_loading(self, partition: int) -> None:
        self._partitions.finish_loading(partition)

    def unload(self, partition: int) -> None:
        self._partitions.unload(partition)

    def owned_partitions(self) -> set[int]:
        return self._partitions.owned_partitions()

    def counts_by_state(self) -> dict[str, int]:
        """How many transactional ids are in each state (for the metrics)."""
        counts: dict[str, int] = {}
        for meta in self._txns.values():
            counts[meta.state.value] = counts.get(meta.state.value, 0) + 1
        return counts

    def get(self, transactional_id: str) -> TxnMetadata | None:
        """The state of an id this instance serves (None when unknown)."""
        return self._txns.get(transactional_id)

    # -- requests ------------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[int, int]:
        """InitProducerId: a fresh producer id at epoch 0 for a new id; otherwise the open
        transaction is aborted first and the epoch bumped (fencing the previous incarnation)."""
        state.check_transactional_id(transactional_id)
        state.check_timeout(timeout_ms, self._config.transaction_max_timeout_ms)
        partition = self._partitions.route(transactional_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.init_wait_ms / 1000
        while True:
            async with self._lock(transactional_id):
                generation = self._check(partition)
                meta = self._txns.get(transactional_id)
                if meta is None:
                    if state.resumes(producer_id, producer_epoch, None):
                        raise InvalidProducerIdMappingError(
                            f"{transactional_id!r} has no producer id {producer_id}"
                        )
                    fresh = await self._fresh()
                    created = state.new_transactional_id(
                        transactional_id, fresh, timeout_ms, self._now()
                    )
                    await self._write(partition, generation, created)
                    return fresh, 0
                blocker = state.init_producer_blocker(meta, producer_id, producer_epoch)
                if blocker is None:
                    bumped = await self._with_fresh(
                        lambda fresh, m=meta: state.init_producer(  # type: ignore[misc]
                            m, timeout_ms, self._now(), fresh
                        )
                    )
                    await self._write(partition, generation, bumped)
                    return bumped.producer_id, bumped.producer_epoch
                if blocker is TxnState.ONGOING:
                    prepared = await self._with_fresh(
                        lambda fresh, m=meta: state.abort_open(  # type: ignore[misc]
                            m, self._now(), fresh, by_timeout=False
                        )
                    )
                    await self._write(partition, generation, prepared)
                    self._start_completion(partition, generation, prepared)
                    producer_id = -1  # our own abort moved the epoch on
                completion = self._completions.get(transactional_id)
            # Wait (without the lock) for the markers of the ending transaction.
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ConcurrentTransactionsError(
                    f"the previous transaction of {transactional_id!r} is still being "
                    "completed; retry"
                )
            if completion is None:
                await asyncio.sleep(min(_BACKOFF_S, remaining))
                continue
            await asyncio.wait({completion}, timeout=remaining)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> None:
        """AddPartitionsToTxn (begins a transaction when none is open)."""
        await self._add(transactional_id, producer_id, producer_epoch, partitions, ())

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> None:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction and
        the group is remembered for its marker."""
        if not group_id:
            raise InvalidRequestError("the group id is empty")
        tp = (OFFSETS_TOPIC, self._group_partition_for(group_id))
        await self._add(transactional_id, producer_id, producer_epoch, [tp], [group_id])

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> list[PartitionError]:
        """AddPartitionsToTxn(verify_only): per partition None iff it belongs to the ongoing
        transaction of exactly (producer id, epoch)."""
        state.check_transactional_id(transactional_id)
        self._partitions.route(transactional_id)
        meta = self._txns.get(transactional_id)
        return [
            PartitionError(t, p, state.verify_partition(meta, producer_id, producer_epoch, (t, p)))
            for t, p in partitions
        ]

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        *,
        keep_epoch: bool = False,
    ) -> tuple[int, int]:
        """EndTxn: answers (producer id, next epoch) once the decision is durable; the markers
        follow in the background. ``keep_epoch``: a client before KIP-890 part 2 (no bump)."""
        state.check_transactional_id(transactional_id)
        partition = self._partitions.route(transactional_id)
        async with self._lock(transactional_id):
            generation = self._check(partition)
            meta = self._known(transactional_id, producer_id)
            answer: EndAnswer = await self._with_fresh(
                lambda fresh: state.end_txn(
                    meta,
                    producer_id,
                    producer_epoch,
                    committed,
                    now_ms=self._now(),
                    fresh_producer_id=fresh,
                    keep_epoch=keep_epoch,
                )
            )
            if answer.metadata is not None:
                await self._write(partition, generation, answer.metadata)
                self._start_completion(partition, generation, answer.metadata)
            return answer.producer_id, answer.producer_epoch

    async def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = 0,
        prefix: str = "",
    ) -> list[ListedTransaction]:
        """ListTransactions over the served partitions; filters combine (empty: any)."""
        wanted_states = {s.lower() for s in states}
        wanted_ids = set(producer_ids)
        now = self._now()
        found = []
        for meta in sorted(self._served(), key=lambda m: m.transactional_id):
            tid = meta.transactional_id
            if not tid.startswith(prefix):
                continue
            if wanted_states and meta.state.value.lower() not in wanted_states:
                continue
            if wanted_ids and meta.producer_id not in wanted_ids:
                continue
            if duration_ms > 0 and (meta.start_ms < 0 or now - meta.start_ms <= duration_ms):
                continue
            found.append(ListedTransaction(tid, meta.producer_id, meta.state.value))
        return found

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[DescribedTransaction]:
        """DescribeTransactions: per id its state, or the error (NOT_COORDINATOR,
        TRANSACTIONAL_ID_NOT_FOUND, ...)."""
        described = []
        for tid in transactional_ids:
            try:
                state.check_transactional_id(tid)
                self._partitions.route(tid)
                meta = self._txns.get(tid)
                if meta is None:
                    raise TransactionalIdNotFoundError(f"unknown transactional id {tid!r}")
                described.append(DescribedTransaction(tid, meta))
            except BrokerResponseError as exc:
                described.append(DescribedTransaction(tid, None, exc))
        return described

    # -- background work -----------------------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Abort every Ongoing transaction past its timeout (PrepareAbort now, markers and
        CompleteAbort in the background); returns how many."""
        now = self._now()
        due = [m for m in self._served() if state.timed_out(m, now)]
        aborted = 0
        for meta in due:
            tid = meta.transactional_id
            partition = self._partitions.partition_for(tid)
            try:
                async with self._lock(tid):
                    generation = self._check(partition)
                    current = self._txns.get(tid)
                    if current is None or not state.timed_out(current, self._now()):
                        continue
                    prepared = await self._with_fresh(
                        lambda fresh, m=current: state.abort_open(  # type: ignore[misc]
                            m, self._now(), fresh, by_timeout=True
                        )
                    )
                    await self._write(partition, generation, prepared)
                    self._start_completion(partition, generation, prepared)
                    aborted += 1
                    log.info("transaction timed out: aborting", transactional_id=tid,
                             producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                             timeout_ms=meta.timeout_ms)  # fmt: skip
            except StromError as exc:
                log.warning("aborting a timed-out transaction failed", transactional_id=tid,
                            error=str(exc))  # fmt: skip
        return aborted

    async def expire(self) -> int:
        """Remove ids idle for transactional.id.expiration.ms (tombstones), and staged-commit
        decisions as old; returns how many."""
        now = self._now()
        limit = self._config.transactional_id_expiration_ms
        removed_decisions = await self.staged.expire(limit)
        due = [m.transactional_id for m in self._served() if state.expired(m, now, limit)]
        removed = 0
        for tid in due:
            partition = self._partitions.partition_for(tid)
            try:
                async with self._lock(tid):
                    generation = self._check(partition)
                    current = self._txns.get(tid)
                    if current is None or not state.expired(current, self._now(), limit):
                        continue
                    await self._log.append(partition, [(records.transaction_key(tid), None)])
                    self._check_generation(partition, generation)
                    del self._txns[tid]
                    self._locks.pop(tid, None)
                    removed += 1
            except StromError as exc:
                log.warning("expiring a transactional id failed", transactional_id=tid,
                            error=str(exc))  # fmt: skip
        return removed + removed_decisions

    async def close(self) -> None:
        """Cancel every completion task (the process is stopping)."""
        await self.staged.close()
        tasks = list(self._completions.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- plumbing ------------------------------------------------------------------------------

    def _served(self) -> list[TxnMetadata]:
        """The states of the ids of served partitions (not of those still loading)."""
        return [
            meta
            for tid, meta in self._txns.items()
            if (p := self._partition_of(tid)) is not None and self._partitions.is_served(p)
        ]

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            lock = self._locks[transactional_id] = asyncio.Lock()
        return lock

    def _check(self, partition: int) -> int:
        """The partition's load generation; NOT_COORDINATOR when it is not served (any more)."""
        if not self._partitions.is_served(partition):
            raise NotCoordinatorError(
                f"this coordinator does not own {TRANSACTION_STATE_TOPIC}-{partition} (any more)"
            )
        return self._generation.get(partition, 0)

    def _check_generation(self, partition: int, generation: int) -> None:
        if self._generation.get(partition, 0) != generation or not self._partitions.is_served(
            partition
        ):
            raise NotCoordinatorError(
                f"{TRANSACTION_STATE_TOPIC}-{partition} moved to another coordinator"
            )

    def _known(self, transactional_id: str, producer_id: int) -> TxnMetadata:
        meta = self._txns.get(transactional_id)
        if meta is None:
            raise InvalidProducerIdMappingError(
                f"{transactional_id!r} has no producer id {producer_id}: call InitProducerId"
            )
        return meta

    async def _with_fresh(self, transition: Callable[[int | None], _T]) -> _T:
        """Run ``transition``; on epoch overflow once more with a fresh producer id."""
        try:
            return transition(None)
        except FreshProducerIdNeeded:
            return transition(await self._fresh())

    async def _queue_write(self, partition: int, meta: TxnMetadata) -> asyncio.Future[None]:
        """Start persisting ``meta`` and return the write to await: once this returns, the
        record has its place in the partition's log order (``PartitionLog`` orders appends
        by call), ahead of any write started later."""
        key = records.transaction_key(meta.transactional_id)
        write = asyncio.ensure_future(
            self._log.append(partition, [(key, records.encode_value(meta))])
        )
        await asyncio.sleep(0)  # the append runs up to its first suspension: it is queued
        return write

    async def _write(self, partition: int, generation: int, meta: TxnMetadata) -> None:
        """Persist ``meta`` (acks=all), then make it the id's state."""
        key = records.transaction_key(meta.transactional_id)
        await self._log.append(partition, [(key, records.encode_value(meta))])
        self._check_generation(partition, generation)
        self._txns[meta.transactional_id] = meta

    async def _add(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        groups: Sequence[str],
    ) -> None:
        state.check_transactional_id(transactional_id)
        for topic, number in partitions:
            if not topic or number < 0:
                raise InvalidRequestError(f"invalid partition {topic!r}-{number}")
        partition = self._partitions.route(transactional_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.init_wait_ms / 1000
        while True:
            async with self._lock(transactional_id):
                generation = self._check(partition)
                meta = self._known(transactional_id, producer_id)
                try:
                    updated = state.add_partitions(
                        meta, producer_id, producer_epoch, partitions, groups, now_ms=self._now()
                    )
                except ConcurrentTransactionsError:
                    # The producer's previous transaction is still writing its markers: wait
                    # here for them (a few ms) rather than have the client poll with backoff.
                    completion = self._completions.get(transactional_id)
                    if completion is None or loop.time() >= deadline:
                        raise
                else:
                    if updated is not None:
                        await self._write(partition, generation, updated)
                    return
            await asyncio.wait({completion}, timeout=max(0.0, deadline - loop.time()))

    def _start_completion(self, partition: int, generation: int, meta: TxnMetadata) -> None:
        tid = meta.transactional_id
        previous = self._completions.get(tid)
        if previous is not None and not previous.done():
            return
        # A context of its own: the request that started it (its log fields) is long gone.
        task = asyncio.get_running_loop().create_task(
            self._complete(partition, generation, meta),
            name=f"txn-markers-{tid}",
            context=contextvars.Context(),
        )
        self._completions[tid] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._completions.get(tid) is done:
                del self._completions[tid]

        task.add_done_callback(forget)

    async def _complete(self, partition: int, generation: int, meta: TxnMetadata) -> None:
        """Send the markers of a Prepare* transaction, then write Complete* (both retried for
        as long as this load of the partition lasts)."""
        tid = meta.transactional_id
        coordinator_epoch = self._coordinator_epoch(partition)
        if coordinator_epoch is None:
            return
        job = MarkerJob(
            transactional_id=tid,
            producer_id=meta.txn_producer_id,
            producer_epoch=meta.txn_epoch,
            committed=meta.state.committing,
            coordinator_epoch=coordinator_epoch,
            partitions=tuple(sorted(tp for tp in meta.partitions if tp[0] != OFFSETS_TOPIC)),
            groups=tuple(sorted(meta.groups)),
        )
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        while True:
            try:
                await self._markers.write(job)
                break
            except TransactionCoordinatorFencedError as exc:
                log.warning("fenced while writing markers: giving the partition up",
                            transactional_id=tid, partition=partition, error=str(exc))  # fmt: skip
                self._on_fenced(partition)
                return
            except Exception:  # the writer retries what it knows; anything else: again
                log.exception("writing markers failed; retrying", transactional_id=tid)
                await backoff.sleep()
        self._stats.on_markers(job.committed, len(job.partitions) + len(job.groups))
        backoff.reset()
        completed: TxnMetadata | None = None
        while self._generation.get(partition, 0) == generation:
            try:
                async with self._lock(tid):
                    self._check_generation(partition, generation)
                    current = self._txns.get(tid)
                    if current is not None and current.state.preparing:
                        completed = state.complete(current, self._now())
                    elif current is None or current is not completed:
                        return  # gone, or a newer state was written after ours
                    # Queued under the lock but awaited outside it: the markers are
                    # acknowledged, so the producer's next transaction (waiting for this one)
                    # may go on at once; its own record is queued after this one in the
                    # partition's log order (often in the same batch). Until this write is
                    # acknowledged the log still says Prepare*, whose markers a reload
                    # re-sends harmlessly.
                    written = await self._queue_write(partition, completed)
                    self._txns[tid] = completed
                await written
                log.debug("transaction completed", transactional_id=tid,
                          state=completed.state.value)  # fmt: skip
                return
            except NotCoordinatorError:
                return
            except StromError as exc:
                log.warning("writing the completed state failed; retrying",
                            transactional_id=tid, error=str(exc))  # fmt: skip
                await backoff.sleep()

    # -- the loader's side ---------------------------------------------------------------------

    def _drop_partition(self, partition: int) -> None:
        self._generation[partition] = self._generation.get(partition, 0) + 1
        for tid in [t for t in self._txns if self._partition_of(t) == partition]:
            del self._txns[tid]
            task = self._completions.pop(tid, None)
            if task is not None:
                task.cancel()
        self.staged.drop_partition(partition)

    def _replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        if not key:
            return
        try:
            tid = records.decode_key(key)
            if tid is None:
                return  # an ownership marker
            if isinstance(tid, records.StagedCommitKey):
                self.staged.replay(partition, tid.commit_id, value)
            elif value is None:
                self._txns.pop(tid, None)
            else:
                self._txns[tid] = records.decode_value(tid, value)
        except InvalidRecordError as exc:
            log.warning("transaction state record skipped", partition=partition, error=str(exc))

    def _partition_loaded(self, partition: int) -> None:
        generation = self._generation.get(partition, 0)
        for tid, meta in list(self._txns.items()):
            if meta.state.preparing and self._partition_of(tid) == partition:
                log.info("completing a transaction of a loaded partition", transactional_id=tid,
                         state=meta.state.value)  # fmt: skip
                self._start_completion(partition, generation, meta)
        self.staged.partition_loaded(partition)

    def _partition_of(self, transactional_id: str) -> int | None:
        try:
            return self._partitions.partition_for(transactional_id)
        except StromError:
            return None


class _Loader:
    """The manager's ``PartitionState`` (partitions.hosting)."""

    def __init__(self, manager: TransactionManager) -> None:
        self._m = manager

    def drop_partition(self, partition: int) -> None:
        self._m._drop_partition(partition)

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> None:
        self._m._replay(partition, key, value)

    def partition_loaded(self, partition: int) -> None:
        self._m._partition_loaded(partition)
