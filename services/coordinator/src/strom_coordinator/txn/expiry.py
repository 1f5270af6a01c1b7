"""The transaction coordinator's periodic work over the served ids: aborting Ongoing
transactions past their timeout (PrepareAbort now, markers and CompleteAbort through
``Completions``), and removing ids idle for ``transactional.id.expiration.ms`` (tombstones)
together with staged-commit decisions as old.
"""

from __future__ import annotations

from collections.abc import Callable

from strom.errors import StromError
from strom_coordinator.txn import records, state
from strom_coordinator.txn.completion import Completions
from strom_coordinator.txn.staged_commits import StagedCommits
from strom_coordinator.txn.table import TxnTable
from strom_server.runtime.logs import get_logger

__all__ = ["TxnExpiry"]

log = get_logger(__name__)


class TxnExpiry:
    """``abort_timed_out`` and ``expire`` (called by the process's background ticks)."""

    def __init__(
        self,
        table: TxnTable,
        completions: Completions,
        staged: StagedCommits,
        *,
        expiration_ms: int,
        wall_clock_ms: Callable[[], int],
    ) -> None:
        self._table = table
        self._completions = completions
        self._staged = staged
        self._expiration_ms = expiration_ms
        self._now = wall_clock_ms

    async def abort_timed_out(self) -> int:
        """Abort every Ongoing transaction past its timeout (PrepareAbort now, markers and
        CompleteAbort in the background); returns how many."""
        table = self._table
        now = self._now()
        due = [m for m in table.served() if state.timed_out(m, now)]
        aborted = 0
        for meta in due:
            tid = meta.transactional_id
            partition = table.partitions.partition_for(tid)
            try:
                async with table.lock(tid):
                    generation = table.check(partition)
                    current = table.txns.get(tid)
                    if current is None or not state.timed_out(current, self._now()):
                        continue
                    prepared = await table.with_fresh(
                        lambda fresh, m=current: state.abort_open(  # type: ignore[misc]
                            m, self._now(), fresh, by_timeout=True
                        )
                    )
                    await table.write(partition, generation, prepared)
                    self._completions.start(partition, generation, prepared)
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
        table = self._table
        now = self._now()
        limit = self._expiration_ms
        removed_decisions = await self._staged.expire(limit)
        due = [m.transactional_id for m in table.served() if state.expired(m, now, limit)]
        removed = 0
        for tid in due:
            partition = table.partitions.partition_for(tid)
            try:
                async with table.lock(tid):
                    generation = table.check(partition)
                    current = table.txns.get(tid)
                    if current is None or not state.expired(current, self._now(), limit):
                        continue
                    await table.log.append(partition, [(records.transaction_key(tid), None)])
                    table.check_generation(partition, generation)
                    del table.txns[tid]
                    table.locks.pop(tid, None)
                    removed += 1
            except StromError as exc:
                log.warning("expiring a transactional id failed", transactional_id=tid,
                            error=str(exc))  # fmt: skip
        return removed + removed_decisions
