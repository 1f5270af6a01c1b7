"""Coordinator metrics through OpenTelemetry (exported on the Prometheus endpoint).

Counters and a histogram fed by the group manager (``GroupStatsListener``): rebalances,
rebalance duration, offset commits and committed partitions. Gauges read at each scrape: groups
by state, owned (loaded) ``__consumer_offsets`` partitions, and per group/topic/partition the
consumer lag (high watermark minus committed offset) and lead (committed offset minus log start
offset: how close retention is to deleting unread records). Lag and lead come from a snapshot
of ListOffsets answers refreshed at most every ``LAG_REFRESH_S`` (a scrape that finds it older
starts a refresh on the event loop and reports the previous one).

The transaction coordinator adds a counter of acknowledged transaction markers (``on_markers``,
the manager's ``TxnStatsListener``), counters of completed staged-commit decisions and of their
members by result (``on_staged_commit``; ``failed``: lost after the decision), and gauges of
transactional ids by state and of owned ``__transaction_state`` partitions
(``watch_transactions``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from strom.cluster import ClusterClient, list_offsets
from strom.errors import StromError
from strom.protocol.v1 import common_pb2
from strom.types import TopicPartition
from strom_server.runtime.logs import get_logger

__all__ = ["LAG_REFRESH_S", "CoordinatorStats", "LagTracker"]

log = get_logger(__name__)

LAG_REFRESH_S = 30.0

Committed = Callable[[], Awaitable[Iterable[tuple[str, TopicPartition, int]]]]
"""(group, partition, committed offset) of every committed offset this instance serves."""


class CoordinatorStats:
    """The manager's ``GroupStatsListener`` plus the scrape-time gauges."""

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        self._meter = meter or metrics.get_meter("strom.coordinator")
        self._rebalances = self._meter.create_counter(
            "strom.coordinator.rebalances", description="completed rebalances, per group"
        )
        self._rebalance_duration = self._meter.create_histogram(
            "strom.coordinator.rebalance.duration", unit="ms",
            description="time from the start of a rebalance to the new generation",
        )  # fmt: skip
        self._commits = self._meter.create_counter(
            "strom.coordinator.commits", description="acknowledged offset commits, per group"
        )
        self._committed_partitions = self._meter.create_counter(
            "strom.coordinator.committed_partitions",
            description="partition offsets written by acknowledged commits, per group",
        )
        self._markers = self._meter.create_counter(
            "strom.coordinator.txn_markers",
            description="transaction markers acknowledged (partitions and groups), by result",
        )
        self._staged_commits = self._meter.create_counter(
            "strom.coordinator.staged_commits",
            description="staged-commit decisions completed (CommitStagedTransactions)",
        )
        self._staged_members = self._meter.create_counter(
            "strom.coordinator.staged_members",
            description="members of completed staged-commit decisions, by result "
            "(failed: expired before they could be committed)",
        )

    # --- GroupStatsListener --------------------------------------------------------------

    def on_rebalance(self, group_id: str, duration_s: float) -> None:
        self._rebalances.add(1, {"group": group_id})
        self._rebalance_duration.record(duration_s * 1000, {"group": group_id})

    def on_commit(self, group_id: str, partitions: int) -> None:
        self._commits.add(1, {"group": group_id})
        self._committed_partitions.add(partitions, {"group": group_id})

    # --- TxnStatsListener ----------------------------------------------------------------

    def on_markers(self, committed: bool, count: int) -> None:
        self._markers.add(count, {"result": "commit" if committed else "abort"})

    def on_staged_commit(self, members: int, failed: int) -> None:
        self._staged_commits.add(1)
        self._staged_members.add(members - failed, {"result": "committed"})
        if failed:
            self._staged_members.add(failed, {"result": "failed"})

    # --- gauges --------------------------------------------------------------------------

    def watch_transactions(
        self,
        transactions_by_state: Callable[[], Mapping[str, int]],
        owned_partitions: Callable[[], int],
    ) -> None:
        """Register the transaction coordinator's gauges (values read at each scrape)."""

        def states(_options: CallbackOptions) -> list[Observation]:
            counts = transactions_by_state()
            return [Observation(n, {"state": s}) for s, n in sorted(counts.items())]

        def owned(_options: CallbackOptions) -> list[Observation]:
            return [Observation(owned_partitions())]

        self._meter.create_observable_gauge(
            "strom.coordinator.transactions",
            description="transactional ids this coordinator serves, by state",
            callbacks=[states],
        )
        self._meter.create_observable_gauge(
            "strom.coordinator.owned_transaction_partitions",
            description="__transaction_state partitions this coordinator serves",
            callbacks=[owned],
        )

    def watch(
        self,
        groups_by_state: Callable[[], Mapping[str, int]],
        owned_partitions: Callable[[], int],
        lag: LagTracker | None = None,
    ) -> None:
        """Register the gauges (values read at each scrape)."""

        def states(_options: CallbackOptions) -> list[Observation]:
            return [Observation(n, {"state": s}) for s, n in sorted(groups_by_state().items())]

        def owned(_options: CallbackOptions) -> list[Observation]:
            return [Observation(owned_partitions())]

        self._meter.create_observable_gauge(
            "strom.coordinator.groups", description="groups this coordinator serves, by state",
            callbacks=[states],
        )  # fmt: skip
        self._meter.create_observable_gauge(
            "strom.coordinator.owned_partitions",
            description="__consumer_offsets partitions this coordinator serves",
            callbacks=[owned],
        )
        if lag is None:
            return

        def observe(which: int) -> Callable[[CallbackOptions], list[Observation]]:
            def callback(_options: CallbackOptions) -> list[Observation]:
                lag.refresh_if_stale()
                return [
                    Observation(
                        values[which], {"group": g, "topic": tp.topic, "partition": tp.partition}
                    )
                    for (g, tp), values in lag.snapshot.items()
                ]

            return callback

        self._meter.create_observable_gauge(
            "strom.coordinator.consumer_lag",
            description="records between a group's committed offset and the high watermark",
            callbacks=[observe(0)],
        )
        self._meter.create_observable_gauge(
            "strom.coordinator.consumer_lead",
            description="records between the log start offset and a group's committed offset",
            callbacks=[observe(1)],
        )


class LagTracker:
    """Lag and lead per (group, partition) from committed offsets and ListOffsets."""

    def __init__(
        self,
        cluster: ClusterClient,
        committed: Committed,
        loop: asyncio.AbstractEventLoop,
        *,
        refresh_s: float = LAG_REFRESH_S,
        timeout_s: float = 10.0,
    ) -> None:
        self._cluster = cluster
        self._committed = committed
        self._loop = loop
        self._refresh_s = refresh_s
        self._timeout_s = timeout_s
        self.snapshot: dict[tuple[str, TopicPartition], tuple[int, int]] = {}
        """(group, partition) -> (lag, lead)"""
        self._refreshed_at = float("-inf")
        self._task: asyncio.Task[None] | None = None

    def refresh_if_stale(self) -> None:
        """Start a refresh on the event loop when the snapshot is older than ``refresh_s``
        (safe from any thread: scrapes run on the exporter's)."""
        if time.monotonic() - self._refreshed_at < self._refresh_s:
            return
        self._refreshed_at = time.monotonic()
        with contextlib.suppress(RuntimeError):  # the loop is closed: shutting down
            self._loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(self.refresh(), name="coordinator-lag")

    async def refresh(self) -> None:
        committed = list(await self._committed())
        try:
            if committed:
                await self._cluster.refresh(sorted({tp.topic for _, tp, _ in committed}))
        except StromError as exc:
            log.info("consumer lag not refreshed", error=str(exc))
            return
        counts = {tp.topic: self._cluster.partition_count(tp.topic) for _, tp, _ in committed}
        # Offsets of deleted topics (or partitions) stay committed until they expire.
        partitions = {tp for _, tp, _ in committed if tp.partition < (counts[tp.topic] or 0)}
        if not partitions:
            self.snapshot = {}
            return
        try:
            start = await list_offsets(
                self._cluster,
                {tp: (common_pb2.EARLIEST, 0) for tp in partitions},
                timeout_s=self._timeout_s,
            )
            end = await list_offsets(
                self._cluster,
                {tp: (common_pb2.LATEST, 0) for tp in partitions},
                timeout_s=self._timeout_s,
            )
        except StromError as exc:
            log.info("consumer lag not refreshed", error=str(exc))
            return
        self.snapshot = {
            (group, tp): (max(0, end[tp][0] - offset), max(0, offset - start[tp][0]))
            for group, tp, offset in committed
            if tp in start and tp in end and offset >= 0
        }
