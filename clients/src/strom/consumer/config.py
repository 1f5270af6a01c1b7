"""The consumer's options, each declared once: name, type, default, check and meaning.

``ConsumerConfig`` is a frozen dataclass with one field per option of ``strom.Consumer`` and
``strom.aio.Consumer`` (Kafka's consumer configs in snake_case; the field's docstring is the
option's meaning). Both constructors take the topics to subscribe to and ``**options``, typed
by ``ConsumerOptions`` (the fields as a ``TypedDict``), and build one ``ConsumerConfig`` from
them. Tests keep ``ConsumerOptions``, the constructors and the option table of docs/clients.md
equal to the fields.

Every bad value raises ``ConfigurationError`` naming the option, before anything connects; the
group options are checked even without a ``group_id``, as Kafka checks its whole config.
``bootstrap_servers`` is normalised to a list.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from strom.cluster.client_config import ClientConfig, ClientOptions
from strom.errors import ConfigurationError
from strom.group.assignors import PartitionAssignor, RebalanceProtocol, assignor_for

__all__ = [
    "DEFAULT_ASSIGNORS",
    "AssignorSpec",
    "ConsumerConfig",
    "ConsumerOptions",
    "Deserializer",
    "check_auto_offset_reset",
]

MiB = 1024 * 1024
#: Kafka's default ``partition.assignment.strategy`` (range first: the protocol stays EAGER).
DEFAULT_ASSIGNORS: tuple[str, ...] = ("range", "cooperative-sticky")
#: An assignor name ("range", "roundrobin", "sticky", "cooperative-sticky") or instance.
AssignorSpec = str | PartitionAssignor
#: ``key_deserializer`` / ``value_deserializer``: the bytes of a non-null key or value to
#: what the consumer returns.
Deserializer = Callable[[bytes], Any]
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
RESET_STRATEGIES = ("earliest", "latest", "none")
_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsumerConfig(ClientConfig):
    """Every consumer option (see the module docstring); checked when created."""

    group_id: str | None = None
    """The consumer group: ``subscribe()`` joins it, commits go to it."""
    auto_offset_reset: str = "latest"
    """Where a partition without a valid position starts: ``"earliest"``, ``"latest"`` or
    ``"none"`` (raise ``OffsetOutOfRangeError``)."""
    enable_auto_commit: bool = True
    """With a ``group_id``: commit the positions every ``auto_commit_interval_ms``, before
    partitions are revoked, and on close."""
    auto_commit_interval_ms: int = 5000
    """The auto-commit period."""
    max_poll_records: int = 500
    """Most records one ``poll`` returns."""
    fetch_min_bytes: int = 1
    """A fetch waits on the storage node until this much data is there..."""
    fetch_max_wait_ms: int = 500
    """...or this long."""
    fetch_max_bytes: int = 50 * MiB
    """Most bytes per fetch response, and the bound of prefetched data held in memory."""
    max_partition_fetch_bytes: int = 1 * MiB
    """Most bytes per partition per fetch (a larger first batch still comes whole)."""
    isolation_level: str = "read_uncommitted"
    """``"read_committed"`` reads up to the last stable offset."""
    key_deserializer: Deserializer | None = None
    """Called on non-null keys."""
    value_deserializer: Deserializer | None = None
    """Called on non-null values."""
    default_api_timeout_ms: int = 60000
    """How long a blocking group call (``committed()``, ``commit()``) retries retriable errors
    (the coordinator moving or loading, an offset pending in a transaction) before raising
    ``StromTimeoutError``; each request still gets at most ``request_timeout_ms``."""
    retry_backoff_ms: int = 100
    """Wait before re-fetching a partition after a retriable error."""
    metadata_max_age_ms: int = 300000
    """Metadata refresh interval (and of pattern subscriptions)."""
    consumer_timeout_ms: int | None = None
    """Iteration ends after this long without a record; None: never."""
    session_timeout_ms: int = 45000
    """A member without a heartbeat for this long is removed from the group."""
    heartbeat_interval_ms: int = 3000
    """Heartbeat period; lower than ``session_timeout_ms``."""
    max_poll_interval_ms: int = 300000
    """Longest time between two ``poll`` calls before the consumer leaves the group."""
    rebalance_timeout_ms: int | None = None
    """How long the coordinator waits for every member to rejoin; None: ``max_poll_interval_ms``."""
    group_instance_id: str | None = None
    """Static membership: a member back with the same id within ``session_timeout_ms`` gets
    its partitions again without a rebalance."""
    partition_assignment_strategy: Sequence[AssignorSpec] | AssignorSpec = DEFAULT_ASSIGNORS
    """Assignors (names or ``PartitionAssignor`` instances), in order of preference."""
    gateway_only: bool = False
    """Fetch (and reach the group coordinator) through the gateway, for networks where only it
    is reachable."""

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ConfigurationError(
                f"isolation_level must be read_uncommitted or read_committed, "
                f"got {self.isolation_level!r}"
            )
        for name, fn in (
            ("key_deserializer", self.key_deserializer),
            ("value_deserializer", self.value_deserializer),
        ):
            if fn is not None and not callable(fn):
                raise ConfigurationError(f"{name} must be callable, got {fn!r}")
        _at_least("max_poll_records", self.max_poll_records)
        _at_least("fetch_min_bytes", self.fetch_min_bytes, 0)
        _at_least("fetch_max_wait_ms", self.fetch_max_wait_ms, 0)
        _at_least("fetch_max_bytes", self.fetch_max_bytes)
        _at_least("max_partition_fetch_bytes", self.max_partition_fetch_bytes)
        _at_least("retry_backoff_ms", self.retry_backoff_ms, 0)
        _at_least("default_api_timeout_ms", self.default_api_timeout_ms)
        self._check_group_options()
        if self.consumer_timeout_ms is not None:
            _at_least("consumer_timeout_ms", self.consumer_timeout_ms, 0)
        if not isinstance(self.gateway_only, bool):
            raise ConfigurationError(f"gateway_only must be a bool, got {self.gateway_only!r}")
        if not isinstance(self.metadata_max_age_ms, int) or self.metadata_max_age_ms < 0:
            raise ConfigurationError(
                f"metadata_max_age_ms must be >= 0, got {self.metadata_max_age_ms!r}"
            )
        check_auto_offset_reset(self.auto_offset_reset)

    def _check_group_options(self) -> None:
        group_id, instance = self.group_id, self.group_instance_id
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise ConfigurationError(
                f"group_id must be a non-empty string or None, got {group_id!r}"
            )
        if instance is not None:
            if not isinstance(instance, str) or not _INSTANCE_ID.fullmatch(instance):
                raise ConfigurationError(
                    "group_instance_id must be None or 1-249 characters of [a-zA-Z0-9._-], "
                    f"got {instance!r}"
                )
            if group_id is None:
                raise ConfigurationError("group_instance_id needs a group_id (static membership)")
        session = _at_least("session_timeout_ms", self.session_timeout_ms)
        heartbeat = _at_least("heartbeat_interval_ms", self.heartbeat_interval_ms)
        if heartbeat >= session:
            raise ConfigurationError(
                f"heartbeat_interval_ms ({heartbeat}) must be lower than session_timeout_ms "
                f"({session})"
            )
        _at_least("max_poll_interval_ms", self.max_poll_interval_ms)
        rebalance = _at_least("rebalance_timeout_ms", self.rebalance_timeout)
        for name, value in (("session_timeout_ms", session), ("rebalance_timeout_ms", rebalance)):
            if value > _MAX_INT32:
                raise ConfigurationError(f"{name} must fit in 32 bits, got {value}")
        if not isinstance(self.enable_auto_commit, bool):
            raise ConfigurationError(
                f"enable_auto_commit must be a bool, got {self.enable_auto_commit!r}"
            )
        _at_least("auto_commit_interval_ms", self.auto_commit_interval_ms)
        self.assignors()

    @property
    def rebalance_timeout(self) -> int:
        """``rebalance_timeout_ms``, or ``max_poll_interval_ms`` when unset (ms)."""
        if self.rebalance_timeout_ms is None:
            return self.max_poll_interval_ms
        return self.rebalance_timeout_ms

    def assignors(self) -> tuple[tuple[PartitionAssignor, ...], RebalanceProtocol]:
        """New instances of the assignors of ``partition_assignment_strategy`` and the
        rebalance protocol they share: COOPERATIVE when every one supports it, else EAGER, as
        Kafka picks it (ConfigurationError when empty, duplicated or without one in common)."""
        strategy = self.partition_assignment_strategy
        if isinstance(strategy, str | PartitionAssignor):
            strategy = (strategy,)
        if not isinstance(strategy, Sequence) or not strategy:
            raise ConfigurationError(
                "partition_assignment_strategy must be a non-empty sequence of assignor names "
                f"or PartitionAssignor instances, got {strategy!r}"
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


class ConsumerOptions(ClientOptions, total=False):
    """The keyword options of ``strom.Consumer`` and ``strom.aio.Consumer``: the fields of
    ``ConsumerConfig``, with their types. Defaults, checks and meanings: ``ConsumerConfig``."""

    group_id: str | None
    auto_offset_reset: str
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    max_poll_records: int
    fetch_min_bytes: int
    fetch_max_wait_ms: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    isolation_level: str
    key_deserializer: Deserializer | None
    value_deserializer: Deserializer | None
    default_api_timeout_ms: int
    retry_backoff_ms: int
    metadata_max_age_ms: int
    consumer_timeout_ms: int | None
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    rebalance_timeout_ms: int | None
    group_instance_id: str | None
    partition_assignment_strategy: Sequence[AssignorSpec] | AssignorSpec
    gateway_only: bool


def check_auto_offset_reset(strategy: object) -> None:
    """ConfigurationError unless ``strategy`` is one of ``RESET_STRATEGIES``."""
    if strategy not in RESET_STRATEGIES:
        raise ConfigurationError(
            f"auto_offset_reset must be one of {', '.join(RESET_STRATEGIES)}, got {strategy!r}"
        )


def _at_least(name: str, value: object, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value
