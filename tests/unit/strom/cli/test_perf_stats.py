"""``strom perf``'s latency histogram against exact nearest-rank percentiles, and the Kafka
producer property mapping."""

from __future__ import annotations

import math
import random

import pytest

from strom.cli.perf_stats import LatencyHistogram
from strom.cli.producer_properties import (
    PRODUCER_PROPERTIES,
    kafka_names,
    parse_producer_properties,
)
from strom.errors import ConfigurationError
from strom.producer import ProducerOptions

QUANTILES = (0.0001, 0.5, 0.95, 0.99, 0.999, 1.0)


def exact(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1] / 1000


def test_exact_below_16_ms() -> None:
    rng = random.Random(7)
    values = [rng.randrange(0, 16384) for _ in range(50_000)]
    histogram = LatencyHistogram()
    for us in values:
        histogram.record(us)
    assert histogram.percentiles(QUANTILES) == [exact(values, q) for q in QUANTILES]
    summary = histogram.summary()
    assert summary["max_latency_ms"] == max(values) / 1000
    assert summary["avg_latency_ms"] == pytest.approx(sum(values) / len(values) / 1000)


def test_within_one_in_16384_above() -> None:
    rng = random.Random(11)
    values = [int(rng.lognormvariate(9, 2.5)) for _ in range(50_000)] + [3 << 38]
    histogram = LatencyHistogram()
    for us in values:
        histogram.record(us)
    got = histogram.percentiles(QUANTILES)
    for q, value in zip(QUANTILES, got, strict=True):
        assert value == pytest.approx(exact(values, q), rel=1 / 16384, abs=0.0005), q
    assert got == sorted(got)
    assert got[-1] == histogram.max_us / 1000 == (3 << 38) / 1000  # clamped to the exact max


def test_percentiles_never_pass_the_maximum() -> None:
    histogram = LatencyHistogram()
    histogram.record(20_000)  # its slot is 20,000-20,001 us: the middle is above it
    assert histogram.percentiles((0.5, 0.99)) == [20.0, 20.0]
    assert LatencyHistogram().percentiles((0.5,)) == [0.0]


def test_producer_properties() -> None:
    parsed = parse_producer_properties(
        [
            "acks=-1",
            "linger.ms=2.5",
            "batch.size=65536",
            "compression.type=zstd",
            "enable.idempotence=FALSE",
            "max.in.flight.requests.per.connection=1",
            "acks=1",  # the last one wins
        ]
    )
    assert parsed == {
        "acks": 1,
        "linger_ms": 2.5,
        "batch_size": 65536,
        "compression_type": "zstd",
        "enable_idempotence": False,
        "max_in_flight_requests_per_connection": 1,
    }


def test_every_property_is_a_producer_option() -> None:
    options = ProducerOptions.__required_keys__ | ProducerOptions.__optional_keys__
    for name in PRODUCER_PROPERTIES:
        assert name.replace(".", "_") in options | {"bootstrap_servers"}, name


@pytest.mark.parametrize(
    ("pair", "fragment"),
    [
        ("sasl.mechanism=PLAIN", "'sasl.mechanism'"),
        ("acks=some", "acks: expected all, -1, 0 or 1"),
        ("batch.size=1k", "batch.size: expected an integer"),
        ("enable.idempotence=yes", "enable.idempotence: expected true or false"),
        ("=1", "NAME=VALUE"),
    ],
)
def test_bad_producer_properties(pair: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=None) as raised:
        parse_producer_properties([pair])
    assert fragment in str(raised.value)


def test_kafka_names() -> None:
    message = "delivery_timeout_ms (1) must be >= linger_ms + request_timeout_ms (5 + 30000)"
    assert kafka_names(message) == (
        "delivery.timeout.ms (1) must be >= linger.ms + request.timeout.ms (5 + 30000)"
    )
