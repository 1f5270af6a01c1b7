"""Settings of a coordinator process: identity, the gateway it bootstraps through, its etcd
lease, the ``__consumer_offsets`` topic, and the group settings (``GroupConfig``).

Kafka names are used where Kafka has the setting (``offsets.topic.num.partitions``,
``offsets.topic.replication.factor``, ``offsets.topic.segment.bytes``,
``offsets.commit.timeout.ms``, ``offsets.retention.check.interval.ms``, ``group.*``,
``offsets.retention.minutes``, ``offset.metadata.max.bytes``, ``transaction.state.log.*``,
``transaction.max.timeout.ms``, ``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
``transactional.id.expiration.ms``, ``transaction.remove.expired.transaction.cleanup.interval.ms``);
``coordinator.session.timeout.ms`` is the TTL of the registration lease (docs/coordinator.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.records import OFFSETS_TOPIC
from strom_coordinator.txn.records import TRANSACTION_STATE_TOPIC
from strom_server.runtime.config import ServerConfig, override, setting
from strom_server.runtime.values import ByteSize, HostPort, MiB, check_optional_host_port

__all__ = ["DEFAULT_LISTEN", "OFFSETS_TOPIC", "TRANSACTION_STATE_TOPIC", "CoordinatorConfig"]

#: Clear of the local cluster's gateway (9092), storage nodes (9093-9095) and controllers
#: (9096-9097): the first coordinator of ``strom cluster up`` listens here.
DEFAULT_LISTEN = "127.0.0.1:9098"
_INT_MAX = (1 << 31) - 1
_DEFAULTS = GroupConfig()


def _check_servers(text: str) -> str | None:
    return None if any(s.strip() for s in text.split(",")) else "at least one host:port"


@dataclass(frozen=True, kw_only=True)
class CoordinatorConfig(ServerConfig):
    """A coordinator's settings (docs/coordinator.md explains each one)."""

    listen: HostPort = override(ServerConfig, "listen", DEFAULT_LISTEN)
    coordinator_id: int = setting(
        1, help="this coordinator's id, unique among the coordinators", min=0, max=_INT_MAX
    )
    advertised_listen: str = setting(
        "",
        help="host:port clients reach this coordinator at (default: listen's host and the bound "
        "port)",
        check=check_optional_host_port,
    )
    bootstrap_servers: str = setting(
        "127.0.0.1:9092",
        help="the gateway(s) this coordinator reaches the cluster through, comma-separated",
        check=_check_servers,
    )
    session_timeout_ms: int = setting(
        9000,
        name="coordinator.session.timeout.ms",
        help="TTL of the registration lease: a dead coordinator's partitions move within it",
        min=1000,
        max=600_000,
    )
    offsets_topic_num_partitions: int = setting(
        50, name="offsets.topic.num.partitions", help="partitions of __consumer_offsets (set "
        "once, at creation)", min=1, max=10_000,
    )  # fmt: skip
    offsets_topic_replication_factor: int = setting(
        3, name="offsets.topic.replication.factor", help="replication factor of "
        "__consumer_offsets, capped by the live storage nodes at creation", min=1, max=32767,
    )  # fmt: skip
    offsets_topic_segment_bytes: ByteSize = setting(
        ByteSize(100 * MiB), name="offsets.topic.segment.bytes",
        help="segment.bytes of __consumer_offsets (small segments compact sooner)", min=14,
        max=_INT_MAX,
    )  # fmt: skip
    offsets_commit_timeout_ms: int = setting(
        5000, name="offsets.commit.timeout.ms", help="how long a write to __consumer_offsets "
        "may take, retries included, before it fails", min=1, max=_INT_MAX,
    )  # fmt: skip
    offsets_retention_check_interval_ms: int = setting(
        600_000, name="offsets.retention.check.interval.ms", help="how often expired offsets "
        "and empty groups are removed", min=1, max=_INT_MAX,
    )  # fmt: skip
    group_min_session_timeout_ms: int = setting(
        _DEFAULTS.group_min_session_timeout_ms, name="group.min.session.timeout.ms",
        help="smallest session.timeout.ms a member may ask for", min=1, max=_INT_MAX,
    )  # fmt: skip
    group_max_session_timeout_ms: int = setting(
        _DEFAULTS.group_max_session_timeout_ms, name="group.max.session.timeout.ms",
        help="largest session.timeout.ms a member may ask for", min=1, max=_INT_MAX,
    )  # fmt: skip
    group_initial_rebalance_delay_ms: int = setting(
        _DEFAULTS.group_initial_rebalance_delay_ms, name="group.initial.rebalance.delay.ms",
        help="how long the first rebalance of an empty group waits for more members", min=0,
        max=_INT_MAX,
    )  # fmt: skip
    group_max_size: int = setting(
        _DEFAULTS.group_max_size, name="group.max.size", help="most members a group may have",
        min=1, max=_INT_MAX,
    )  # fmt: skip
    offsets_retention_minutes: int = setting(
        _DEFAULTS.offsets_retention_minutes, name="offsets.retention.minutes",
        help="how long committed offsets are kept (for an empty group: since it became empty)",
        min=1, max=_INT_MAX,
    )  # fmt: skip
    offset_metadata_max_bytes: int = setting(
        _DEFAULTS.offset_metadata_max_bytes, name="offset.metadata.max.bytes",
        help="largest metadata string of a committed offset", min=0, max=_INT_MAX,
    )  # fmt: skip

    transaction_state_log_num_partitions: int = setting(
        50, name="transaction.state.log.num.partitions", help="partitions of "
        "__transaction_state (set once, at creation)", min=1, max=10_000,
    )  # fmt: skip
    transaction_state_log_replication_factor: int = setting(
        3, name="transaction.state.log.replication.factor", help="replication factor of "
        "__transaction_state, capped by the live storage nodes at creation", min=1, max=32767,
    )  # fmt: skip
    transaction_state_log_segment_bytes: ByteSize = setting(
        ByteSize(100 * MiB), name="transaction.state.log.segment.bytes",
        help="segment.bytes of __transaction_state", min=14, max=_INT_MAX,
    )  # fmt: skip
    transaction_max_timeout_ms: int = setting(
        900_000, name="transaction.max.timeout.ms", help="largest transaction timeout a "
        "producer may ask for", min=1, max=_INT_MAX,
    )  # fmt: skip
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = setting(
        10_000, name="transaction.abort.timed.out.transaction.cleanup.interval.ms",
        help="how often transactions past their timeout are looked for and aborted", min=1,
        max=_INT_MAX,
    )  # fmt: skip
    transactional_id_expiration_ms: int = setting(
        604_800_000, name="transactional.id.expiration.ms", help="how long a transactional id "
        "without an open transaction is kept after its last update", min=1, max=_INT_MAX,
    )  # fmt: skip
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(
        3_600_000, name="transaction.remove.expired.transaction.cleanup.interval.ms",
        help="how often expired transactional ids are removed", min=1, max=_INT_MAX,
    )  # fmt: skip

    @property
    def lease_ttl_s(self) -> int:
        """The registration lease TTL in whole seconds (etcd leases have second granularity)."""
        return max(1, round(self.session_timeout_ms / 1000))

    def group_config(self) -> GroupConfig:
        return GroupConfig(
            group_min_session_timeout_ms=self.group_min_session_timeout_ms,
            group_max_session_timeout_ms=self.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            group_max_size=self.group_max_size,
            offsets_retention_minutes=self.offsets_retention_minutes,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes,
        )
