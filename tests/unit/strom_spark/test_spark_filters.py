"""Filter pushdown: which filters are pushed and what they leave to plan."""

from __future__ import annotations

import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from strom.types import TopicPartition
from strom_spark.options import parse_source_options
from strom_spark.pushdown import Pushdown, in_pushdown_worker, push_filters
from strom_spark.reader import StromBatchReader, StromPushdownReader

TPS = [TopicPartition(t, p) for t in ("a", "b", "c") for p in range(4)]


def planned(*filters: Filter) -> tuple[list[TopicPartition], list[Filter]]:
    pushed, rest = push_filters(Pushdown(), filters)
    return [tp for tp in TPS if pushed.keeps(tp)], rest


def test_nothing_pushed_keeps_everything() -> None:
    pushed, rest = push_filters(Pushdown(), [])
    assert pushed == Pushdown() and rest == []
    assert all(pushed.keeps(tp) for tp in TPS)
    assert pushed.clamp(3, 9) == (3, 9) and not pushed.clamps_offsets


def test_partition_filters() -> None:
    assert planned(EqualTo(("partition",), 2))[0] == [TopicPartition(t, 2) for t in "abc"]
    kept, rest = planned(In(("partition",), (0, 3)), GreaterThan(("partition",), 0))
    assert kept == [TopicPartition(t, 3) for t in "abc"] and rest == []
    kept, _ = planned(GreaterThanOrEqual(("partition",), 1), LessThan(("partition",), 3))
    assert {tp.partition for tp in kept} == {1, 2}
    kept, _ = planned(LessThanOrEqual(("partition",), 0))
    assert {tp.partition for tp in kept} == {0}
    assert planned(EqualTo(("partition",), 1), EqualTo(("partition",), 2))[0] == []


def test_topic_filters() -> None:
    assert {tp.topic for tp in planned(EqualTo(("topic",), "b"))[0]} == {"b"}
    kept, rest = planned(In(("topic",), ("a", "c", "zz")), In(("topic",), ("c",)))
    assert {tp.topic for tp in kept} == {"c"} and rest == []
    # Ranges on a string column are left to Spark.
    f = GreaterThan(("topic",), "a")
    assert planned(f) == (TPS, [f])


def test_offset_filters_clamp_ranges() -> None:
    cases: list[tuple[Filter, tuple[int, int]]] = [
        (EqualTo(("offset",), 5), (5, 6)),
        (GreaterThan(("offset",), 5), (6, 20)),
        (GreaterThanOrEqual(("offset",), 5), (5, 20)),
        (LessThan(("offset",), 5), (2, 5)),
        (LessThanOrEqual(("offset",), 5), (2, 6)),
    ]
    for f, expected in cases:
        pushed, rest = push_filters(Pushdown(), [f])
        assert rest == [] and pushed.clamps_offsets
        assert pushed.clamp(2, 20) == expected, f
    pushed, _ = push_filters(Pushdown(), [GreaterThan(("offset",), 30)])
    assert pushed.clamp(2, 20) == (31, 31)  # empty: no task
    pushed, _ = push_filters(Pushdown(), [LessThan(("offset",), 1)])
    start, end = pushed.clamp(2, 20)
    assert start == end
    both = [GreaterThanOrEqual(("offset",), 4), LessThan(("offset",), 8), LessThan(("offset",), 6)]
    assert push_filters(Pushdown(), both)[0].clamp(0, 100) == (4, 6)


def test_unsupported_filters_come_back_as_the_same_objects() -> None:
    unsupported: list[Filter] = [
        GreaterThan(("timestamp",), 5),
        EqualTo(("key",), b"k1"),
        StringStartsWith(("value",), "v"),
        IsNotNull(("partition",)),
        EqualNullSafe(("partition",), 1),
        Not(EqualTo(("partition",), 1)),
        In(("offset",), (1, 2)),
        EqualTo(("partition",), 1.5),
        EqualTo(("partition",), True),
        In(("partition",), (1, None)),
        EqualTo(("topic",), 3),
        EqualTo(("headers", "key"), "h"),
        EqualTo(("nosuch",), 1),
    ]
    supported = EqualTo(("partition",), 1)
    pushed, rest = push_filters(Pushdown(), [*unsupported, supported])
    assert all(a is b for a, b in zip(rest, unsupported, strict=True))
    assert pushed == Pushdown(partitions=None, partition_lo=1, partition_hi=2)


def test_column_names_are_case_insensitive() -> None:
    pushed, rest = push_filters(Pushdown(), [EqualTo(("Partition",), 1)])
    assert rest == [] and pushed.partition_lo == 1


Op = st.sampled_from(["eq", "gt", "ge", "lt", "le", "in"])


def _make(column: str, op: str, value: int, values: tuple[int, ...]) -> Filter:
    if op == "in":
        return In((column,), values)
    kinds: dict[str, Any] = {
        "eq": EqualTo,
        "gt": GreaterThan,
        "ge": GreaterThanOrEqual,
        "lt": LessThan,
        "le": LessThanOrEqual,
    }
    return kinds[op]((column,), value)


def _holds(f: Filter, x: int) -> bool:
    v: Any = f.value  # type: ignore[attr-defined]
    return {
        EqualTo: lambda: x == v,
        GreaterThan: lambda: x > v,
        GreaterThanOrEqual: lambda: x >= v,
        LessThan: lambda: x < v,
        LessThanOrEqual: lambda: x <= v,
        In: lambda: x in v,
    }[type(f)]()


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["partition", "offset"]),
            Op,
            st.integers(-2, 12),
            st.tuples(st.integers(0, 10), st.integers(0, 10)),
        ),
        max_size=5,
    ),
    st.integers(0, 10),
    st.integers(0, 10),
)
def test_pushed_filters_plan_exactly_the_matching_records(
    specs: list[tuple[str, str, int, tuple[int, int]]], start: int, size: int
) -> None:
    filters = [_make(*spec) for spec in specs]
    pushed, rest = push_filters(Pushdown(), filters)
    for partition in range(6):
        want = [
            o
            for o in range(start, start + size)
            if all(
                _holds(f, partition if f.attribute == ("partition",) else o)  # type: ignore[attr-defined]
                for f in filters
                if f not in rest
            )
        ]
        first, last = pushed.clamp(start, start + size)
        got = list(range(first, last)) if pushed.keeps(TopicPartition("t", partition)) else []
        assert got == want
    # IN on offset is the only one left to Spark here.
    assert all(isinstance(f, In) and f.attribute == ("offset",) for f in rest)


def test_readers_stay_picklable_and_only_the_pushdown_one_overrides() -> None:
    options = parse_source_options(
        {"strom.bootstrap.servers": "localhost:1", "subscribe": "a"}, streaming=False
    )
    reader = StromPushdownReader(options)
    assert reader.pushFilters([EqualTo(("partition",), 1)]) == []
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.pushed == reader.pushed and copy.pushed.partition_lo == 1
    # Spark refuses a reader that overrides pushFilters unless pushdown is enabled.
    assert "pushFilters" not in StromBatchReader.__dict__
    assert "pushFilters" in StromPushdownReader.__dict__


def test_pushdown_worker_is_recognised_by_its_frame() -> None:
    assert not in_pushdown_worker()
    code = compile(
        "result = in_pushdown_worker()",
        "/x/pyspark/sql/worker/data_source_pushdown_filters.py",
        "exec",
    )
    scope: dict[str, Any] = {"in_pushdown_worker": in_pushdown_worker}
    exec(code, scope)  # a frame with the worker's file name
    assert scope["result"] is True
