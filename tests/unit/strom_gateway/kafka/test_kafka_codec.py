"""The Kafka codec against its own descriptions: round trips of every message at every served
version, and bytes that are not a message (truncated, oversized or negative lengths, nulls
where a version allows none, garbage) rejected with MalformedMessageError and nothing else."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kafka_strategies import message, plain

from strom_gateway.kafka.protocol.codec import MalformedMessageError, decode, encode
from strom_gateway.kafka.protocol.messages import (
    APIS,
    FETCH,
    METADATA,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from strom_gateway.kafka.protocol.schema import Api, Struct

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Every message at every served version: (api, version, request or response).
CASES = st.sampled_from(
    [
        (api, version, side)
        for api in APIS
        for version in range(api.min_version, api.max_version + 1)
        for side in ("request", "response")
    ]
)


def _contains(decoded: Any, expected: Any, where: str) -> None:
    """Everything ``expected`` sets is in ``decoded`` (which also has the defaults of the
    tagged fields left out)."""
    if isinstance(expected, dict):
        for key, value in expected.items():
            _contains(decoded[key], value, f"{where}.{key}")
    elif isinstance(expected, list):
        assert len(decoded) == len(expected), where
        for i, (d, e) in enumerate(zip(decoded, expected, strict=True)):
            _contains(d, e, f"{where}[{i}]")
    else:
        assert decoded == expected, where


def _struct(api: Api, side: str) -> Struct:
    return api.request if side == "request" else api.response


@SETTINGS
@given(case=CASES, data=st.data())
def test_every_message_round_trips(case: tuple[Api, int, str], data: st.DataObject) -> None:
    api, version, side = case
    s = _struct(api, side)
    flexible = api.flexible(version)
    value = data.draw(message(s, version, flexible))
    encoded = encode(s, version, flexible, value)
    decoded = plain(decode(s, version, flexible, encoded))
    _contains(decoded, plain(value), s.name)
    assert encode(s, version, flexible, decoded) == encoded


@SETTINGS
@given(case=CASES, data=st.data())
def test_truncated_messages_are_refused(case: tuple[Api, int, str], data: st.DataObject) -> None:
    api, version, side = case
    s = _struct(api, side)
    flexible = api.flexible(version)
    encoded = encode(s, version, flexible, data.draw(message(s, version, flexible)))
    assume(encoded)  # an empty message (ApiVersions v0) has no prefix to cut
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(MalformedMessageError):
        decode(s, version, flexible, encoded[:cut])


@SETTINGS
@given(case=CASES, data=st.data())
def test_damaged_messages_decode_or_are_refused(
    case: tuple[Api, int, str], data: st.DataObject
) -> None:
    api, version, side = case
    """Any byte overwritten anywhere (lengths included): either still a message, or
    MalformedMessageError; never another exception, never a read past the end."""
    s = _struct(api, side)
    flexible = api.flexible(version)
    encoded = bytearray(encode(s, version, flexible, data.draw(message(s, version, flexible))))
    assume(encoded)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(encoded) - 1))
        encoded[at] = data.draw(st.integers(0, 255))
    with contextlib.suppress(MalformedMessageError):
        decode(s, version, flexible, bytes(encoded))


def _metadata_request_with_topic_length(length: int) -> bytes:
    return struct.pack(">i", 1) + struct.pack(">h", length) + b"abc"


@pytest.mark.parametrize("length", [4, 100, 0x7FFF])
def test_a_string_longer_than_the_frame_is_refused(length: int) -> None:
    with pytest.raises(MalformedMessageError, match="needs"):
        decode(METADATA.request, 1, False, _metadata_request_with_topic_length(length))


@pytest.mark.parametrize("length", [-2, -100, -(2**15)])
def test_a_negative_string_length_is_refused(length: int) -> None:
    with pytest.raises(MalformedMessageError, match="negative"):
        decode(METADATA.request, 1, False, _metadata_request_with_topic_length(length))


def test_a_null_where_the_version_has_none_is_refused() -> None:
    # Metadata v1+ allows a null topic list (-1); a null topic *name* only from v10.
    assert decode(METADATA.request, 1, False, struct.pack(">i", -1))["topics"] is None
    with pytest.raises(MalformedMessageError, match="null"):
        decode(METADATA.request, 1, False, _metadata_request_with_topic_length(-1))


@pytest.mark.parametrize("count", [2**31 - 1, 1000])
def test_an_array_longer_than_the_frame_is_refused(count: int) -> None:
    body = struct.pack(">hhii", -1, 1, 1000, count)  # Produce v3: txn id, acks, timeout, topics
    with pytest.raises(MalformedMessageError, match="exceeds"):
        decode(PRODUCE.request, 3, False, body)


@pytest.mark.parametrize("count", [-2, -(2**31)])
def test_a_negative_array_count_is_refused(count: int) -> None:
    body = struct.pack(">hhii", -1, 1, 1000, count)
    with pytest.raises(MalformedMessageError, match="negative"):
        decode(PRODUCE.request, 3, False, body)


def test_an_overlong_varint_is_refused() -> None:
    with pytest.raises(MalformedMessageError, match="varint"):
        decode(METADATA.request, 9, True, b"\xff\xff\xff\xff\xff\xff")


def test_unknown_tagged_fields_are_skipped() -> None:
    value: dict[str, Any] = {"topics": [], "isolation_level": 1}
    encoded = encode(FETCH.request, 12, True, value)
    assert encoded[-1] == 0  # no tagged fields at the top level
    with_unknown = encoded[:-1] + b"\x01\x09\x02xy"  # one field, tag 9, two bytes
    assert decode(FETCH.request, 12, True, with_unknown)["isolation_level"] == 1


def test_records_stay_the_bytes_sent() -> None:
    batch = bytes(range(256)) * 3
    value = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
    }
    for version in (3, 9, 10):
        flexible = PRODUCE.flexible(version)
        encoded = encode(PRODUCE.request, version, flexible, value)
        decoded = decode(PRODUCE.request, version, flexible, encoded)
        records = decoded["topic_data"][0]["partition_data"][0]["records"]
        assert isinstance(records, memoryview)
        assert bytes(records) == batch


@pytest.mark.parametrize("api", APIS, ids=[api.name for api in APIS])
def test_every_response_encodes_with_only_an_error_code(api: Api) -> None:
    """What the listener sends when a forwarded call fails as a whole: every other field at
    its default, valid in every served version."""
    for version in range(api.min_version, api.max_version + 1):
        flexible = api.flexible(version)
        encoded = encode(api.response, version, flexible, {"error_code": 15})
        decode(api.response, version, flexible, encoded)


def test_sasl_handshake_bytes() -> None:
    """SaslHandshake (key 17) v0-1, never flexible: an int16-length mechanism; the answer an
    error code and an int32-counted list of mechanisms."""
    for version in (0, 1):
        assert decode(SASL_HANDSHAKE.request, version, False, b"\x00\x05PLAIN") == {
            "mechanism": "PLAIN"
        }
        answer = {"error_code": 33, "mechanisms": ["SCRAM-SHA-256", "PLAIN"]}
        expected = b"\x00\x21\x00\x00\x00\x02\x00\x0dSCRAM-SHA-256\x00\x05PLAIN"
        assert encode(SASL_HANDSHAKE.response, version, False, answer) == expected
    assert not SASL_HANDSHAKE.flexible(1)


def test_sasl_authenticate_bytes() -> None:
    """SaslAuthenticate (key 36): int32-length bytes in v0-1, compact bytes and tagged fields
    from v2; the answer's session_lifetime_ms exists from v1."""
    assert decode(SASL_AUTHENTICATE.request, 0, False, b"\x00\x00\x00\x02n,")["auth_bytes"] == b"n,"
    assert SASL_AUTHENTICATE.flexible(2) and not SASL_AUTHENTICATE.flexible(1)
    assert decode(SASL_AUTHENTICATE.request, 2, True, b"\x03n,\x00")["auth_bytes"] == b"n,"
    answer = {
        "error_code": 0,
        "error_message": None,
        "auth_bytes": b"v=",
        "session_lifetime_ms": 900000,
    }
    lifetime = struct.pack(">q", 900000)
    assert encode(SASL_AUTHENTICATE.response, 0, False, answer) == (
        b"\x00\x00\xff\xff\x00\x00\x00\x02v="
    )
    assert encode(SASL_AUTHENTICATE.response, 1, False, answer) == (
        b"\x00\x00\xff\xff\x00\x00\x00\x02v=" + lifetime
    )
    assert encode(SASL_AUTHENTICATE.response, 2, True, answer) == (
        b"\x00\x00\x00\x03v=" + lifetime + b"\x00"
    )
    failed = {"error_code": 58, "error_message": "no", "auth_bytes": b"", "session_lifetime_ms": 0}
    decoded = decode(
        SASL_AUTHENTICATE.response, 2, True, encode(SASL_AUTHENTICATE.response, 2, True, failed)
    )
    assert decoded["error_code"] == 58 and decoded["error_message"] == "no"
