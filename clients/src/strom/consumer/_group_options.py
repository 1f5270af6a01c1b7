"""The consumer's group-membership options, validated once (Kafka's names and defaults).

``group_options`` checks every option and names the offending one in a ``ConfigurationError``;
it also resolves ``partition_assignment_strategy`` into assignor instances and picks the
rebalance protocol the way Kafka does: COOPERATIVE only when every configured assignor
supports it, else EAGER.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from strom.errors import ConfigurationError
from strom.group.assignors import PartitionAssignor, RebalanceProtocol, assignor_for

__all__ = ["DEFAULT_ASSIGNORS", "GroupOptions", "group_options"]

#: Kafka's default ``partition.assignment.strategy`` (range first: the protocol stays EAGER).
DEFAULT_ASSIGNORS: tuple[str, ...] = ("range", "cooperative-sticky")
_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True)
class GroupOptions:
    """What the client-side coordinator needs (times in seconds, from the ``*_ms`` options)."""

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
    client_id: str = "strom-python"

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


def _int(name: str, value: object, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def resolve_assignors(
    strategy: object,
) -> tuple[tuple[PartitionAssignor, ...], RebalanceProtocol]:
    """The assignor instances of ``partition_assignment_strategy`` and the rebalance protocol
    they share (ConfigurationError when empty, duplicated or without a common protocol)."""
    if isinstance(strategy, str | PartitionAssignor):
        strategy = (strategy,)
    if not isinstance(strategy, Sequence) or not strategy:
        raise ConfigurationError(
            "partition_assignment_strategy must be a non-empty sequence of assignor names or "
            f"PartitionAssignor instances, got {strategy!r}"
        )
    assignors = tuple(assignor_for(item) for item in strategy)
    names = [a.name for a in assignors]
    if len(set(names)) != len(names):
        raise ConfigurationError(
            f"partition_assignment_strategy names an assignor twice: {', '.join(names)}"
        )
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        raise ConfigurationError(
            "partition_assignment_strategy: the assignors "
            f"{', '.join(names)} support no common rebalance protocol"
        )
    protocol = (
        RebalanceProtocol.COOPERATIVE
        if RebalanceProtocol.COOPERATIVE in common
        else RebalanceProtocol.EAGER
    )
    return assignors, protocol


def group_options(
    *,
    group_id: str | None,
    group_instance_id: str | None,
    session_timeout_ms: int,
    heartbeat_interval_ms: int,
    max_poll_interval_ms: int,
    rebalance_timeout_ms: int | None,
    partition_assignment_strategy: object,
    enable_auto_commit: bool,
    auto_commit_interval_ms: int,
    retry_backoff_ms: int,
    request_timeout_ms: int,
    client_id: str,
) -> GroupOptions | None:
    """Validated options (None without a ``group_id``; the group options are checked anyway,
    as Kafka checks its whole config)."""
    if group_id is not None and (not isinstance(group_id, str) or not group_id):
        raise ConfigurationError(f"group_id must be a non-empty string or None, got {group_id!r}")
    if group_instance_id is not None:
        if not isinstance(group_instance_id, str) or not _INSTANCE_ID.fullmatch(group_instance_id):
            raise ConfigurationError(
                "group_instance_id must be None or 1-249 characters of [a-zA-Z0-9._-], "
                f"got {group_instance_id!r}"
            )
        if group_id is None:
            raise ConfigurationError("group_instance_id needs a group_id (static membership)")
    session = _int("session_timeout_ms", session_timeout_ms)
    heartbeat = _int("heartbeat_interval_ms", heartbeat_interval_ms)
    if heartbeat >= session:
        raise ConfigurationError(
            f"heartbeat_interval_ms ({heartbeat}) must be lower than session_timeout_ms ({session})"
        )
    max_poll = _int("max_poll_interval_ms", max_poll_interval_ms)
    rebalance = max_poll if rebalance_timeout_ms is None else rebalance_timeout_ms
    _int("rebalance_timeout_ms", rebalance)
    for name, value in (("session_timeout_ms", session), ("rebalance_timeout_ms", rebalance)):
        if value > 2**31 - 1:
            raise ConfigurationError(f"{name} must fit in 32 bits, got {value}")
    if not isinstance(enable_auto_commit, bool):
        raise ConfigurationError(f"enable_auto_commit must be a bool, got {enable_auto_commit!r}")
    _int("auto_commit_interval_ms", auto_commit_interval_ms)
    assignors, protocol = resolve_assignors(partition_assignment_strategy)
    if group_id is None:
        return None
    return GroupOptions(
        group_id=group_id,
        group_instance_id=group_instance_id,
        session_timeout_ms=session,
        heartbeat_interval_ms=heartbeat,
        max_poll_interval_ms=max_poll,
        rebalance_timeout_ms=rebalance,
        assignors=assignors,
        protocol=protocol,
        enable_auto_commit=enable_auto_commit,
        auto_commit_interval_ms=auto_commit_interval_ms,
        retry_backoff_ms=retry_backoff_ms,
        request_timeout_ms=request_timeout_ms,
        client_id=client_id,
    )
