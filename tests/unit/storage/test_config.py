"""LogConfig: Kafka names and defaults, string parsing, validation naming the option."""

from __future__ import annotations

import pytest

from strom.errors import ConfigurationError
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
