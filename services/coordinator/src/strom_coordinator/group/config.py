"""The group coordinator's settings (Kafka's names and defaults)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupConfig"]


@dataclass(frozen=True)
class GroupConfig:
    """Limits and timeouts of consumer groups and committed offsets.

    The process (``strom_coordinator.config``) reads each from its Kafka-named setting:
    group.min.session.timeout.ms, group.max.session.timeout.ms,
    group.initial.rebalance.delay.ms, group.max.size, offsets.retention.minutes and
    offset.metadata.max.bytes.
    """

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10080
    offset_metadata_max_bytes: int = 4096

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
