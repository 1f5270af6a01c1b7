"""The transaction coordinator's API over the ``__transaction_state`` partitions this instance
hosts: what the gRPC servicer and the process call.

Each request is routed to its id's partition (``partitions.hosting.HostedPartitions``:
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR), checked and transformed by the pure state
machine (``state``), written to the ``PartitionLog`` (acks=all), and only then applied to the
in-memory table. Requests of one transactional id run one at a time (a lock per id).

The ids, their locks and the writes are the ``table.TxnTable``. Ending a transaction: the
Prepare* state is written, the caller is answered, and ``completion.Completions`` sends the
markers and writes Complete* in the background. ``expiry.TxnExpiry`` aborts Ongoing
transactions past their timeout and removes idle ids (tombstones).

Safety: one event loop, not thread-safe. Across an await the table may change (a partition can
be unloaded): every write checks afterwards that the partition is still the same load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from strom.errors import (
    BrokerResponseError,
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidRequestError,
    TransactionalIdNotFoundError,
)
from strom_coordinator.group.records import OFFSETS_TOPIC
from strom_coordinator.partitions.hosting import HostedShard
from strom_coordinator.partitions.log import PartitionLog
from strom_coordinator.txn import records, state
from strom_coordinator.txn.completion import (
    Completions,
    MarkerWriter,
    NullTxnStats,
    TxnStatsListener,
)
from strom_coordinator.txn.expiry import TxnExpiry
from strom_coordinator.txn.staged_commits import MemberCalls, StagedCommits
from strom_coordinator.txn.state import EndAnswer, TxnMetadata, TxnState
from strom_coordinator.txn.table import FreshProducerId, TxnTable
from strom_server.runtime.logs import get_logger

__all__ = ["TransactionManager", "TxnConfig"]

log = get_logger(__name__)

_BACKOFF_S = 0.1

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class TxnConfig:
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    #: How long InitProducerId, AddPartitionsToTxn and AddOffsetsToTxn wait for the previous
    #: transaction's markers before answering CONCURRENT_TRANSACTIONS (the client retries).
    init_wait_ms: int = 5_000


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


class TransactionManager(HostedShard):
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
        self._config = config
        self._group_partition_for = group_partition_for
        now = wall_clock_ms or (lambda: int(time.time() * 1000))
        self._now = now
        stats_: TxnStatsListener = stats or NullTxnStats()
        self._table = TxnTable(log, _Loader(self), fresh_producer_id=fresh_producer_id)
        self._partitions = self._table.partitions
        self._txns = self._table.txns
        self._completions = Completions(
            self._table, markers, coordinator_epoch=coordinator_epoch, on_fenced=on_fenced,
            stats=stats_, wall_clock_ms=now,
        )  # fmt: skip
        #: The staged commits (commit ids) of the same partitions.
        self.staged = StagedCommits(
            self._table, members=staged_members, stats=stats_, wall_clock_ms=now
        )
        self._expiry = TxnExpiry(
            self._table, self._completions, self.staged,
            expiration_ms=config.transactional_id_expiration_ms, wall_clock_ms=now,
        )  # fmt: skip

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
            async with self._table.lock(transactional_id):
                generation = self._table.check(partition)
                meta = self._txns.get(transactional_id)
                if meta is None:
                    if state.resumes(producer_id, producer_epoch, None):
                        raise InvalidProducerIdMappingError(
                            f"{transactional_id!r} has no producer id {producer_id}"
                        )
                    fresh = await self._table.fresh_producer_id()
                    created = state.new_transactional_id(
                        transactional_id, fresh, timeout_ms, self._now()
                    )
                    await self._table.write(partition, generation, created)
                    return fresh, 0
                blocker = state.init_producer_blocker(meta, producer_id, producer_epoch)
                if blocker is None:
                    bumped = await self._table.with_fresh(
                        lambda fresh, m=meta: state.init_producer(  # type: ignore[misc]
                            m, timeout_ms, self._now(), fresh
                        )
                    )
                    await self._table.write(partition, generation, bumped)
                    return bumped.producer_id, bumped.producer_epoch
                if blocker is TxnState.ONGOING:
                    prepared = await self._table.with_fresh(
                        lambda fresh, m=meta: state.abort_open(  # type: ignore[misc]
                            m, self._now(), fresh, by_timeout=False
                        )
                    )
                    await self._table.write(partition, generation, prepared)
                    self._completions.start(partition, generation, prepared)
                    producer_id = -1  # our own abort moved the epoch on
                completion = self._completions.running(transactional_id)
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
        async with self._table.lock(transactional_id):
            generation = self._table.check(partition)
            meta = self._table.known(transactional_id, producer_id)
            answer: EndAnswer = await self._table.with_fresh(
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
                await self._table.write(partition, generation, answer.metadata)
                self._completions.start(partition, generation, answer.metadata)
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
        for meta in sorted(self._table.served(), key=lambda m: m.transactional_id):
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

    # -- background work (the process's ticks) -------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Abort every Ongoing transaction past its timeout; returns how many."""
        return await self._expiry.abort_timed_out()

    async def expire(self) -> int:
        """Remove idle ids and staged-commit decisions as old; returns how many."""
        return await self._expiry.expire()

    async def close(self) -> None:
        """Cancel every completion task (the process is stopping)."""
        await self.staged.close()
        await self._completions.close()

    # -- plumbing ------------------------------------------------------------------------------

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
            async with self._table.lock(transactional_id):
                generation = self._table.check(partition)
                meta = self._table.known(transactional_id, producer_id)
                try:
                    updated = state.add_partitions(
                        meta, producer_id, producer_epoch, partitions, groups, now_ms=self._now()
                    )
                except ConcurrentTransactionsError:
                    # The producer's previous transaction is still writing its markers: wait
                    # here for them (a few ms) rather than have the client poll with backoff.
                    completion = self._completions.running(transactional_id)
                    if completion is None or loop.time() >= deadline:
                        raise
                else:
                    if updated is not None:
                        await self._table.write(partition, generation, updated)
                    return
            await asyncio.wait({completion}, timeout=max(0.0, deadline - loop.time()))

    # -- the loader's side ---------------------------------------------------------------------

    def _drop_partition(self, partition: int) -> None:
        self._table.bump_generation(partition)
        for tid in [t for t in self._txns if self._table.partition_of(t) == partition]:
            del self._txns[tid]
            self._completions.cancel(tid)
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
        generation = self._table.generation(partition)
        for tid, meta in list(self._txns.items()):
            if meta.state.preparing and self._table.partition_of(tid) == partition:
                log.info("completing a transaction of a loaded partition", transactional_id=tid,
                         state=meta.state.value)  # fmt: skip
                self._completions.start(partition, generation, meta)
        self.staged.partition_loaded(partition)


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
