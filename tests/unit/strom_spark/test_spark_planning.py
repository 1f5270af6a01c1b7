"""Offset ranges into tasks, and maxOffsetsPerTrigger across partitions."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from strom.types import TopicPartition
from strom_spark.planning import OffsetRange, cap_by_volume, split_ranges
from strom_spark.reader import offsets_from_json, offsets_to_json

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_one_task_per_non_empty_partition() -> None:
    ranges = [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 5), OffsetRange("b", 0, 3, 4)]
    assert split_ranges(ranges) == [OffsetRange("a", 0, 0, 10), OffsetRange("b", 0, 3, 4)]


def test_max_records_per_partition_cuts_big_ranges() -> None:
    out = split_ranges(
        [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 0, 3)], max_records_per_partition=4
    )
    assert [(r.partition, r.start, r.end) for r in out] == [
        (0, 0, 3),
        (0, 3, 6),
        (0, 6, 10),
        (1, 0, 3),
    ]


def test_min_partitions_splits_in_proportion_to_size() -> None:
    out = split_ranges([OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 0, 10)], min_partitions=10)
    assert sum(1 for r in out if r.partition == 0) == 9
    assert sum(1 for r in out if r.partition == 1) == 1
    # Never more pieces than records.
    assert len(split_ranges([OffsetRange("a", 0, 0, 2)], min_partitions=8)) == 2


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=6),
    st.one_of(st.none(), st.integers(1, 50)),
    st.one_of(st.none(), st.integers(1, 300)),
)
def test_splits_cover_each_range_exactly(spans, min_partitions, max_records) -> None:  # type: ignore[no-untyped-def]
    ranges = [OffsetRange("t", i, s, s + n) for i, (s, n) in enumerate(spans)]
    out = split_ranges(ranges, min_partitions=min_partitions, max_records_per_partition=max_records)
    for r in ranges:
        pieces = [p for p in out if p.partition == r.partition]
        assert sum(p.size for p in pieces) == r.size
        if pieces:
            assert pieces[0].start == r.start and pieces[-1].end == r.end
            assert all(a.end == b.start for a, b in pairwise(pieces))
        if max_records:
            assert all(p.size <= max_records for p in pieces)


def test_cap_by_volume_shares_the_limit() -> None:
    start = {A0: 0, A1: 100, B0: 0}
    end = {A0: 600, A1: 400, B0: 100}
    capped = cap_by_volume(start, end, 100)
    assert {tp: capped[tp] - start[tp] for tp in end} == {A0: 60, A1: 30, B0: 10}
    assert cap_by_volume(start, end, 10_000) == end
    # New partitions (absent from start) count from their end: nothing assumed waiting there.
    assert cap_by_volume({A0: 0}, {A0: 10, A1: 5}, 4) == {A0: 4, A1: 5}


@given(
    st.dictionaries(
        st.integers(0, 20), st.tuples(st.integers(0, 500), st.integers(0, 500)), min_size=1
    ),
    st.integers(1, 700),
)
def test_cap_by_volume_is_exact(spans, limit) -> None:  # type: ignore[no-untyped-def]
    start = {TopicPartition("t", p): s for p, (s, _) in spans.items()}
    end = {TopicPartition("t", p): s + n for p, (s, n) in spans.items()}
    capped = cap_by_volume(start, end, limit)
    taken = sum(capped[tp] - start[tp] for tp in end)
    assert taken == min(limit, sum(end[tp] - start[tp] for tp in end))
    assert all(start[tp] <= capped[tp] <= end[tp] for tp in end)


def test_offsets_json_round_trip() -> None:
    offsets = {A0: 5, A1: 7, B0: 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert offsets_from_json(as_json) == offsets
