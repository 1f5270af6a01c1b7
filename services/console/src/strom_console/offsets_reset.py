"""Offset reset plans: where a group's committed offsets would go, computed before applying.

A plan is the same for the dry run and the apply (the apply recomputes it from fresh offsets
and commits exactly the rows it shows). Targets are clamped into ``[log start, log end]``,
as Kafka's ``kafka-consumer-groups --reset-offsets`` does, and the row says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strom.types import TopicPartition

__all__ = [
    "RESETTABLE_STATES",
    "STRATEGIES",
    "ResetError",
    "ResetRow",
    "check_resettable",
    "parse_strategy",
    "plan_reset",
]

STRATEGIES = ("earliest", "latest", "timestamp", "offset", "shift")
#: A group's offsets may be changed only while no member could overwrite them.
RESETTABLE_STATES = ("Empty", "Dead")


class ResetError(ValueError):
    """A reset that cannot be planned or applied; the message says why."""


@dataclass(frozen=True, slots=True)
class ResetRow:
    topic: str
    partition: int
    current: int | None
    target: int
    log_start: int
    log_end: int
    clamped: bool

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def lag_after(self) -> int:
        return max(self.log_end - self.target, 0)


@dataclass(frozen=True, slots=True)
class Strategy:
    kind: str
    value: int = 0  # the offset, the timestamp (ms) or the shift


def parse_strategy(kind: str, value: str = "") -> Strategy:
    """``kind`` from ``STRATEGIES`` with its number (offset, timestamp in ms, shift)."""
    if kind not in STRATEGIES:
        raise ResetError(f"unknown reset strategy {kind!r}; one of {', '.join(STRATEGIES)}")
    if kind in ("earliest", "latest"):
        return Strategy(kind)
    try:
        number = int(value.strip())
    except ValueError:
        what = {"timestamp": "a timestamp in ms", "offset": "an offset", "shift": "a shift"}[kind]
        raise ResetError(f"{kind}: expected {what} (an integer), got {value!r}") from None
    if kind in ("timestamp", "offset") and number < 0:
        raise ResetError(f"{kind} must be >= 0, got {number}")
    return Strategy(kind, number)


def check_resettable(group_id: str, state: str) -> None:
    """Refuse a group with members: they would commit over the new offsets."""
    if state not in RESETTABLE_STATES:
        raise ResetError(
            f"group {group_id} is {state}: offsets can be reset only while it is Empty "
            "(stop its consumers first)"
        )


def plan_reset(
    strategy: Strategy,
    partitions: Sequence[TopicPartition],
    *,
    committed: Mapping[TopicPartition, int],
    log_starts: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
    by_timestamp: Mapping[TopicPartition, int] | None = None,
) -> list[ResetRow]:
    """The new offset of each of ``partitions``. ``by_timestamp``: for a timestamp reset, the
    first offset at or after it per partition (-1: none, so the log end)."""
    rows = []
    for tp in sorted(partitions):
        if tp not in log_starts or tp not in log_ends:
            raise ResetError(f"{tp.topic}-{tp.partition}: its log start and end are unknown")
        start, end = log_starts[tp], log_ends[tp]
        current = committed.get(tp)
        if strategy.kind == "earliest":
            wanted = start
        elif strategy.kind == "latest":
            wanted = end
        elif strategy.kind == "offset":
            wanted = strategy.value
        elif strategy.kind == "timestamp":
            found = (by_timestamp or {}).get(tp, -1)
            wanted = end if found < 0 else found
        else:
            base = current if current is not None else start
            wanted = base + strategy.value
        target = min(max(wanted, start), end)
        rows.append(ResetRow(tp.topic, tp.partition, current, target, start, end, target != wanted))
    return rows
