"""A consumer group's offset plans, as Kafka's ``kafka-consumer-groups`` computes them: where a
reset would move each partition's committed offset, and each partition's lag and lead.

Pure functions over offsets the caller has read (committed offsets, log start and end, the
offsets of a timestamp), so that ``strom groups`` and the console answer alike:

* a reset target is clamped into ``[log start, log end]`` (the row says so);
* ``shift`` moves the committed offset and is refused for a partition with none (Kafka:
  "Cannot shift offset ... since there is no current committed offset");
* ``timestamp`` takes the first offset at or after the time, the log end when there is none;
* lag is ``log end - committed`` and lead ``committed - log start``, unknown (None) when
  either side is, and not clamped: a committed offset past the log end (the log was
  truncated) shows a negative lag, as Kafka's tool shows it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from strom.errors import ConfigurationError, NonEmptyGroupError
from strom.types import TopicPartition

__all__ = [
    "RESETTABLE_STATES",
    "RESET_KINDS",
    "LagRow",
    "OffsetPlanError",
    "ResetRow",
    "ResetSpec",
    "check_resettable",
    "lag_rows",
    "plan_reset",
    "total_lag",
]

RESET_KINDS = ("earliest", "latest", "timestamp", "offset", "shift")
#: A group's offsets may be changed only while no member could overwrite them.
RESETTABLE_STATES = ("Empty", "Dead")


class OffsetPlanError(ConfigurationError):
    """A reset that cannot be planned; the message says why."""


@dataclass(frozen=True, slots=True)
class ResetSpec:
    """One of ``RESET_KINDS`` with its number (an offset, a timestamp in ms, a shift)."""

    kind: str
    value: int = 0

    @classmethod
    def parse(cls, kind: str, value: str = "") -> ResetSpec:
        """From text, as a form or a command line gives it."""
        if kind not in RESET_KINDS:
            raise OffsetPlanError(
                f"unknown reset strategy {kind!r}; one of {', '.join(RESET_KINDS)}"
            )
        if kind in ("earliest", "latest"):
            return cls(kind)
        try:
            number = int(value.strip())
        except ValueError:
            what = {"timestamp": "a timestamp in ms", "offset": "an offset", "shift": "a shift"}
            raise OffsetPlanError(
                f"{kind}: expected {what[kind]} (an integer), got {value!r}"
            ) from None
        if kind in ("timestamp", "offset") and number < 0:
            raise OffsetPlanError(f"{kind} must be >= 0, got {number}")
        return cls(kind, number)


@dataclass(frozen=True, slots=True)
class ResetRow:
    """Where one partition's committed offset would go."""

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
        return self.log_end - self.target


def check_resettable(group_id: str, state: str, members: int = 0) -> None:
    """``NonEmptyGroupError`` for a group with members: they would commit over the new
    offsets."""
    if members or state not in RESETTABLE_STATES:
        raise NonEmptyGroupError(
            f"group {group_id} has {members} active member(s) (state {state}): offsets can only "
            "be reset while the group is inactive; stop its consumers first"
        )


def plan_reset(
    spec: ResetSpec,
    partitions: Iterable[TopicPartition],
    *,
    group_id: str,
    committed: Mapping[TopicPartition, int],
    log_starts: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
    by_timestamp: Mapping[TopicPartition, int] | None = None,
) -> list[ResetRow]:
    """The new offset of each of ``partitions``, sorted. ``by_timestamp``: for a timestamp
    reset, the first offset at or after it per partition (-1: none, so the log end)."""
    rows = []
    for tp in sorted(partitions):
        if tp not in log_starts or tp not in log_ends:
            raise OffsetPlanError(f"{tp.topic}-{tp.partition}: its log start and end are unknown")
        start, end = log_starts[tp], log_ends[tp]
        current = committed.get(tp)
        if spec.kind == "earliest":
            wanted = start
        elif spec.kind == "latest":
            wanted = end
        elif spec.kind == "offset":
            wanted = spec.value
        elif spec.kind == "timestamp":
            found = (by_timestamp or {}).get(tp, -1)
            wanted = end if found < 0 else found
        elif current is None:
            raise OffsetPlanError(
                f"cannot shift: group {group_id} has no committed offset for "
                f"{tp.topic}:{tp.partition} (reset it to an offset, a time, earliest or latest)"
            )
        else:
            wanted = current + spec.value
        target = min(max(wanted, start), end)
        rows.append(ResetRow(tp.topic, tp.partition, current, target, start, end, target != wanted))
    return rows


@dataclass(frozen=True, slots=True)
class LagRow:
    """One partition a group committed or is assigned; None where unknown (nothing committed,
    the log's offsets could not be read)."""

    topic: str
    partition: int
    committed: int | None
    log_start: int | None
    log_end: int | None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def lag(self) -> int | None:
        if self.log_end is None or self.committed is None:
            return None
        return self.log_end - self.committed

    @property
    def lead(self) -> int | None:
        if self.log_start is None or self.committed is None:
            return None
        return self.committed - self.log_start


def lag_rows(
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
    assigned: Iterable[TopicPartition] = (),
    log_starts: Mapping[TopicPartition, int] | None = None,
) -> list[LagRow]:
    """One row per partition committed or ``assigned``, sorted; the log offsets are those
    known (a partition missing from ``log_ends``/``log_starts`` has an unknown lag/lead)."""
    starts = log_starts or {}
    return [
        LagRow(tp.topic, tp.partition, committed.get(tp), starts.get(tp), log_ends.get(tp))
        for tp in sorted(set(committed) | set(assigned))
    ]


def total_lag(rows: Sequence[LagRow]) -> int:
    """The sum of the known lags."""
    return sum(lag for row in rows if (lag := row.lag) is not None)
