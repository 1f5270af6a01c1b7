"""``StagedCommits``: the coordinator-owned commit of staged transactions (CommitStaged-
Transactions, DescribeStagedCommit) over the ``__transaction_state`` partitions this instance
hosts. The decision logic is ``staged``; this module does the I/O and the ordering.

A commit, under the commit id's lock (requests of one commit id run one at a time):

1. a decision still Committing is finished first (its drive task is awaited);
2. a replayed sequence answers ``already_committed`` with the stored record; a retry of the
   stored decision answers like the first call; nothing is written;
3. every member must be Ongoing at exactly its producer id and epoch (or idle at exactly
   them: a staged transaction that wrote nothing) on its own coordinator (``MemberCalls``:
   the local manager when this instance serves the member's id, else its coordinator directly),
   otherwise INVALID_TXN_STATE naming it and nothing is written;
4. the decision (Committing) is written (acks=all) before any member is touched;
5. a drive task ends every member with EndTxn(commit) under its own identity, in parallel,
   retrying retriable answers with backoff for as long as this load of the partition lasts
   (a retry of a committed member is success, KIP-890's rule); a member that can no longer
   be committed (it expired) goes to ``failed_members``, logged at error level and counted;
6. the decision is written Committed and the request answered.

A partition loaded from the log (failover, restart) starts the drive task of every decision
it holds in Committing, so a decision written by a coordinator that died is finished by the
next owner. Unloading a partition cancels its drive tasks. A Committed decision not updated
for ``transactional.id.expiration.ms`` is removed (``expire``), as idle transactional ids are.

Test hook: when the environment variable ``STROM_TESTING_HALT_AFTER_STAGED_DECISION`` equals
a commit id, the process exits (status 70) right after writing that commit id's next
decision, before driving any member, so that tests can show a new owner finishing it.

Safety: one event loop, not thread-safe; every write checks afterwards that the partition is
still the same load (``check_generation``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
from collections.abc import Callable, Sequence
from typing import Protocol

from strom.cluster.retry import Backoff
from strom.errors import InvalidRequestError, NotCoordinatorError, StromError
from strom.types import StagedTransaction
from strom_coordinator.txn import records, staged
from strom_coordinator.txn.staged import Decision, MemberOutcome, RequestKind, StagedState
from strom_coordinator.txn.state import TxnMetadata
from strom_coordinator.txn.table import TxnTable
from strom_server.runtime.logs import get_logger

__all__ = ["HALT_ENV", "MemberCalls", "StagedCommits", "StagedStatsListener"]

log = get_logger(__name__)

HALT_ENV = "STROM_TESTING_HALT_AFTER_STAGED_DECISION"
_HALT_STATUS = 70
_BACKOFF_S = 0.05
_BACKOFF_MAX_S = 2.0


class MemberCalls(Protocol):
    """How the coordinator of a decision reaches its members' coordinators."""

    async def describe(self, transactional_ids: Sequence[str]) -> dict[str, TxnMetadata | None]:
        """Each id's state at its coordinator (None: unknown id); a retriable StromError
        when a coordinator cannot answer now."""
        ...

    async def end(self, member: StagedTransaction) -> None:
        """EndTxn(commit) with the member's own producer id and epoch; raises the answer's
        error (a StromError)."""
        ...


class StagedStatsListener(Protocol):
    def on_staged_commit(self, members: int, failed: int) -> None:
        """A decision of ``members`` members completed, ``failed`` of them lost."""
        ...


class StagedCommits:
    """The decisions of the commit ids of the hosted partitions (see the module docstring).

    It shares the owning ``TransactionManager``'s table (``txn.table.TxnTable``: the log, the
    partition routing and load generations); the manager forwards the load life cycle
    (``drop_partition``, ``replay``, ``partition_loaded``)."""

    def __init__(
        self,
        table: TxnTable,
        *,
        members: MemberCalls | None,
        stats: StagedStatsListener,
        wall_clock_ms: Callable[[], int],
    ) -> None:
        self._table = table
        self.members = members
        self._stats = stats
        self._now = wall_clock_ms
        self._decisions: dict[str, Decision] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._drives: dict[str, asyncio.Task[Decision]] = {}

    # -- requests ------------------------------------------------------------------------------

    async def commit(
        self,
        commit_id: str,
        sequence: int,
        members: Sequence[StagedTransaction],
        metadata: bytes = b"",
    ) -> tuple[bool, Decision]:
        """CommitStagedTransactions: (already_committed, the record after the call)."""
        staged.check_request(commit_id, sequence, members, metadata)
        partition = self._table.partitions.route(commit_id)
        async with self._lock(commit_id):
            generation = self._table.check(partition)
            stored = self._decisions.get(commit_id)
            if stored is not None and stored.state is StagedState.COMMITTING:
                stored = await self._finish(self._start_drive(partition, generation, stored))
            kind = staged.classify(stored, sequence, members)
            if kind is RequestKind.REPLAYED:
                assert stored is not None
                log.info("staged commit replayed: nothing committed", commit_id=commit_id,
                         sequence=sequence, stored_sequence=stored.sequence,
                         members=len(members))  # fmt: skip
                return True, stored
            if kind is RequestKind.RETRY:
                assert stored is not None
                return False, stored
            await self._check_members(members)
            decision = staged.decide(commit_id, sequence, members, metadata, self._now())
            await self._write(partition, generation, decision)
            log.info("staged commit decided", commit_id=commit_id, sequence=sequence,
                     members=len(members), partition=partition)  # fmt: skip
            if os.environ.get(HALT_ENV) == commit_id:
                log.warning("halting after the staged decision (test hook)", commit_id=commit_id)
                os._exit(_HALT_STATUS)
            finished = await self._finish(self._start_drive(partition, generation, decision))
            return False, finished

    def describe(self, commit_id: str) -> Decision | None:
        """DescribeStagedCommit: the last decision of ``commit_id`` (None: none)."""
        if not commit_id:
            raise InvalidRequestError("the commit id is empty")
        self._table.partitions.route(commit_id)
        return self._decisions.get(commit_id)

    async def expire(self, expiration_ms: int) -> int:
        """Remove Committed decisions not updated for ``expiration_ms`` (tombstones; a
        commit id then starts over from any sequence); returns how many."""
        now = self._now()

        def due(decision: Decision | None) -> bool:
            return (
                decision is not None
                and decision.state is StagedState.COMMITTED
                and now - decision.last_update_ms > expiration_ms
            )

        removed = 0
        for commit_id in [c for c, d in self._decisions.items() if due(d)]:
            partition = self._table.partition_of(commit_id)
            if partition is None or not self._table.partitions.is_served(partition):
                continue
            try:
                async with self._lock(commit_id):
                    generation = self._table.check(partition)
                    if not due(self._decisions.get(commit_id)):
                        continue
                    key = records.staged_commit_key(commit_id)
                    await self._table.log.append(partition, [(key, None)])
                    self._table.check_generation(partition, generation)
                    del self._decisions[commit_id]
                    self._locks.pop(commit_id, None)
                    removed += 1
            except StromError as exc:
                log.warning("expiring a staged commit failed", commit_id=commit_id,
                            error=str(exc))  # fmt: skip
        return removed

    def counts_by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for decision in self._decisions.values():
            counts[decision.state.value] = counts.get(decision.state.value, 0) + 1
        return counts

    async def close(self) -> None:
        """Cancel every drive task (the process is stopping)."""
        tasks = list(self._drives.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- the load life cycle (forwarded by the manager) ----------------------------------------

    def drop_partition(self, partition: int) -> None:
        for commit_id in [c for c in self._decisions if self._table.partition_of(c) == partition]:
            del self._decisions[commit_id]
            task = self._drives.pop(commit_id, None)
            if task is not None:
                task.cancel()

    def replay(self, partition: int, commit_id: str, value: bytes | None) -> None:
        if value is None:
            self._decisions.pop(commit_id, None)
        else:
            self._decisions[commit_id] = records.decode_staged_value(commit_id, value)

    def partition_loaded(self, partition: int) -> None:
        generation = self._table.generation(partition)
        for commit_id, decision in list(self._decisions.items()):
            committing = decision.state is StagedState.COMMITTING
            if committing and self._table.partition_of(commit_id) == partition:
                log.info("finishing a staged commit of a loaded partition", commit_id=commit_id,
                         sequence=decision.sequence, members=len(decision.members))  # fmt: skip
                self._start_drive(partition, generation, decision)

    # -- plumbing ------------------------------------------------------------------------------

    def _lock(self, commit_id: str) -> asyncio.Lock:
        lock = self._locks.get(commit_id)
        if lock is None:
            lock = self._locks[commit_id] = asyncio.Lock()
        return lock

    def _calls(self) -> MemberCalls:
        if self.members is None:
            raise StromError("staged commits are not set up on this coordinator")
        return self.members

    async def _check_members(self, members: Sequence[StagedTransaction]) -> None:
        if not members:
            return
        views = await self._calls().describe([m.transactional_id for m in members])
        for member in members:
            problem = staged.member_problem(member, views.get(member.transactional_id))
            if problem is not None:
                raise problem

    async def _write(self, partition: int, generation: int, decision: Decision) -> None:
        key = records.staged_commit_key(decision.commit_id)
        await self._table.log.append(partition, [(key, records.encode_staged_value(decision))])
        self._table.check_generation(partition, generation)
        self._decisions[decision.commit_id] = decision

    def _start_drive(
        self, partition: int, generation: int, decision: Decision
    ) -> asyncio.Task[Decision]:
        commit_id = decision.commit_id
        running = self._drives.get(commit_id)
        if running is not None and not running.done():
            return running
        task = asyncio.get_running_loop().create_task(
            self._drive(partition, generation, decision),
            name=f"staged-commit-{commit_id}",
            context=contextvars.Context(),
        )
        self._drives[commit_id] = task

        def done(finished: asyncio.Task[Decision]) -> None:
            if self._drives.get(commit_id) is finished:
                del self._drives[commit_id]
            if not finished.cancelled() and finished.exception() is not None:
                error = finished.exception()
                if not isinstance(error, NotCoordinatorError):
                    log.error("staged commit drive failed", commit_id=commit_id,
                              error=repr(error))  # fmt: skip

        task.add_done_callback(done)
        return task

    async def _finish(self, drive: asyncio.Task[Decision]) -> Decision:
        """The drive's outcome; it goes on if the request is cancelled. A drive cancelled by
        an unload answers NOT_COORDINATOR (the caller retries at the new owner)."""
        try:
            return await asyncio.shield(drive)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if drive.cancelled() and (current is None or not current.cancelling()):
                raise NotCoordinatorError(
                    "the commit id's partition moved to another coordinator while its decision "
                    "was being completed"
                ) from None
            raise

    async def _drive(self, partition: int, generation: int, decision: Decision) -> Decision:
        """Commit every member, then write Committed (see the module docstring, 5-6)."""
        outcomes = await asyncio.gather(
            *(self._commit_member(m, partition, generation, decision) for m in decision.members)
        )
        failed = [m for m, ok in zip(decision.members, outcomes, strict=True) if not ok]
        finished = staged.finish(decision, failed, self._now())
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        while True:
            self._table.check_generation(partition, generation)
            try:
                await self._write(partition, generation, finished)
                break
            except NotCoordinatorError:
                raise
            except StromError as exc:
                log.warning("writing the committed staged decision failed; retrying",
                            commit_id=decision.commit_id, error=str(exc))  # fmt: skip
                await backoff.sleep()
        self._stats.on_staged_commit(len(decision.members), len(failed))
        log.info("staged commit completed", commit_id=decision.commit_id,
                 sequence=decision.sequence, members=len(decision.members),
                 failed=len(failed))  # fmt: skip
        return finished

    async def _commit_member(
        self, member: StagedTransaction, partition: int, generation: int, decision: Decision
    ) -> bool:
        """EndTxn(commit) of one member until committed (True) or lost (False)."""
        calls = self._calls()
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        while True:
            self._table.check_generation(partition, generation)
            error: StromError | None = None
            try:
                await calls.end(member)
            except StromError as exc:
                error = exc
            outcome = staged.member_outcome(error)
            if outcome is MemberOutcome.COMMITTED:
                return True
            if outcome is MemberOutcome.FAILED:
                log.error("staged transaction lost: it could not be committed after the "
                          "decision", commit_id=decision.commit_id, sequence=decision.sequence,
                          transactional_id=member.transactional_id,
                          producer_id=member.producer_id, producer_epoch=member.producer_epoch,
                          error=str(error))  # fmt: skip
                return False
            log.debug("committing a staged transaction: retrying", commit_id=decision.commit_id,
                      transactional_id=member.transactional_id, error=str(error))  # fmt: skip
            await backoff.sleep()
