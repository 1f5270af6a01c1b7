"""Offset ranges into Spark tasks, and a trigger's row budget across partitions (pure code).

``split_ranges`` is what ``minPartitions`` and ``maxRecordsPerPartition`` do: a range longer
than ``maxRecordsPerPartition`` is cut into equal pieces, then, while there are fewer pieces
than ``minPartitions``, each range gets pieces in proportion to its share of the records
(as Spark's Kafka source). ``cap_by_volume`` spreads ``maxOffsetsPerTrigger`` across
partitions in proportion to what each has waiting (largest remainder: the sum is exact).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise

from pyspark.sql.datasource import InputPartition

from strom.types import TopicPartition

__all__ = ["OffsetRange", "cap_by_volume", "split_ranges"]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark task: the records ``[start, end)`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start


def _cut(r: OffsetRange, pieces: int) -> list[OffsetRange]:
    pieces = max(1, min(pieces, r.size))
    bounds = [r.start + r.size * i // pieces for i in range(pieces + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in pairwise(bounds)]


def split_ranges(
    ranges: list[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Spark tasks for ``ranges`` (empty ranges dropped), ordered by topic, partition, start."""
    out = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        out = [p for r in out for p in _cut(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions and len(out) < min_partitions:
        total = sum(r.size for r in out)
        out = [
            p
            for r in out
            for p in _cut(r, max(1, round(r.size / total * min_partitions)) if total else 1)
        ]
    return sorted(out, key=lambda r: (r.topic, r.partition, r.start))


def cap_by_volume(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """New ends so that at most ``limit`` records lie between ``start`` and them in all,
    shared in proportion to each partition's waiting records."""
    waiting = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(waiting.values())
    if total <= limit:
        return dict(end)
    shares = {tp: n * limit / total for tp, n in waiting.items()}
    grant = {tp: math.floor(s) for tp, s in shares.items()}
    left = limit - sum(grant.values())
    for tp in sorted(shares, key=lambda t: (grant[t] - shares[t], t.topic, t.partition))[:left]:
        grant[tp] += 1
    return {tp: start.get(tp, end[tp]) + grant[tp] for tp in end}
