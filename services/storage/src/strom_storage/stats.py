"""Storage-node metrics through OpenTelemetry (exported on the Prometheus endpoint).

Counters: bytes and records in and out per topic; ISR shrinks and expands; the log cleaner's
passes, bytes read and written and records removed; transaction markers written (per topic and
result) and transaction verifications with the coordinator (ok or refused, per partition).
Gauges, read when scraped: log size and segment count per partition; under-replicated and
under-min-ISR partitions and follower lag (records the slowest follower misses) over the
partitions this node leads, and their open transactions; each compacted partition's dirty
ratio and the logs the cleaner gave up on. Request latency histograms come
from strom_server's RPC observer.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from strom.errors import CorruptRecordError
from strom.records.header import walk_batches
from strom_storage.log import Log
from strom_storage.log.cleaner.manager import LogCleaner

if TYPE_CHECKING:
    from strom_storage.node.partition import Partition

__all__ = ["NodeStats"]

PartitionLogs = Callable[[], Iterable[tuple[str, int, Log]]]


class NodeStats:
    """The node's instruments; ``watch_logs`` adds the per-partition gauges."""

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        self._meter = meter or metrics.get_meter("strom.storage")
        # Per-topic totals kept as plain ints on the data path and read at each collection:
        # a synchronous counter's add costs ~10 us, two to four of them per request.
        self._in: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])  # [bytes, records]
        self._out: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
        for name, unit, description, totals, column in (
            ("bytes_in", "By", "batch bytes appended by producers", self._in, 0),
            ("records_in", "1", "records appended by producers", self._in, 1),
            ("bytes_out", "By", "batch bytes returned by fetches", self._out, 0),
            ("records_out", "1", "records returned by fetches", self._out, 1),
        ):
            self._meter.create_observable_counter(
                f"strom.storage.{name}",
                unit=unit,
                description=description,
                callbacks=[_per_topic(totals, column)],
            )

        self._isr_shrinks = self._meter.create_counter(
            "strom.storage.isr_shrinks", description="replicas removed from ISRs this node leads"
        )
        self._isr_expands = self._meter.create_counter(
            "strom.storage.isr_expands", description="replicas added to ISRs this node leads"
        )
        self._replica_bytes_in = self._meter.create_counter(
            "strom.storage.replication_bytes_in", unit="By",
            description="batch bytes appended by this node's replica fetchers",
        )  # fmt: skip

        self._markers = self._meter.create_counter(
            "strom.storage.txn.markers_written",
            description="transaction markers (COMMIT/ABORT control batches) appended as leader",
        )
        self._verifications = self._meter.create_counter(
            "strom.storage.txn.verifications",
            description="partitions of transactions' first writes verified with their "
            "coordinator, by result (ok, refused)",
        )

    def marker_written(self, topic: str, *, committed: bool) -> None:
        self._markers.add(1, {"topic": topic, "result": "commit" if committed else "abort"})

    def txn_verified(self, *, ok: int, refused: int) -> None:
        if ok:
            self._verifications.add(ok, {"result": "ok"})
        if refused:
            self._verifications.add(refused, {"result": "refused"})

    def watch_transactions(self, partitions: Callable[[], Iterable[Partition]]) -> None:
        """Register the gauge of open transactions over the partitions this node leads."""

        def open_transactions(_options: CallbackOptions) -> list[Observation]:
            count = 0
            for p in partitions():
                if p.is_leader and not p.log.closed:
                    count += sum(
                        1 for a in p.log.active_producers() if a.current_txn_start_offset >= 0
                    )
            return [Observation(count)]

        self._meter.create_observable_gauge(
            "strom.storage.txn.open_transactions",
            description="transactions open (data written, no marker yet) on partitions this "
            "node leads, one per producer and partition",
            callbacks=[open_transactions],
        )

    def isr_changed(self, topic: str, *, expanded: int, shrunk: int) -> None:
        if expanded:
            self._isr_expands.add(expanded, {"topic": topic})
        if shrunk:
            self._isr_shrinks.add(shrunk, {"topic": topic})

    def replicated_in(self, topic: str, size: int) -> None:
        self._replica_bytes_in.add(size, {"topic": topic})

    def watch_replication(self, partitions: Callable[[], Iterable[Partition]]) -> None:
        """Register the replication gauges over the partitions this node leads."""

        def leading() -> list[Partition]:
            return [p for p in partitions() if p.is_leader and p.replicas]

        def under_replicated(_options: CallbackOptions) -> list[Observation]:
            return [Observation(sum(len(p.isr) < len(p.replicas) for p in leading()))]

        def under_min_isr(_options: CallbackOptions) -> list[Observation]:
            return [Observation(sum(p.under_min_isr() for p in leading()))]

        def lag(_options: CallbackOptions) -> list[Observation]:
            return [
                Observation(p.follower_lag(), {"topic": p.topic, "partition": p.index})
                for p in leading()
            ]

        self._meter.create_observable_gauge(
            "strom.storage.under_replicated_partitions",
            description="led partitions whose ISR is smaller than their replica list",
            callbacks=[under_replicated],
        )
        self._meter.create_observable_gauge(
            "strom.storage.under_min_isr_partitions",
            description="led partitions whose ISR is below min.insync.replicas",
            callbacks=[under_min_isr],
        )
        self._meter.create_observable_gauge(
            "strom.storage.follower_lag",
            description="records the slowest follower of the partition is behind its leader",
            callbacks=[lag],
        )

    def record_in(self, topic: str, size: int, records: int) -> None:
        totals = self._in[topic]
        totals[0] += size
        totals[1] += records

    def record_out(self, topic: str, data: bytes | memoryview) -> None:
        totals = self._out[topic]
        totals[0] += len(data)
        try:  # headers only: a fetch never decodes records
            totals[1] += sum(h.record_count for _, h in walk_batches(data, check_crc=False))
        except CorruptRecordError:
            return

    def watch_cleaner(self, cleaner: LogCleaner, partition_logs: PartitionLogs) -> None:
        """Register the log cleaner's progress: totals of its passes, logs it gave up on, and
        each compacted partition's dirty ratio (what ``min.cleanable.dirty.ratio`` compares)."""
        totals = cleaner.totals
        for name, unit, description, read in (
            ("passes", "1", "compaction passes completed", lambda: totals.passes),
            ("bytes_read", "By", "segment bytes read by compaction", lambda: totals.bytes_read),
            ("bytes_written", "By", "segment bytes written by compaction",
             lambda: totals.bytes_written),
            ("records_removed", "1", "records compaction removed (older values, tombstones)",
             lambda: totals.records_removed),
        ):  # fmt: skip
            self._meter.create_observable_counter(
                f"strom.storage.cleaner.{name}",
                unit=unit,
                description=description,
                callbacks=[_observe_total(read)],
            )

        def uncleanable(_options: CallbackOptions) -> list[Observation]:
            return [Observation(len(cleaner.uncleanable))]

        def dirty_ratio(_options: CallbackOptions) -> list[Observation]:
            now = int(time.time() * 1000)
            return [
                Observation(
                    cleaner.cleanable_range(log, now).dirty_ratio,
                    {"topic": topic, "partition": index},
                )
                for topic, index, log in partition_logs()
                if log.config.compact and not log.closed
            ]

        self._meter.create_observable_gauge(
            "strom.storage.cleaner.uncleanable_partitions",
            description="compacted logs the cleaner skips after a failed pass (until restart)",
            callbacks=[uncleanable],
        )
        self._meter.create_observable_gauge(
            "strom.storage.cleaner.dirty_ratio",
            description="dirty bytes / cleanable bytes of a compacted partition",
            callbacks=[dirty_ratio],
        )

    def watch_logs(self, partition_logs: PartitionLogs) -> None:
        """Register gauges computed from ``partition_logs()`` at each scrape."""

        def observe(value: Callable[[Log], int]) -> Callable[[CallbackOptions], list[Observation]]:
            def callback(_options: CallbackOptions) -> list[Observation]:
                return [
                    Observation(value(log), {"topic": topic, "partition": index})
                    for topic, index, log in partition_logs()
                    if not log.closed
                ]

            return callback

        self._meter.create_observable_gauge(
            "strom.storage.log_size", unit="By", description="bytes in the partition's segments",
            callbacks=[observe(lambda log: log.size_in_bytes)],
        )  # fmt: skip
        self._meter.create_observable_gauge(
            "strom.storage.segment_count", description="segments of the partition",
            callbacks=[observe(lambda log: log.segment_count)],
        )  # fmt: skip
        self._meter.create_observable_gauge(
            "strom.storage.log_end_offset", description="next offset to be written",
            callbacks=[observe(lambda log: log.log_end_offset)],
        )  # fmt: skip


def _per_topic(
    totals: dict[str, list[int]], column: int
) -> Callable[[CallbackOptions], list[Observation]]:
    def callback(_options: CallbackOptions) -> list[Observation]:
        return [Observation(row[column], {"topic": topic}) for topic, row in list(totals.items())]

    return callback


def _observe_total(read: Callable[[], int]) -> Callable[[CallbackOptions], list[Observation]]:
    def callback(_options: CallbackOptions) -> list[Observation]:
        return [Observation(read())]

    return callback
