"""Per-topic totals and rates from two samples: records and bytes in (end offsets and
partition sizes growing), records and bytes out (consumer groups' committed offsets
advancing; bytes estimated from the topic's average record size)."""

from __future__ import annotations

from collections.abc import Mapping

from strom.types import TopicPartition

__all__ = ["by_topic", "bytes_out", "per_second", "records_out"]


def by_topic(values: Mapping[TopicPartition, int]) -> dict[str, int]:
    """Sums per topic."""
    totals: dict[str, int] = {}
    for tp, value in values.items():
        totals[tp.topic] = totals.get(tp.topic, 0) + value
    return totals


def per_second(
    before: Mapping[str, int], after: Mapping[str, int], seconds: float
) -> dict[str, float]:
    """How fast each key present in both grew (a shrink, e.g. retention deleting a segment,
    counts as 0)."""
    if seconds <= 0:
        return {}
    return {k: max(v - before[k], 0) / seconds for k, v in after.items() if k in before}


def records_out(
    before: Mapping[str, Mapping[TopicPartition, int]],
    after: Mapping[str, Mapping[TopicPartition, int]],
    seconds: float | Mapping[str, float],
) -> dict[str, float]:
    """Records per second the groups in both consumed (committed) per topic; ``seconds``
    between the two, or per group (groups sampled in turn were asked at different times)."""
    per_topic: dict[str, float] = {}
    for group, offsets in after.items():
        earlier = before.get(group)
        elapsed = seconds if isinstance(seconds, int | float) else seconds.get(group, 0.0)
        if earlier is None or elapsed <= 0:
            continue
        for tp, offset in offsets.items():
            if tp in earlier:
                moved = max(offset - earlier[tp], 0) / elapsed
                per_topic[tp.topic] = per_topic.get(tp.topic, 0.0) + moved
    return per_topic


def bytes_out(
    records: Mapping[str, float], sizes: Mapping[str, int], messages: Mapping[str, int]
) -> dict[str, float]:
    """``records`` per second in bytes, at each topic's average record size on disk."""
    return {
        topic: rate * sizes[topic] / messages[topic]
        for topic, rate in records.items()
        if messages.get(topic) and topic in sizes
    }
