"""The automatic preferred-leader rebalance while this controller is active (Kafka's
``auto.leader.rebalance.enable``): every ``leader.imbalance.check.interval.seconds`` a
preferred election for each partition ``managers.leader_balance.preferred_elections_due``
picks, each committed like an on-demand ``elect_leaders``.

Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

from strom.errors import NotControllerError
from strom_controller.config import ControllerConfig
from strom_controller.keys import PartitionRecord
from strom_controller.managers.leader_balance import preferred_elections_due
from strom_controller.managers.replication import ReplicationManager
from strom_controller.managers.result import ControllerResult
from strom_controller.metadata_cache import MetadataCache
from strom_controller.model import Outcome
from strom_server.runtime.clock import Clock
from strom_server.runtime.logs import get_logger

__all__ = ["LeaderBalancer"]

log = get_logger(__name__)

#: Commits a decision under the controller's write lock and fence (``Controller._admin``).
Admin = Callable[
    [Callable[[], ControllerResult[PartitionRecord]]], Awaitable[Outcome[PartitionRecord]]
]


class LeaderBalancer:
    """Runs the leader-imbalance checks of the active controller (started on election,
    stopped when deposed or closing)."""

    def __init__(
        self,
        config: ControllerConfig,
        cache: MetadataCache,
        replication: ReplicationManager,
        *,
        admin: Admin,
        is_active: Callable[[], bool],
        clock: Clock,
    ) -> None:
        self._config = config
        self._cache = cache
        self._replication = replication
        self._admin = admin
        self._is_active = is_active
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.elections = 0
        """Preferred elections run by the automatic rebalance (while this process was active)."""

    def start(self) -> None:
        """Start the periodic check (after stopping one still running)."""
        self.stop()
        self._task = asyncio.create_task(self._loop(), name="controller-leader-balance")

    def stop(self) -> asyncio.Task[None] | None:
        """Cancel the periodic check (if any); returns its task for the caller to await."""
        task, self._task = self._task, None
        # Deposed by the balancer's own fenced write: it sees it is no longer current and ends.
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        return task

    async def _loop(self) -> None:
        interval = self._config.leader_imbalance_check_interval_seconds
        while self._task is asyncio.current_task():
            await self._clock.sleep(interval)
            try:
                await self.rebalance()
            except Exception:  # the next round tries again
                log.exception("leader imbalance check failed")

    async def rebalance(self) -> list[tuple[str, int, Outcome[PartitionRecord]]]:
        """One leader-imbalance check: a preferred election for every partition that
        ``preferred_elections_due`` picks."""
        if not self._is_active():
            return []
        percentage = self._config.leader_imbalance_per_broker_percentage
        due = preferred_elections_due(
            self._cache, enabled=self._config.auto_leader_rebalance_enable, percentage=percentage
        )
        out = []
        for imbalance, partitions in due:
            log.info("leader imbalance above the threshold", broker=imbalance.broker,
                     not_leading=len(imbalance.not_leading), preferred=imbalance.preferred,
                     percentage=percentage)  # fmt: skip
            for topic, partition in partitions:
                state = self._cache.partitions.get((topic, partition))
                previous = state.leader if state else -1
                elect = functools.partial(
                    self._replication.elect, self._cache, topic, partition, "preferred"
                )
                outcome = await self._admin(elect)
                out.append((topic, partition, outcome))
                if outcome.error is not None:
                    # Changed since the decision (e.g. the replica left the ISR); next round.
                    log.info("automatic preferred leader election skipped", topic=topic,
                             partition=partition, error=str(outcome.error))  # fmt: skip
                    if isinstance(outcome.error, NotControllerError):
                        return out
                    continue
                assert outcome.value is not None
                self.elections += 1
                log.info("automatic preferred leader election", topic=topic, partition=partition,
                         leader=outcome.value.leader, previous_leader=previous,
                         leader_epoch=outcome.value.leader_epoch)  # fmt: skip
        return out
