"""Topic configuration: Kafka's topic config names, types, ranges and defaults, in one place.

Storage nodes turn it into each partition log's settings (``strom_storage`` calls it
``LogConfig``), the controller validates create/alter requests with it, and clients may check
settings before sending them.

Usage::

    config = TopicConfig()                                   # Kafka's defaults
    config = TopicConfig.from_props({"segment.bytes": "1048576", "cleanup.policy": "compact"})
    config = TopicConfig(segment_bytes=1 << 20, retention_ms=60_000)
    bigger = config.merged({"retention.bytes": "10000000"})

Every topic config Kafka accepts is known here; those named in ``NO_EFFECT`` are validated,
stored and described but change nothing in Strom. Values are validated on construction; a bad
one raises ``ConfigurationError`` naming the option (the service maps it to INVALID_CONFIG).
``TopicConfig`` is a frozen dataclass: immutable, safe to share between threads; a config
change builds a new one and ``Log.update_config`` swaps it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from strom.errors import ConfigurationError

__all__ = ["LONG_MAX", "NO_EFFECT", "TopicConfig", "parse_config_pairs"]

#: Java's Long.MAX_VALUE: Kafka's "never" for flush.messages, flush.ms, and friends.
LONG_MAX = (1 << 63) - 1
_INT_MAX = (1 << 31) - 1

_POLICIES = ("delete", "compact")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
#: Kafka's topic ``compression.type`` values: the producer's codec kept, or one the broker
#: recompresses to ("uncompressed" is codec 0).
_COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
_MIN_ZSTD_LEVEL = -131072  # zstd's fastest negative level, Kafka's lower bound
#: ``message.format.version``: a Kafka version ("2.8", "3.0-IV1", "0.10.2").
_FORMAT_VERSION = re.compile(r"\d+\.\d+(\.\d+)?(-IV\d+)?")
#: ``*.replication.throttled.replicas``: empty, "*", or "partition:broker" pairs.
_THROTTLED = re.compile(r"\*|(\d+:\d+)(,\d+:\d+)*")

#: Kafka topic configs Strom accepts (validated, stored and described) but that change nothing:
#: replication throttling, tiered storage, preallocation, segment jitter and the v0/v1
#: message formats are not part of Strom.
NO_EFFECT = frozenset(
    {
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "message.downconversion.enable",
        "message.format.version",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "segment.jitter.ms",
    }
)


@dataclass(frozen=True, kw_only=True)
class TopicConfig:
    """The topic-level settings a partition log honours (Kafka name in each field's metadata).

    Thread-safety: immutable; share freely.
    """

    segment_bytes: int = field(default=1073741824, metadata={"name": "segment.bytes"})
    segment_ms: int = field(default=604800000, metadata={"name": "segment.ms"})
    segment_index_bytes: int = field(default=10485760, metadata={"name": "segment.index.bytes"})
    index_interval_bytes: int = field(default=4096, metadata={"name": "index.interval.bytes"})
    retention_ms: int = field(default=604800000, metadata={"name": "retention.ms"})
    retention_bytes: int = field(default=-1, metadata={"name": "retention.bytes"})
    cleanup_policy: tuple[str, ...] = field(
        default=("delete",), metadata={"name": "cleanup.policy"}
    )
    max_message_bytes: int = field(default=1048588, metadata={"name": "max.message.bytes"})
    message_timestamp_type: str = field(
        default="CreateTime", metadata={"name": "message.timestamp.type"}
    )
    message_timestamp_before_max_ms: int = field(
        default=LONG_MAX, metadata={"name": "message.timestamp.before.max.ms"}
    )
    message_timestamp_after_max_ms: int = field(
        default=LONG_MAX, metadata={"name": "message.timestamp.after.max.ms"}
    )
    flush_messages: int = field(default=LONG_MAX, metadata={"name": "flush.messages"})
    flush_ms: int = field(default=LONG_MAX, metadata={"name": "flush.ms"})
    min_cleanable_dirty_ratio: float = field(
        default=0.5, metadata={"name": "min.cleanable.dirty.ratio"}
    )
    delete_retention_ms: int = field(default=86400000, metadata={"name": "delete.retention.ms"})
    min_compaction_lag_ms: int = field(default=0, metadata={"name": "min.compaction.lag.ms"})
    max_compaction_lag_ms: int = field(default=LONG_MAX, metadata={"name": "max.compaction.lag.ms"})
    file_delete_delay_ms: int = field(default=60000, metadata={"name": "file.delete.delay.ms"})
    producer_id_expiration_ms: int = field(
        default=86400000, metadata={"name": "producer.id.expiration.ms"}
    )
    min_insync_replicas: int = field(default=1, metadata={"name": "min.insync.replicas"})
    unclean_leader_election_enable: bool = field(
        default=False, metadata={"name": "unclean.leader.election.enable"}
    )
    compression_type: str = field(default="producer", metadata={"name": "compression.type"})
    compression_gzip_level: int = field(default=-1, metadata={"name": "compression.gzip.level"})
    compression_lz4_level: int = field(default=9, metadata={"name": "compression.lz4.level"})
    compression_zstd_level: int = field(default=3, metadata={"name": "compression.zstd.level"})
    message_timestamp_difference_max_ms: int = field(
        default=LONG_MAX, metadata={"name": "message.timestamp.difference.max.ms"}
    )
    # Accepted for Kafka's clients and tools, without effect in Strom (NO_EFFECT).
    segment_jitter_ms: int = field(default=0, metadata={"name": "segment.jitter.ms"})
    preallocate: bool = field(default=False, metadata={"name": "preallocate"})
    message_downconversion_enable: bool = field(
        default=True, metadata={"name": "message.downconversion.enable"}
    )
    message_format_version: str = field(
        default="3.0-IV1", metadata={"name": "message.format.version"}
    )
    leader_replication_throttled_replicas: str = field(
        default="", metadata={"name": "leader.replication.throttled.replicas"}
    )
    follower_replication_throttled_replicas: str = field(
        default="", metadata={"name": "follower.replication.throttled.replicas"}
    )
    remote_storage_enable: bool = field(default=False, metadata={"name": "remote.storage.enable"})
    local_retention_ms: int = field(default=-2, metadata={"name": "local.retention.ms"})
    local_retention_bytes: int = field(default=-2, metadata={"name": "local.retention.bytes"})
    remote_log_copy_disable: bool = field(
        default=False, metadata={"name": "remote.log.copy.disable"}
    )
    remote_log_delete_on_disable: bool = field(
        default=False, metadata={"name": "remote.log.delete.on.disable"}
    )

    def __post_init__(self) -> None:
        self._check_range("segment_bytes", 14, _INT_MAX)
        self._check_range("segment_ms", 1, LONG_MAX)
        self._check_range("segment_index_bytes", 4, _INT_MAX)
        self._check_range("index_interval_bytes", 0, _INT_MAX)
        self._check_range("retention_ms", -1, LONG_MAX)
        self._check_range("retention_bytes", -1, LONG_MAX)
        self._check_range("max_message_bytes", 0, _INT_MAX)
        self._check_range("message_timestamp_before_max_ms", 0, LONG_MAX)
        self._check_range("message_timestamp_after_max_ms", 0, LONG_MAX)
        self._check_range("flush_messages", 1, LONG_MAX)
        self._check_range("flush_ms", 0, LONG_MAX)
        self._check_range("delete_retention_ms", 0, LONG_MAX)
        self._check_range("min_compaction_lag_ms", 0, LONG_MAX)
        self._check_range("max_compaction_lag_ms", 1, LONG_MAX)
        self._check_range("file_delete_delay_ms", 0, LONG_MAX)
        self._check_range("producer_id_expiration_ms", 1, LONG_MAX)
        self._check_range("min_insync_replicas", 1, _INT_MAX)
        self._check_range("compression_lz4_level", 1, 17)
        self._check_range("compression_zstd_level", _MIN_ZSTD_LEVEL, 22)
        if self.compression_gzip_level != -1:  # -1: zlib's default level
            self._check_range("compression_gzip_level", 1, 9)
        self._check_range("message_timestamp_difference_max_ms", 0, LONG_MAX)
        self._check_range("segment_jitter_ms", 0, LONG_MAX)
        self._check_range("local_retention_ms", -2, LONG_MAX)
        self._check_range("local_retention_bytes", -2, LONG_MAX)
        for f in dataclasses.fields(self):
            if _TYPES[f.name] == "bool" and not isinstance(getattr(self, f.name), bool):
                raise ConfigurationError(
                    f"{f.metadata['name']} must be true or false, got {getattr(self, f.name)!r}"
                )
        if self.remote_storage_enable:
            raise ConfigurationError(
                "remote.storage.enable=true: tiered storage is not part of Strom (as on a Kafka "
                "broker without remote.log.storage.system.enable)"
            )
        self._check_choice("compression_type", _COMPRESSION_TYPES)
        self._check_pattern("message_format_version", _FORMAT_VERSION, "a Kafka version")
        for attr in (
            "leader_replication_throttled_replicas",
            "follower_replication_throttled_replicas",
        ):
            if getattr(self, attr):
                self._check_pattern(attr, _THROTTLED, "'*' or a list of partition:broker")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ConfigurationError(
                f"min.cleanable.dirty.ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}"
            )
        policy = self.cleanup_policy
        if not policy or any(p not in _POLICIES for p in policy) or len(set(policy)) != len(policy):
            raise ConfigurationError(
                f"cleanup.policy must be a list of {', '.join(_POLICIES)}, got {','.join(policy)!r}"
            )
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise ConfigurationError(
                f"message.timestamp.type must be one of {', '.join(_TIMESTAMP_TYPES)}, "
                f"got {self.message_timestamp_type!r}"
            )

    def _check_choice(self, attr: str, choices: tuple[str, ...]) -> None:
        value = getattr(self, attr)
        if value not in choices:
            raise ConfigurationError(
                f"{_NAMES[attr]} must be one of {', '.join(choices)}, got {value!r}"
            )

    def _check_pattern(self, attr: str, pattern: re.Pattern[str], what: str) -> None:
        value = getattr(self, attr)
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise ConfigurationError(f"{_NAMES[attr]} must be {what}, got {value!r}")

    def _check_range(self, attr: str, low: int, high: int) -> None:
        value = getattr(self, attr)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            extra = " or -1" if attr == "compression_gzip_level" else ""
            raise ConfigurationError(
                f"{_NAMES[attr]} must be an integer in [{low}, {high}]{extra}, got {value!r}"
            )

    # -- derived -----------------------------------------------------------------------------

    @property
    def compact(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy has ``compact``)."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether retention deletes old segments (cleanup.policy has ``delete``)."""
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """Whether the leader stamps batches with its own clock (LogAppendTime)."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far before the broker's clock a CreateTime timestamp may be: Kafka's
        before.max.ms, or the deprecated difference.max.ms when only that one is set."""
        before = self.message_timestamp_before_max_ms
        return before if before != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far after the broker's clock a CreateTime timestamp may be (as the before one)."""
        after = self.message_timestamp_after_max_ms
        return after if after != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def recompress_to(self) -> int | None:
        """The codec (attribute bits 0-2) the leader stores batches in, None to keep the
        producer's (``compression.type=producer``)."""
        return _CODECS.get(self.compression_type)

    def compression_level(self, codec: int) -> int | None:
        """The level to recompress with ``codec`` (None: the codec's default or no levels)."""
        if codec == 1:
            return None if self.compression_gzip_level == -1 else self.compression_gzip_level
        if codec == 3:
            return self.compression_lz4_level
        if codec == 4:
            return self.compression_zstd_level
        return None

    # -- parsing -----------------------------------------------------------------------------

    @classmethod
    def from_props(
        cls, props: Mapping[str, str], *, base: TopicConfig | None = None
    ) -> TopicConfig:
        """Build from Kafka-named string settings; unknown names and bad values raise."""
        values: dict[str, Any] = {}
        for name, raw in props.items():
            attr = _ATTRS.get(name)
            if attr is None:
                raise ConfigurationError(f"unknown topic config {name!r}")
            values[attr] = _parse(attr, name, str(raw))
        start = base if base is not None else cls()
        return dataclasses.replace(start, **values)

    def merged(self, props: Mapping[str, str]) -> TopicConfig:
        """A copy with ``props`` (Kafka names, string values) applied on top."""
        return TopicConfig.from_props(props, base=self)

    def to_props(self) -> dict[str, str]:
        """Every setting as Kafka name -> string value (the inverse of ``from_props``)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                out[f.metadata["name"]] = ",".join(value)
            elif isinstance(value, bool):
                out[f.metadata["name"]] = "true" if value else "false"
            else:
                out[f.metadata["name"]] = str(value)
        return out


_NAMES: dict[str, str] = {f.name: f.metadata["name"] for f in dataclasses.fields(TopicConfig)}
_ATTRS: dict[str, str] = {v: k for k, v in _NAMES.items()}
_TYPES: dict[str, str] = {f.name: str(f.type) for f in dataclasses.fields(TopicConfig)}
#: Kafka's codec codes (those of strom.records.Compression, a layer beside this one).
_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _parse(attr: str, name: str, raw: str) -> Any:
    text = raw.strip()
    kind = _TYPES[attr]
    if kind == "tuple[str, ...]":
        return tuple(p.strip() for p in text.split(",") if p.strip())
    if kind == "str":
        return text
    if kind == "bool":
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigurationError(f"{name} must be true or false, got {raw!r}")
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None
    try:
        return int(text)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None


def parse_config_pairs(items: Iterable[str], option: str = "config") -> dict[str, str]:
    """``["retention.ms=1000", ...]`` -> ``{"retention.ms": "1000"}``; a malformed item raises
    ConfigurationError naming ``option`` (values are checked by ``TopicConfig.from_props``)."""
    pairs: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(f"{option} expects name=value, got {item!r}")
        pairs[name.strip()] = value.strip()
    return pairs
