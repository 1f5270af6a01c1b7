"""Topic rows for the topics list and the overview: partition health, search and paging."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from strom.types import PartitionDescription, TopicDescription

__all__ = [
    "Page",
    "PartitionHealth",
    "TopicRow",
    "health",
    "paginate",
    "search_topics",
    "topic_rows",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PartitionHealth:
    """What is wrong with one partition (all False: healthy)."""

    under_replicated: bool
    offline: bool
    under_min_isr: bool


def health(partition: PartitionDescription, min_isr: int = 1) -> PartitionHealth:
    offline = partition.leader < 0
    return PartitionHealth(
        under_replicated=len(partition.isr) < len(partition.replicas),
        offline=offline,
        under_min_isr=not offline and len(partition.isr) < min_isr,
    )


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication: int
    under_replicated: int
    offline: int
    under_min_isr: int
    messages: int | None  # sum of (end - start) when sampled
    rate_in: float | None  # records/s in, from the sampler
    size: int | None = None  # bytes: the partitions' leader replicas (log dirs)
    bytes_in: float | None = None  # bytes/s in (size growing)
    rate_out: float | None = None  # records/s the groups commit past
    bytes_out: float | None = None  # rate_out at the topic's average record size

    @property
    def healthy(self) -> bool:
        return not (self.under_replicated or self.offline or self.under_min_isr)


def topic_rows(
    topics: Sequence[TopicDescription],
    *,
    min_isr: Mapping[str, int] | None = None,
    messages: Mapping[str, int] | None = None,
    rates: Mapping[str, float] | None = None,
    sizes: Mapping[str, int] | None = None,
    bytes_in: Mapping[str, float] | None = None,
    rates_out: Mapping[str, float] | None = None,
    bytes_out: Mapping[str, float] | None = None,
) -> list[TopicRow]:
    """One row per topic; the sampled figures (None when not sampled) by topic name."""
    rows = []
    for topic in topics:
        wanted = (min_isr or {}).get(topic.name, 1)
        states = [health(p, wanted) for p in topic.partitions]
        rows.append(
            TopicRow(
                name=topic.name,
                internal=topic.is_internal,
                partitions=len(topic.partitions),
                replication=max((len(p.replicas) for p in topic.partitions), default=0),
                under_replicated=sum(s.under_replicated for s in states),
                offline=sum(s.offline for s in states),
                under_min_isr=sum(s.under_min_isr for s in states),
                messages=(messages or {}).get(topic.name),
                rate_in=(rates or {}).get(topic.name),
                size=(sizes or {}).get(topic.name),
                bytes_in=(bytes_in or {}).get(topic.name),
                rate_out=(rates_out or {}).get(topic.name),
                bytes_out=(bytes_out or {}).get(topic.name),
            )
        )
    return rows


def search_topics(
    rows: Sequence[TopicRow], query: str = "", *, internal: bool = False, problems: bool = False
) -> list[TopicRow]:
    """Rows whose name contains ``query`` (case-insensitive); internal topics only when asked;
    ``problems``: only topics with an under-replicated, offline or under-min-ISR partition."""
    needle = query.strip().lower()
    return [
        r
        for r in rows
        if (internal or not r.internal)
        and needle in r.name.lower()
        and (not problems or not r.healthy)
    ]


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    number: int  # 1-based
    pages: int
    total: int

    @property
    def has_prev(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.pages


def paginate(items: Sequence[T], number: int, per_page: int) -> Page[T]:
    """Page ``number`` (clamped into range) of ``per_page`` items."""
    pages = max((len(items) + per_page - 1) // per_page, 1)
    number = min(max(number, 1), pages)
    start = (number - 1) * per_page
    return Page(list(items[start : start + per_page]), number, pages, len(items))
