"""The Spark connector passes Kafka's security options (``strom.`` or ``kafka.`` prefixed) to
its clients: readers, writers and the driver."""

from __future__ import annotations

from strom_spark.options import parse_sink_options, parse_source_options, security_options

SECURE = {
    "strom.bootstrap.servers": "gw:9092",
    "kafka.security.protocol": "SASL_SSL",
    "strom.sasl.mechanism": "SCRAM-SHA-512",
    "strom.sasl.plain.username": "alice",
    "strom.sasl.plain.password": "pw",
    "kafka.ssl.cafile": "/tls/ca.crt",
}
EXPECTED = {
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-512",
    "sasl_plain_username": "alice",
    "sasl_plain_password": "pw",
    "ssl_cafile": "/tls/ca.crt",
}


def test_security_options_reach_readers_writers_and_the_driver() -> None:
    assert security_options(SECURE) == EXPECTED
    source = parse_source_options({**SECURE, "subscribe": "t"}, streaming=False)
    assert source.security == EXPECTED
    sink = parse_sink_options({**SECURE, "topic": "t"})
    assert sink.security == EXPECTED
    assert {k: sink.producer[k] for k in EXPECTED} == EXPECTED


def test_no_security_options_means_plaintext() -> None:
    source = parse_source_options({"strom.bootstrap.servers": "gw:9092", "subscribe": "t"},
                                  streaming=False)  # fmt: skip
    assert source.security == {}
