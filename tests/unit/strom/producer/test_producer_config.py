"""Producer option validation: every bad value names its option (no cluster needed)."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

import strom.aio
from strom import Producer
from strom.errors import ConfigurationError
from strom.records import Compression


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"acks": 2, "enable_idempotence": False}, "acks"),
        ({"acks": "some", "enable_idempotence": False}, "acks"),
        ({"acks": True, "enable_idempotence": False}, "acks"),
        ({"enable_idempotence": "yes"}, "enable_idempotence"),
        ({"compression_type": "brotli"}, "compression_type"),
        ({"linger_ms": -1}, "linger_ms"),
        ({"linger_ms": "5"}, "linger_ms"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 1.5}, "batch_size"),
        ({"buffer_memory": 0}, "buffer_memory"),
        ({"max_block_ms": -1}, "max_block_ms"),
        ({"retries": -1, "enable_idempotence": False}, "retries"),
        ({"retry_backoff_ms": -5}, "retry_backoff_ms"),
        ({"delivery_timeout_ms": 0}, "delivery_timeout_ms"),
        ({"delivery_timeout_ms": 1000, "request_timeout_ms": 30000}, "delivery_timeout_ms"),
        ({"request_timeout_ms": 0}, "request_timeout_ms"),
        ({"max_in_flight_requests_per_connection": 0}, "max_in_flight"),
        ({"max_request_size": 0}, "max_request_size"),
        ({"metadata_max_age_ms": -1}, "metadata_max_age_ms"),
        ({"partitioner": 3}, "partitioner"),
        ({"key_serializer": "json"}, "key_serializer"),
        ({"value_serializer": 1}, "value_serializer"),
        ({"client_id": 7}, "client_id"),
    ],
)
def test_bad_option(options: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment.replace("(", r"\(")):
        strom.aio.Producer("127.0.0.1:1", **options)


#: Settings idempotence cannot work with, and the name each is reported by.
_CONFLICTS = [
    ({"acks": 1}, "acks=1"),
    ({"acks": "1"}, "acks='1'"),
    ({"acks": 0}, "acks=0"),
    ({"max_in_flight_requests_per_connection": 6}, "max_in_flight_requests_per_connection=6"),
    ({"retries": 0}, "retries=0"),
]


@pytest.mark.parametrize(("options", "setting"), _CONFLICTS)
def test_default_idempotence_gives_way_to_a_conflicting_setting(
    options: dict[str, Any], setting: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Unset, idempotence is turned off by the conflict (Kafka's KIP-679), said once."""
    with caplog.at_level(logging.INFO, logger="strom.producer"):
        config = strom.aio.Producer("127.0.0.1:1", **options).config
    assert config.enable_idempotence is False
    said = [r.getMessage() for r in caplog.records if "idempotence" in r.getMessage()]
    assert said == [
        f"idempotence disabled because {setting}; set enable_idempotence=False to silence this"
    ]


@pytest.mark.parametrize(("options", "setting"), _CONFLICTS)
def test_explicit_idempotence_with_a_conflicting_setting_is_an_error(
    options: dict[str, Any], setting: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(f"got {setting}")):
        strom.aio.Producer("127.0.0.1:1", enable_idempotence=True, **options)


@pytest.mark.parametrize(("options", "setting"), _CONFLICTS)
def test_explicitly_disabled_idempotence_is_quiet(
    options: dict[str, Any], setting: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="strom.producer"):
        config = strom.aio.Producer("127.0.0.1:1", enable_idempotence=False, **options).config
    assert config.enable_idempotence is False
    assert not [r for r in caplog.records if "idempotence" in r.getMessage()]


def test_idempotence_stays_on_without_a_conflict(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="strom.producer"):
        unset = strom.aio.Producer(
            "127.0.0.1:1", acks="all", max_in_flight_requests_per_connection=5, retries=1
        )
        explicit = strom.aio.Producer("127.0.0.1:1", enable_idempotence=True)
    assert unset.config.enable_idempotence and explicit.config.enable_idempotence
    assert not [r for r in caplog.records if "idempotence" in r.getMessage()]


def test_explicit_idempotence_names_every_conflict() -> None:
    with pytest.raises(ConfigurationError) as caught:
        strom.aio.Producer("127.0.0.1:1", enable_idempotence=True, acks=1, retries=0)
    assert "requires acks='all' and retries > 0, got acks=1 and retries=0" in str(caught.value)


def test_sync_producer_resolves_idempotence_the_same_way() -> None:
    producer = Producer("127.0.0.1:1", acks=1)
    try:
        assert producer.config.enable_idempotence is False
    finally:
        producer.close(1)
    with pytest.raises(ConfigurationError, match="requires acks='all', got acks=1"):
        Producer("127.0.0.1:1", acks=1, enable_idempotence=True)


def test_empty_bootstrap_servers() -> None:
    with pytest.raises(ConfigurationError, match="bootstrap_servers"):
        strom.aio.Producer(" , ")


def test_good_options_are_normalised() -> None:
    producer = strom.aio.Producer(
        ["127.0.0.1:1", "127.0.0.1:2"],
        acks="1",
        enable_idempotence=False,
        compression_type="LZ4",
        max_in_flight_requests_per_connection=20,
    )
    config = producer.config
    assert config.acks == 1 and config.compression == Compression.LZ4
    assert config.bootstrap_servers == ["127.0.0.1:1", "127.0.0.1:2"]
    assert strom.aio.Producer("127.0.0.1:1", acks=-1).config.acks == -1
    defaults = strom.aio.Producer("127.0.0.1:1").config
    assert (defaults.acks, defaults.enable_idempotence, defaults.compression) == (
        -1,
        True,
        Compression.LZ4,
    )
    assert (defaults.linger_ms, defaults.batch_size, defaults.buffer_memory) == (5, 16384, 32 << 20)
    assert strom.aio.Producer("127.0.0.1:1", compression_type=None).config.compression == 0


def test_sync_producer_validates_before_starting_anything() -> None:
    with pytest.raises(ConfigurationError, match="batch_size"):
        Producer("127.0.0.1:1", batch_size=-1)
