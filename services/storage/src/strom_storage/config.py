"""Settings of a storage node: identity, log directories, and broker-level log defaults.

Broker-level defaults use Kafka's broker names (``log.segment.bytes``, ``log.retention.ms``,
...) and become the ``LogConfig`` of every partition unless a topic overrides them. In a
cluster the node registers in etcd and hosts what the controller assigns it; a standalone node
(``--etcd-endpoints ''``) hosts the partitions listed in ``topics`` (``name:count``).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom_server.runtime.config import ServerConfig, override, setting
from strom_server.runtime.values import ByteSize, HostPort
from strom_storage.log.config import LONG_MAX, LogConfig

__all__ = ["DEFAULT_LISTEN", "StorageConfig", "parse_topic_spec"]

DEFAULT_LISTEN = "127.0.0.1:9093"
_INT_MAX = (1 << 31) - 1


def parse_topic_spec(spec: str) -> tuple[str, int]:
    """``"orders:3"`` -> ("orders", 3); a bare name means one partition."""
    name, _, count = spec.partition(":")
    if not name:
        raise ValueError(f"topic spec {spec!r} has no name")
    partitions = int(count) if count else 1
    if partitions < 1:
        raise ValueError(f"topic spec {spec!r}: the partition count must be at least 1")
    return name, partitions


def _check_topics(value: tuple[str, ...]) -> str | None:
    for spec in value:
        try:
            parse_topic_spec(spec)
        except ValueError as exc:
            return str(exc)
    return None


@dataclass(frozen=True, kw_only=True)
class StorageConfig(ServerConfig):
    """A storage node's settings (see docs/storage.md for each one)."""

    listen: HostPort = override(ServerConfig, "listen", DEFAULT_LISTEN)
    node_id: int = setting(0, help="this node's id, unique in the cluster", min=0, max=_INT_MAX)
    rack: str = setting("", help="rack (or zone) of this node, for rack-aware placement")
    log_dirs: tuple[str, ...] = setting(
        ("data/storage",), help="directories holding partition logs, comma-separated"
    )
    advertised_address: str = setting(
        "", help="host:port clients and peers use to reach this node (default: --listen)"
    )
    broker_session_timeout_ms: int = setting(
        9000,
        name="broker.session.timeout.ms",
        help="lease of this node's registration in etcd: how fast the controller sees it die",
        min=1000,
        max=600000,
    )
    topics: tuple[str, ...] = setting(
        (),
        help="standalone nodes only (--etcd-endpoints ''): partitions to host, name:count,...",
        check=_check_topics,
    )
    log_segment_bytes: ByteSize = setting(
        ByteSize(1 << 30), name="log.segment.bytes", help="segment.bytes default", min=14,
        max=_INT_MAX,
    )  # fmt: skip
    log_roll_ms: int = setting(
        604800000, name="log.roll.ms", help="segment.ms default", min=1, max=LONG_MAX
    )
    log_retention_ms: int = setting(
        604800000, name="log.retention.ms", help="retention.ms default (-1: forever)", min=-1,
        max=LONG_MAX,
    )  # fmt: skip
    log_retention_bytes: int = setting(
        -1, name="log.retention.bytes", help="retention.bytes default (-1: no limit)", min=-1,
        max=LONG_MAX,
    )  # fmt: skip
    log_cleanup_policy: tuple[str, ...] = setting(
        ("delete",), name="log.cleanup.policy", help="cleanup.policy default: delete, compact"
    )
    log_index_interval_bytes: int = setting(
        4096, name="log.index.interval.bytes", help="index.interval.bytes default", min=0,
        max=_INT_MAX,
    )  # fmt: skip
    log_flush_interval_messages: int = setting(
        LONG_MAX, name="log.flush.interval.messages", help="flush.messages default", min=1,
        max=LONG_MAX,
    )  # fmt: skip
    log_flush_interval_ms: int = setting(
        LONG_MAX, name="log.flush.interval.ms", help="flush.ms default", min=0, max=LONG_MAX
    )
    message_max_bytes: int = setting(
        1048588, name="message.max.bytes", help="max.message.bytes default", min=0,
        max=_INT_MAX,
    )  # fmt: skip
    log_message_timestamp_type: str = setting(
        "CreateTime", name="log.message.timestamp.type", help="message.timestamp.type default",
        choices=("CreateTime", "LogAppendTime"),
    )  # fmt: skip
    log_retention_check_interval_ms: int = setting(
        300000, name="log.retention.check.interval.ms",
        help="how often retention runs", min=1, max=LONG_MAX,
    )  # fmt: skip
    log_flush_offset_checkpoint_interval_ms: int = setting(
        60000,
        name="log.flush.offset.checkpoint.interval.ms",
        help="how often the recovery point, log start and high watermark checkpoints are "
        "written (each costs fsyncs that also push out the partitions' dirty data)",
        min=100,
        max=LONG_MAX,
    )
    log_cleaner_enable: bool = setting(True, name="log.cleaner.enable", help="run compaction")
    log_cleaner_dedupe_buffer_size: ByteSize = setting(
        ByteSize(128 << 20), name="log.cleaner.dedupe.buffer.size",
        help="memory of the compaction key map", min=1 << 10, max=_INT_MAX,
    )  # fmt: skip

    replica_lag_time_max_ms: int = setting(
        30000, name="replica.lag.time.max.ms",
        help="a follower that has not caught up with its leader for this long leaves the ISR",
        min=10, max=LONG_MAX,
    )  # fmt: skip
    replica_fetch_max_bytes: ByteSize = setting(
        ByteSize(1 << 20), name="replica.fetch.max.bytes",
        help="bytes a follower fetches per partition per request (whole batches)", min=1,
        max=_INT_MAX,
    )  # fmt: skip
    replica_fetch_response_max_bytes: ByteSize = setting(
        ByteSize(10 << 20), name="replica.fetch.response.max.bytes",
        help="bytes a follower fetches per request over all partitions", min=1, max=_INT_MAX,
    )  # fmt: skip
    replica_fetch_wait_max_ms: int = setting(
        500, name="replica.fetch.wait.max.ms",
        help="how long a follower's fetch waits at the leader for new data", min=0,
        max=_INT_MAX,
    )  # fmt: skip
    replica_fetch_min_bytes: int = setting(
        1, name="replica.fetch.min.bytes", help="bytes a follower's fetch waits for", min=1,
        max=_INT_MAX,
    )  # fmt: skip
    replica_fetch_backoff_ms: int = setting(
        1000, name="replica.fetch.backoff.ms",
        help="pause after a failed replica fetch before retrying", min=0, max=_INT_MAX,
    )  # fmt: skip

    def log_defaults(self) -> LogConfig:
        """The LogConfig every partition gets unless its topic overrides a setting."""
        return LogConfig(
            segment_bytes=int(self.log_segment_bytes),
            segment_ms=self.log_roll_ms,
            retention_ms=self.log_retention_ms,
            retention_bytes=self.log_retention_bytes,
            cleanup_policy=tuple(self.log_cleanup_policy),
            index_interval_bytes=self.log_index_interval_bytes,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=self.log_flush_interval_ms,
            max_message_bytes=self.message_max_bytes,
            message_timestamp_type=self.log_message_timestamp_type,
        )

    @property
    def standalone(self) -> bool:
        """No etcd: the node serves ``topics`` and what it finds on disk, alone."""
        return not self.etcd_endpoints

    def advertised(self) -> tuple[str, int]:
        host, _, port = (self.advertised_address or self.listen).rpartition(":")
        return host, int(port)

    def hosted_topics(self) -> list[tuple[str, int]]:
        return [parse_topic_spec(spec) for spec in self.topics]
