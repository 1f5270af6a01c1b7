"""Completing ended transactions: once a Prepare* state is written, a background task per
transactional id sends the transaction's markers (``MarkerWriter``, retried until acknowledged)
and then writes Complete*. A partition loaded from the log restarts it for every Prepare* id it
holds; unloading a partition cancels its tasks; a marker refused with a newer coordinator epoch
gives the partition up (``on_fenced``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from strom.cluster.retry import Backoff
from strom.errors import NotCoordinatorError, StromError, TransactionCoordinatorFencedError
from strom_coordinator.group.records import OFFSETS_TOPIC
from strom_coordinator.txn import state
from strom_coordinator.txn.state import TxnMetadata
from strom_coordinator.txn.table import TxnTable
from strom_server.runtime.logs import get_logger

__all__ = [
    "Completions",
    "MarkerJob",
    "MarkerWriter",
    "NullTxnStats",
    "TxnStatsListener",
]

log = get_logger(__name__)

_BACKOFF_S = 0.1
_BACKOFF_MAX_S = 2.0

TopicPartition = tuple[str, int]


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


class Completions:
    """The running completion task of each ending transaction (see the module docstring)."""

    def __init__(
        self,
        table: TxnTable,
        markers: MarkerWriter,
        *,
        coordinator_epoch: Callable[[int], int | None],
        on_fenced: Callable[[int], None],
        stats: TxnStatsListener,
        wall_clock_ms: Callable[[], int],
    ) -> None:
        self._table = table
        self._markers = markers
        self._coordinator_epoch = coordinator_epoch
        self._on_fenced = on_fenced
        self._stats = stats
        self._now = wall_clock_ms
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def running(self, transactional_id: str) -> asyncio.Task[None] | None:
        """The id's completion task while its markers are being written."""
        return self._tasks.get(transactional_id)

    def cancel(self, transactional_id: str) -> None:
        task = self._tasks.pop(transactional_id, None)
        if task is not None:
            task.cancel()

    def start(self, partition: int, generation: int, meta: TxnMetadata) -> None:
        """Complete the Prepare* transaction ``meta`` (unless its completion already runs)."""
        tid = meta.transactional_id
        previous = self._tasks.get(tid)
        if previous is not None and not previous.done():
            return
        # A context of its own: the request that started it (its log fields) is long gone.
        task = asyncio.get_running_loop().create_task(
            self._complete(partition, generation, meta),
            name=f"txn-markers-{tid}",
            context=contextvars.Context(),
        )
        self._tasks[tid] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._tasks.get(tid) is done:
                del self._tasks[tid]

        task.add_done_callback(forget)

    async def close(self) -> None:
        """Cancel every completion task (the process is stopping)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _complete(self, partition: int, generation: int, meta: TxnMetadata) -> None:
        """Send the markers of a Prepare* transaction, then write Complete* (both retried for
        as long as this load of the partition lasts)."""
        coordinator_epoch = self._coordinator_epoch(partition)
        if coordinator_epoch is None:
            return
        job = MarkerJob(
            transactional_id=meta.transactional_id,
            producer_id=meta.txn_producer_id,
            producer_epoch=meta.txn_epoch,
            committed=meta.state.committing,
            coordinator_epoch=coordinator_epoch,
            partitions=tuple(sorted(tp for tp in meta.partitions if tp[0] != OFFSETS_TOPIC)),
            groups=tuple(sorted(meta.groups)),
        )
        if await self._send_markers(partition, job):
            await self._write_complete(partition, generation, meta.transactional_id)

    async def _send_markers(self, partition: int, job: MarkerJob) -> bool:
        """Write the markers until acknowledged; False when fenced (the partition is given up)."""
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        tid = job.transactional_id
        while True:
            try:
                await self._markers.write(job)
                break
            except TransactionCoordinatorFencedError as exc:
                log.warning("fenced while writing markers: giving the partition up",
                            transactional_id=tid, partition=partition, error=str(exc))  # fmt: skip
                self._on_fenced(partition)
                return False
            except Exception:  # the writer retries what it knows; anything else: again
                log.exception("writing markers failed; retrying", transactional_id=tid)
                await backoff.sleep()
        self._stats.on_markers(job.committed, len(job.partitions) + len(job.groups))
        return True

    async def _write_complete(self, partition: int, generation: int, tid: str) -> None:
        """Write Complete* for ``tid`` (retried while this load of the partition lasts)."""
        table = self._table
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        completed: TxnMetadata | None = None
        while table.generation(partition) == generation:
            try:
                async with table.lock(tid):
                    table.check_generation(partition, generation)
                    current = table.txns.get(tid)
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
                    written = await table.queue_write(partition, completed)
                    table.txns[tid] = completed
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
