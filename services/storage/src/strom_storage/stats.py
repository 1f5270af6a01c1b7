"""Storage-node metrics through OpenTelemetry (exported on the Prometheus endpoint).

Counters: bytes and records in and out per topic. Gauges, read when scraped: log size and
segment count per partition. Request latency histograms come from strom_server's interceptor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from strom.errors import CorruptRecordError
from strom.records.header import walk_batches
from strom_storage.log import Log

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
