"""The console's plain decisions: browse start positions, the lag history, charts, topic rows
and paging, the overview summary (reset plans and lag:
tests/unit/strom/group/test_offsets_plan.py)."""

from __future__ import annotations

import pytest

from strom.types import (
    ClusterDescription,
    ConsumerGroupListing,
    NodeInfo,
    PartitionDescription,
    TopicDescription,
    TopicPartition,
)
from strom_console.browse import BrowseError, StartSpec, start_positions
from strom_console.charts import line_chart
from strom_console.lag import LagHistory
from strom_console.overview import summarize
from strom_console.topics import health, paginate, search_topics, topic_rows

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def test_start_positions_stay_inside_each_log() -> None:
    starts, ends = {0: 10, 1: 0}, {0: 100, 1: 5}
    assert start_positions(StartSpec("earliest"), 20, starts, ends) == {0: 10, 1: 0}
    assert start_positions(StartSpec("latest"), 20, starts, ends) == {0: 80, 1: 0}
    assert start_positions(StartSpec("offset", 3), 20, starts, ends) == {0: 10, 1: 3}
    assert start_positions(StartSpec("offset", 999), 20, starts, ends) == {0: 100, 1: 5}
    by_time = start_positions(StartSpec("timestamp", 1), 20, starts, ends, {0: 50, 1: -1})
    assert by_time == {0: 50, 1: 5}


def test_start_spec_parsing() -> None:
    assert StartSpec.parse("offset", " 42 ") == StartSpec("offset", 42)
    with pytest.raises(BrowseError, match="start must be one of"):
        StartSpec.parse("middle")
    with pytest.raises(BrowseError, match="expected an integer"):
        StartSpec.parse("timestamp", "yesterday")
    with pytest.raises(BrowseError, match=">= 0"):
        StartSpec.parse("offset", "-1")


def test_lag_history_keeps_a_window_and_forgets_idle_groups() -> None:
    history = LagHistory(window_s=10)
    history.record(0, {"g": 5, "old": 1})
    history.record(5, {"g": 7})
    history.record(12, {"g": 9})
    assert history.samples("g") == [(5, 7), (12, 9)]
    assert "old" not in history.groups()
    assert history.latest("g") == 9 and history.latest("none") is None


def test_line_chart_scales_into_the_box() -> None:
    chart = line_chart([(0, 0), (5, 50), (10, 100)], width=104, height=104, pad=2)
    assert chart.points == "2.0,102.0 52.0,52.0 102.0,2.0"
    assert chart.samples == 3 and chart.max_label == "100"
    assert line_chart([]).points == ""
    assert len(line_chart([(1, 3)]).points.split()) == 2  # one sample still draws


def _partition(p: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> object:
    return PartitionDescription(p, leader, 0, replicas, isr)


TOPICS = [
    TopicDescription("orders", "id1", False, (
        PartitionDescription(0, 1, 0, (1, 2, 3), (1, 2, 3)),
        PartitionDescription(1, 2, 0, (2, 3, 1), (2,)),
    )),
    TopicDescription("payments", "id2", False, (PartitionDescription(0, -1, 0, (3,), ()),)),
    TopicDescription("__consumer_offsets", "id3", True, (
        PartitionDescription(0, 1, 0, (1, 2), (1, 2)),
    )),
]  # fmt: skip


def test_partition_health() -> None:
    p = PartitionDescription(1, 2, 0, (2, 3, 1), (2,))
    assert health(p, 2).under_replicated and health(p, 2).under_min_isr
    assert not health(p, 1).under_min_isr
    assert health(PartitionDescription(0, -1, 0, (3,), ()), 2).offline


def test_topic_rows_search_and_paging() -> None:
    rows = topic_rows(TOPICS, min_isr={"orders": 2}, messages={"orders": 9}, rates={"orders": 1.5})
    orders = rows[0]
    assert (orders.partitions, orders.replication, orders.under_replicated) == (2, 3, 1)
    assert (orders.under_min_isr, orders.messages, orders.rate_in) == (1, 9, 1.5)
    assert [r.name for r in search_topics(rows)] == ["orders", "payments"]
    assert [r.name for r in search_topics(rows, "PAY")] == ["payments"]
    assert [r.name for r in search_topics(rows, "offsets", internal=True)] == ["__consumer_offsets"]
    assert [r.name for r in search_topics(rows, problems=True)] == ["orders", "payments"]
    page = paginate(list(range(250)), 3, 100)
    assert (page.items[0], len(page.items), page.pages, page.has_next) == (200, 50, 3, False)
    assert paginate([], 5, 100).number == 1


def test_overview_summary() -> None:
    cluster = ClusterDescription(
        "c1", NodeInfo(9, "127.0.0.1", 9096), (NodeInfo(1, "h", 1, "r1"), NodeInfo(2, "h", 2))
    )
    groups = [ConsumerGroupListing("g1", "consumer", "Stable"),
              ConsumerGroupListing("g2", "consumer", "Empty")]  # fmt: skip
    o = summarize(cluster, TOPICS, groups, min_isr={"orders": 2}, rates={"orders": 2.0})
    assert o.controller == "127.0.0.1:9096"
    assert (o.topics, o.internal_topics, o.partitions) == (2, 1, 4)
    assert (o.under_replicated, o.offline, o.under_min_isr) == (2, 1, 1)
    assert [(n.node_id, n.leaders, n.replicas) for n in o.nodes] == [(1, 2, 3), (2, 1, 3)]
    assert o.group_states == {"Empty": 1, "Stable": 1} and o.rate_in == 2.0
