"""LogConfig: Kafka names and defaults, string parsing, validation naming the option."""

from __future__ import annotations

import pytest

from strom.errors import ConfigurationError
from strom.topic_config import NO_EFFECT
from strom_storage.log import LogConfig
from strom_storage.log.config import LONG_MAX


def test_defaults_are_kafkas() -> None:
    props = LogConfig().to_props()
    assert props["segment.bytes"] == "1073741824"
    assert props["segment.ms"] == "604800000"
    assert props["segment.index.bytes"] == "10485760"
    assert props["index.interval.bytes"] == "4096"
    assert props["retention.ms"] == "604800000"
    assert props["retention.bytes"] == "-1"
    assert props["cleanup.policy"] == "delete"
    assert props["max.message.bytes"] == "1048588"
    assert props["message.timestamp.type"] == "CreateTime"
    assert props["flush.messages"] == props["flush.ms"] == str(LONG_MAX)
    assert props["min.cleanable.dirty.ratio"] == "0.5"
    assert props["delete.retention.ms"] == "86400000"
    assert props["min.compaction.lag.ms"] == "0"
    assert props["file.delete.delay.ms"] == "60000"
    assert LogConfig.from_props(props) == LogConfig()


def test_parse_and_merge() -> None:
    config = LogConfig.from_props({"cleanup.policy": "compact, delete", "retention.ms": "-1"})
    assert config.compact and config.delete and config.retention_ms == -1
    merged = config.merged({"segment.bytes": "2048"})
    assert merged.segment_bytes == 2048 and merged.compact


@pytest.mark.parametrize(
    ("props", "name"),
    [
        ({"segment.bytes": "abc"}, "segment.bytes"),
        ({"segment.bytes": "1"}, "segment.bytes"),
        ({"retention.bytes": "-2"}, "retention.bytes"),
        ({"cleanup.policy": "forever"}, "cleanup.policy"),
        ({"message.timestamp.type": "Now"}, "message.timestamp.type"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
        ({"flush.messages": "0"}, "flush.messages"),
        ({"no.such.option": "1"}, "no.such.option"),
    ],
)
def test_bad_values_name_the_option(props: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigurationError, match=name.replace(".", r"\.")):
        LogConfig.from_props(props)


#: Every topic config of Kafka's table (3.x and 4.x, https://kafka.apache.org/documentation/
#: #topicconfigs), each with a valid value other than its default.
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.gzip.level": "9",
    "compression.lz4.level": "12",
    "compression.type": "zstd",
    "compression.zstd.level": "-5",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1000",
    "flush.messages": "100",
    "flush.ms": "1000",
    "follower.replication.throttled.replicas": "0:1,1:2",
    "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "1000000",
    "local.retention.ms": "60000",
    "max.compaction.lag.ms": "60000",
    "max.message.bytes": "2000000",
    "message.downconversion.enable": "false",
    "message.format.version": "2.8-IV1",
    "message.timestamp.after.max.ms": "60000",
    "message.timestamp.before.max.ms": "60000",
    "message.timestamp.difference.max.ms": "60000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.2",
    "min.compaction.lag.ms": "1000",
    "min.insync.replicas": "2",
    "preallocate": "true",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "remote.storage.enable": "false",
    "retention.bytes": "1000000",
    "retention.ms": "60000",
    "segment.bytes": "1048576",
    "segment.index.bytes": "1048576",
    "segment.jitter.ms": "1000",
    "segment.ms": "60000",
    "unclean.leader.election.enable": "true",
}


def test_every_kafka_topic_config_is_accepted_and_described() -> None:
    config = LogConfig.from_props(KAFKA_TOPIC_CONFIGS)
    props = config.to_props()
    assert {name: props[name] for name in KAFKA_TOPIC_CONFIGS} == KAFKA_TOPIC_CONFIGS
    assert set(props) > NO_EFFECT
    assert config.recompress_to == 4 and config.compression_level(4) == -5


def test_compression_type_and_levels() -> None:
    assert LogConfig().compression_type == "producer" and LogConfig().recompress_to is None
    codes = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    for name, code in codes.items():
        assert LogConfig.from_props({"compression.type": name}).recompress_to == code
    defaults = LogConfig()
    assert [defaults.compression_level(c) for c in range(5)] == [None, None, None, 9, 3]
    assert LogConfig.from_props({"compression.gzip.level": "2"}).compression_level(1) == 2


def test_the_deprecated_timestamp_difference_applies_unless_before_or_after_is_set() -> None:
    config = LogConfig.from_props({"message.timestamp.difference.max.ms": "5000"})
    assert (config.timestamp_before_max_ms, config.timestamp_after_max_ms) == (5000, 5000)
    config = config.merged({"message.timestamp.after.max.ms": "100"})
    assert (config.timestamp_before_max_ms, config.timestamp_after_max_ms) == (5000, 100)


@pytest.mark.parametrize(
    ("props", "fragment"),
    [
        ({"compression.type": "none"}, "compression.type must be one of producer, uncompressed"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"compression.gzip.level": "0"}, r"compression.gzip.level .* or -1"),
        ({"compression.lz4.level": "18"}, "compression.lz4.level"),
        ({"compression.zstd.level": "23"}, "compression.zstd.level"),
        ({"preallocate": "yes"}, "preallocate must be true or false"),
        ({"remote.storage.enable": "true"}, "tiered storage is not part of Strom"),
        ({"local.retention.ms": "-3"}, "local.retention.ms"),
        ({"leader.replication.throttled.replicas": "0-1"}, "partition:broker"),
        ({"message.format.version": "three"}, "message.format.version"),
        ({"segment.jitter.ms": "-1"}, "segment.jitter.ms"),
    ],
)
def test_bad_values_of_the_other_kafka_configs(props: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        LogConfig.from_props(props)
