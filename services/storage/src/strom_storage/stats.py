"""Storage-node metrics through OpenTelemetry (exported on the Prometheus endpoint).

Counters: bytes and records in and out per topic; ISR shrinks and expands. Gauges, read when
scraped: log size and segment count per partition; under-replicated and under-min-ISR
partitions and follower lag (records the slowest follower misses) over the partitions this node
leads. Request latency histograms come from strom_server's interceptor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from strom.errors import CorruptRecordError
from strom.records.header import walk_batches
from strom_storage.log import Log

if TYPE_CHECKING:
    from strom_storage.node.partition import Partition

__all__ = ["NodeStats"]

PartitionLogs = Callable[[], Iterable[tuple[str, int, Log]]]


class NodeStats:
    """The node's instruments; ``watch_logs`` adds the per-partition gauges."""

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        self._meter = meter or metrics.get_meter("strom.storage")
        self._bytes_in = self._meter.create_counter(
            "strom.storage.bytes_in", unit="By", description="batch bytes appended by producers"
        )
        self._records_in = self._meter.create_counter(
            "strom.storage.records_in", description="records appended by producers"
        )
        self._bytes_out = self._meter.create_counter(
            "strom.storage.bytes_out", unit="By", description="batch bytes returned by fetches"
        )
        self._records_out = self._meter.create_counter(
            "strom.storage.records_out", description="records returned by fetches"
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
        attributes = {"topic": topic}
        self._bytes_in.add(size, attributes)
        self._records_in.add(records, attributes)

    def record_out(self, topic: str, data: bytes | memoryview) -> None:
        attributes = {"topic": topic}
        self._bytes_out.add(len(data), attributes)
        try:  # headers only: a fetch never decodes records
            count = sum(h.record_count for _, h in walk_batches(data, check_crc=False))
        except CorruptRecordError:
            return
        self._records_out.add(count, attributes)

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
