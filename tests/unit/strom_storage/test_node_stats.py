"""The storage node's metrics, read through an in-memory OpenTelemetry reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from storage_batches import make_batch, simple_batch

from strom_server.runtime.clock import ManualClock
from strom_storage.log import Log
from strom_storage.log.cleaner.manager import LogCleaner
from strom_storage.stats import NodeStats


def _points(reader: InMemoryMetricReader) -> dict[str, dict[tuple[Any, ...], Any]]:
    """metric name -> {sorted attribute items: value}."""
    out: dict[str, dict[tuple[Any, ...], Any]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out[metric.name] = {
                    tuple(sorted(p.attributes.items())): p.value for p in metric.data.data_points
                }
    return out


def _stats() -> tuple[NodeStats, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return NodeStats(MeterProvider(metric_readers=[reader]).get_meter("test")), reader


def test_bytes_and_records_in_and_out_are_counted_per_topic() -> None:
    stats, reader = _stats()
    stats.record_in("a", 100, 3)
    stats.record_in("a", 50, 2)
    stats.record_in("b", 7, 1)
    fetched = simple_batch(4) + simple_batch(2)
    stats.record_out("a", fetched)
    stats.record_out("a", memoryview(b"\x00" * 10))  # not batches: bytes counted, records not
    points = _points(reader)
    assert points["strom.storage.bytes_in"] == {(("topic", "a"),): 150, (("topic", "b"),): 7}
    assert points["strom.storage.records_in"] == {(("topic", "a"),): 5, (("topic", "b"),): 1}
    assert points["strom.storage.bytes_out"] == {(("topic", "a"),): len(fetched) + 10}
    assert points["strom.storage.records_out"] == {(("topic", "a"),): 6}
    stats.record_in("a", 1, 1)  # counters are cumulative across collections
    assert _points(reader)["strom.storage.bytes_in"][(("topic", "a"),)] == 151


def test_log_gauges_and_cleaner_progress(open_log: Callable[..., Log], clock: ManualClock) -> None:
    stats, reader = _stats()
    log = open_log(segment_bytes=400, cleanup_policy=("compact",))
    for i in range(30):
        log.append_as_leader(make_batch([(b"k%d" % (i % 4), b"v%d" % i, clock.time_ms())]))
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner(dedupe_buffer_bytes=1 << 16)
    stats.watch_logs(lambda: [("t", 0, log)])
    stats.watch_cleaner(cleaner, lambda: [("t", 0, log)])
    before = _points(reader)
    partition = (("partition", 0), ("topic", "t"))
    assert before["strom.storage.segment_count"][partition] == log.segment_count > 3
    assert before["strom.storage.log_end_offset"][partition] == 30
    assert before["strom.storage.cleaner.dirty_ratio"][partition] == 1.0
    assert before["strom.storage.cleaner.passes"][()] == 0

    result = cleaner.clean(log, clock.time_ms())
    assert result is not None
    after = _points(reader)
    assert after["strom.storage.cleaner.passes"][()] == 1
    assert after["strom.storage.cleaner.bytes_read"][()] == result.bytes_in > 0
    assert after["strom.storage.cleaner.bytes_written"][()] == result.bytes_out
    assert after["strom.storage.cleaner.records_removed"][()] == result.records_removed > 0
    assert after["strom.storage.cleaner.dirty_ratio"][partition] == 0.0
    assert after["strom.storage.cleaner.uncleanable_partitions"][()] == 0
    assert after["strom.storage.log_size"][partition] == log.size_in_bytes
