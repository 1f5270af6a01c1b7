"""``GroupOptions``: the group settings the client-side coordinator works with.

Built from a checked ``ConsumerConfig`` (``group_options``): the assignors resolved into
instances, the rebalance protocol chosen, ``rebalance_timeout_ms`` defaulted.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.consumer.config import ConsumerConfig
from strom.group.assignors import PartitionAssignor, RebalanceProtocol

__all__ = ["GroupOptions", "group_options"]


@dataclass(frozen=True)
class GroupOptions:
    """What the client-side coordinator needs (times in ms, as the options)."""

    group_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    rebalance_timeout_ms: int
    assignors: tuple[PartitionAssignor, ...]
    protocol: RebalanceProtocol
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    retry_backoff_ms: int
    request_timeout_ms: int
    #: How long committed() and commit() retry (Kafka's default.api.timeout.ms).
    default_api_timeout_ms: int = 60000
    client_id: str = "strom-python"
    #: OffsetFetch waits out offsets pending in a transaction (read_committed, KIP-447).
    require_stable: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


def group_options(config: ConsumerConfig) -> GroupOptions | None:
    """The group settings of ``config``; None without a ``group_id``."""
    if config.group_id is None:
        return None
    assignors, protocol = config.assignors()
    return GroupOptions(
        group_id=config.group_id,
        group_instance_id=config.group_instance_id,
        session_timeout_ms=config.session_timeout_ms,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
        max_poll_interval_ms=config.max_poll_interval_ms,
        rebalance_timeout_ms=config.rebalance_timeout,
        assignors=assignors,
        protocol=protocol,
        enable_auto_commit=config.enable_auto_commit,
        auto_commit_interval_ms=config.auto_commit_interval_ms,
        retry_backoff_ms=config.retry_backoff_ms,
        request_timeout_ms=config.request_timeout_ms,
        default_api_timeout_ms=config.default_api_timeout_ms,
        client_id=config.client_id,
        require_stable=config.isolation_level == "read_committed",
    )
