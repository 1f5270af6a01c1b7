"""Consumer lag: per-partition rows of a group, and the lag history the console samples.

``lag_rows`` joins a group's committed offsets, the partitions' end offsets and its members'
assignments; ``LagHistory`` keeps ``(time, total lag)`` samples per group for a window, bounded
in memory whatever runs (old samples are dropped, forgotten groups expire).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from strom.types import TopicPartition

__all__ = ["LagHistory", "LagRow", "lag_rows", "total_lag"]


@dataclass(frozen=True, slots=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None  # None: nothing committed
    end: int | None  # None: unknown (the leader did not answer)
    member: str  # the member's client id and host, "" when unassigned

    @property
    def lag(self) -> int | None:
        if self.end is None:
            return None
        if self.committed is None:
            return None
        return max(self.end - self.committed, 0)


def lag_rows(
    committed: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    assigned: Mapping[TopicPartition, str],
) -> list[LagRow]:
    """One row per partition the group committed or is assigned, sorted by topic, partition."""
    partitions = sorted(set(committed) | set(assigned))
    return [
        LagRow(tp.topic, tp.partition, committed.get(tp), ends.get(tp), assigned.get(tp, ""))
        for tp in partitions
    ]


def total_lag(committed: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]) -> int:
    """Sum of ``end - committed`` over the committed partitions whose end is known."""
    return sum(max(ends[tp] - offset, 0) for tp, offset in committed.items() if tp in ends)


class LagHistory:
    """``(t, lag)`` samples per group within ``window_s`` of the newest sample."""

    def __init__(self, window_s: float, max_samples: int = 2000) -> None:
        self.window_s = window_s
        self.max_samples = max_samples
        self._samples: dict[str, deque[tuple[float, int]]] = {}

    def record(self, t: float, lags: Mapping[str, int]) -> None:
        """Add one sample per group; groups not sampled for a whole window are forgotten."""
        for group, lag in lags.items():
            samples = self._samples.get(group)
            if samples is None:
                samples = self._samples[group] = deque(maxlen=self.max_samples)
            samples.append((t, lag))
        horizon = t - self.window_s
        for group in list(self._samples):
            samples = self._samples[group]
            while samples and samples[0][0] < horizon:
                samples.popleft()
            if not samples:
                del self._samples[group]

    def samples(self, group: str) -> list[tuple[float, int]]:
        return list(self._samples.get(group, ()))

    def groups(self) -> Iterable[str]:
        return self._samples.keys()

    def latest(self, group: str) -> int | None:
        samples = self._samples.get(group)
        return samples[-1][1] if samples else None
