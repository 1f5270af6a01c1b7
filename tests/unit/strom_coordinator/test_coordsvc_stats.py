"""The coordinator's metrics, read through an in-memory OpenTelemetry reader."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from strom.cluster import ClusterClient
from strom.types import TopicPartition
from strom_coordinator.stats import CoordinatorStats, LagTracker


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    return {
        m.name: list(m.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }


def test_listener_counters_and_gauges() -> None:
    reader = InMemoryMetricReader()
    stats = CoordinatorStats(MeterProvider(metric_readers=[reader]).get_meter("test"))
    stats.on_rebalance("g", 0.25)
    stats.on_rebalance("g", 0.75)
    stats.on_commit("g", 3)
    stats.on_commit("h", 1)

    async def committed() -> list[tuple[str, TopicPartition, int]]:
        return []

    loop = asyncio.new_event_loop()
    try:
        lag = LagTracker(ClusterClient("127.0.0.1:1"), committed, loop)
        lag.snapshot = {("g", TopicPartition("t", 0)): (5, 12)}
        lag._refreshed_at = time.monotonic()  # fresh: the scrape starts no refresh
        stats.watch(lambda: {"Stable": 2, "Empty": 1}, lambda: 4, lag)
        found = points(reader)
    finally:
        loop.close()
    rebalances = found["strom.coordinator.rebalances"]
    assert [(dict(p.attributes), p.value) for p in rebalances] == [({"group": "g"}, 2)]
    (duration,) = found["strom.coordinator.rebalance.duration"]
    assert duration.count == 2 and duration.sum == 1000.0  # milliseconds
    commits = {p.attributes["group"]: p.value for p in found["strom.coordinator.commits"]}
    assert commits == {"g": 1, "h": 1}
    parts = {
        p.attributes["group"]: p.value for p in found["strom.coordinator.committed_partitions"]
    }
    assert parts == {"g": 3, "h": 1}
    groups = {p.attributes["state"]: p.value for p in found["strom.coordinator.groups"]}
    assert groups == {"Stable": 2, "Empty": 1}
    assert [p.value for p in found["strom.coordinator.owned_partitions"]] == [4]
    labels = {"group": "g", "topic": "t", "partition": 0}
    (lag_point,) = found["strom.coordinator.consumer_lag"]
    (lead_point,) = found["strom.coordinator.consumer_lead"]
    assert dict(lag_point.attributes) == labels and lag_point.value == 5
    assert dict(lead_point.attributes) == labels and lead_point.value == 12


def test_transaction_gauges_and_marker_counter() -> None:
    reader = InMemoryMetricReader()
    stats = CoordinatorStats(MeterProvider(metric_readers=[reader]).get_meter("test"))
    stats.on_markers(True, 3)
    stats.on_markers(True, 2)
    stats.on_markers(False, 1)
    stats.watch_transactions(lambda: {"Ongoing": 2, "CompleteCommit": 5}, lambda: 7)
    found = points(reader)
    markers = {p.attributes["result"]: p.value for p in found["strom.coordinator.txn_markers"]}
    assert markers == {"commit": 5, "abort": 1}
    states = {p.attributes["state"]: p.value for p in found["strom.coordinator.transactions"]}
    assert states == {"Ongoing": 2, "CompleteCommit": 5}
    owned = found["strom.coordinator.owned_transaction_partitions"]
    assert [p.value for p in owned] == [7]
