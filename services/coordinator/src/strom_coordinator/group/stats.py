"""Hooks the group manager calls for metrics (the process implements them with OpenTelemetry)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["GroupStatsListener", "NullStats"]


class GroupStatsListener(Protocol):
    def on_rebalance(self, group_id: str, duration_s: float) -> None:
        """A rebalance completed (join phase begun to new generation) after ``duration_s``."""
        ...

    def on_commit(self, group_id: str, partitions: int) -> None:
        """An offset commit of ``partitions`` partitions was acknowledged by the log."""
        ...


class NullStats:
    """The listener used when none is given: records nothing."""

    def on_rebalance(self, group_id: str, duration_s: float) -> None:
        pass

    def on_commit(self, group_id: str, partitions: int) -> None:
        pass
