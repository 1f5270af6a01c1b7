"""The lag history the console samples: ``(time, total lag)`` per group for a window, bounded
in memory whatever runs (old samples are dropped, forgotten groups expire). Lag itself is
``strom.group.offsets_plan``'s, as ``strom groups describe`` shows it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

__all__ = ["LagHistory"]


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
