"""Filter pushdown for batch reads: the filters that narrow the planned offset ranges.

Pushed, and enforced by the source alone (Spark does not evaluate them again): ``partition``
(=, IN, <, <=, >, >=) and ``topic`` (=, IN) choose the partitions that are planned at all;
``offset`` (=, <, <=, >, >=) clamps every partition's ``[start, end)``. Every other filter
(timestamp, key, value, headers, NOT, string matches, other value types) goes back to Spark.

Spark calls ``pushFilters`` only with ``spark.sql.python.filterPushdown.enabled=true``, and
with it off refuses a reader that overrides ``pushFilters`` (``DATA_SOURCE_PUSHDOWN_DISABLED``),
so the data source hands out the pushing reader only inside Spark's pushdown worker
(``in_pushdown_worker``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from strom.types import TopicPartition

__all__ = ["Pushdown", "in_pushdown_worker", "push_filters"]

# PySpark's planning worker that creates the reader and calls pushFilters (PySpark >= 4.1).
_PUSHDOWN_WORKER = "data_source_pushdown_filters.py"


def in_pushdown_worker() -> bool:
    """Whether the caller runs inside Spark's filter-pushdown planning worker (only there is
    pushdown enabled; anywhere else, or on a PySpark without it, the answer is False)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_PUSHDOWN_WORKER):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _min(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)


def _max(a: int | None, b: int) -> int:
    return b if a is None else max(a, b)


@dataclass(frozen=True, slots=True)
class Pushdown:
    """What the pushed filters allow (all of them at once); the default allows everything.
    Bounds are ``lo`` inclusive and ``hi`` exclusive."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_lo: int | None = None
    partition_hi: int | None = None
    offset_lo: int | None = None
    offset_hi: int | None = None

    def keeps(self, tp: TopicPartition) -> bool:
        """Whether the query reads any record of ``tp``."""
        p = tp.partition
        return (
            (self.topics is None or tp.topic in self.topics)
            and (self.partitions is None or p in self.partitions)
            and (self.partition_lo is None or p >= self.partition_lo)
            and (self.partition_hi is None or p < self.partition_hi)
        )

    @property
    def clamps_offsets(self) -> bool:
        return self.offset_lo is not None or self.offset_hi is not None

    def clamp(self, start: int, end: int) -> tuple[int, int]:
        """``[start, end)`` cut to the offset bounds (``start == end`` when nothing is left)."""
        first = _max(self.offset_lo, start)
        return first, max(first, _min(self.offset_hi, end))

    def _push(self, f: Filter) -> Pushdown | None:
        """``self`` narrowed by ``f``, or None when ``f`` cannot be pushed exactly."""
        attribute: tuple[str, ...] = getattr(f, "attribute", ())  # Not, And, Or have none
        if len(attribute) != 1 or not hasattr(f, "value"):
            return None
        column, value = attribute[0].lower(), f.value
        if column == "topic":
            if isinstance(f, EqualTo) and isinstance(value, str):
                return self._topics({value})
            if isinstance(f, In) and all(isinstance(v, str) for v in value):
                return self._topics(set(value))
            return None
        if column not in {"partition", "offset"}:
            return None
        if isinstance(f, In):
            if column != "partition" or not all(type(v) is int for v in value):
                return None
            allowed = frozenset(value)
            if self.partitions is not None:
                allowed &= self.partitions
            return replace(self, partitions=allowed)
        if type(value) is not int:  # bool is an int too, and floats compare differently
            return None
        bounds = {
            EqualTo: (value, value + 1),
            GreaterThan: (value + 1, None),
            GreaterThanOrEqual: (value, None),
            LessThan: (None, value),
            LessThanOrEqual: (None, value + 1),
        }.get(type(f))
        if bounds is None:
            return None
        lo, hi = bounds
        if column == "partition":
            return replace(
                self,
                partition_lo=self.partition_lo if lo is None else _max(self.partition_lo, lo),
                partition_hi=self.partition_hi if hi is None else _min(self.partition_hi, hi),
            )
        return replace(
            self,
            offset_lo=self.offset_lo if lo is None else _max(self.offset_lo, lo),
            offset_hi=self.offset_hi if hi is None else _min(self.offset_hi, hi),
        )

    def _topics(self, names: set[str]) -> Pushdown:
        allowed = frozenset(names)
        return replace(self, topics=allowed if self.topics is None else allowed & self.topics)


def push_filters(pushed: Pushdown, filters: Iterable[Filter]) -> tuple[Pushdown, list[Filter]]:
    """``pushed`` narrowed by every filter that can be pushed, and the others (the very
    objects given, as Spark requires) for Spark to evaluate."""
    rest: list[Filter] = []
    for f in filters:
        narrowed = pushed._push(f)
        if narrowed is None:
            rest.append(f)
        else:
            pushed = narrowed
    return pushed, rest
