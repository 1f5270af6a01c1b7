"""The consumer protocol codec (Kafka's ConsumerProtocolSubscription/Assignment layout)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.errors import InconsistentGroupProtocolError
from strom.group.assignors.sticky_eager import decode_sticky_user_data, encode_sticky_user_data
from strom.group.protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from strom.types import TopicPartition


# Independent hand encoders: the expected bytes are spelled out field by field.
def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def s(v: str | None) -> bytes:
    return i16(-1) if v is None else i16(len(v.encode())) + v.encode()


def b(v: bytes | None) -> bytes:
    return i32(-1) if v is None else i32(len(v)) + v


def tps(groups: list[tuple[str, list[int]]]) -> bytes:
    out = i32(len(groups))
    for topic, parts in groups:
        out += s(topic) + i32(len(parts)) + b"".join(i32(p) for p in parts)
    return out


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def test_protocol_type() -> None:
    assert PROTOCOL_TYPE == "consumer"


def test_subscription_v3_exact_bytes() -> None:
    sub = Subscription(["a", "bc"], b"\x01\x02", [tp("a", 0), tp("a", 2), tp("bc", 1)], 7, "rack-1")
    expected = (
        i16(3)
        + i32(2)
        + s("a")
        + s("bc")
        + b(b"\x01\x02")
        + tps([("a", [0, 2]), ("bc", [1])])
        + i32(7)
        + s("rack-1")
    )
    assert encode_subscription(sub) == expected
    assert decode_subscription(expected) == sub


def test_subscription_defaults_encode_nulls_and_empty_lists() -> None:
    data = encode_subscription(Subscription([]))
    assert data == i16(3) + i32(0) + b(None) + i32(0) + i32(-1) + s(None)
    assert decode_subscription(data) == Subscription([])


def test_empty_user_data_is_not_null() -> None:
    sub = Subscription(["t"], user_data=b"")
    assert decode_subscription(encode_subscription(sub)).user_data == b""


@pytest.mark.parametrize(
    ("version", "tail", "expected"),
    [
        (0, b"", Subscription(["t"], b"u")),
        (1, tps([("t", [3])]), Subscription(["t"], b"u", [tp("t", 3)])),
        (2, tps([("t", [3])]) + i32(5), Subscription(["t"], b"u", [tp("t", 3)], 5)),
        (
            3,
            tps([("t", [3])]) + i32(5) + s("r"),
            Subscription(["t"], b"u", [tp("t", 3)], 5, "r"),
        ),
    ],
)
def test_decode_every_subscription_version(
    version: int, tail: bytes, expected: Subscription
) -> None:
    data = i16(version) + i32(1) + s("t") + b(b"u") + tail
    assert decode_subscription(data) == expected


def test_newer_subscription_version_decodes_as_v3_ignoring_new_fields() -> None:
    data = i16(9) + i32(1) + s("t") + b(None) + tps([]) + i32(2) + s(None) + b"future"
    assert decode_subscription(data) == Subscription(["t"], None, [], 2, None)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_decode_every_assignment_version(version: int) -> None:
    data = i16(version) + tps([("x", [1, 0]), ("y", [])]) + b(b"ud")
    assert decode_assignment(data) == Assignment([tp("x", 1), tp("x", 0)], b"ud")


def test_assignment_v3_exact_bytes() -> None:
    a = Assignment([tp("x", 0), tp("x", 1), tp("y", 4)], None)
    data = i16(3) + tps([("x", [0, 1]), ("y", [4])]) + b(None)
    assert encode_assignment(a) == data
    assert decode_assignment(data) == a
    assert decode_assignment(encode_assignment(Assignment([]))) == Assignment([])


GOOD_SUB = encode_subscription(Subscription(["topic"], b"abc", [tp("topic", 1)], 3, "r"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "version needs 2 bytes"),
        (b"\x00", "version needs 2 bytes"),
        (i16(-1), "unsupported version -1"),
        (i16(0) + i32(-5), "topics has invalid count -5"),
        (i16(0) + i32(1000), "topics count 1000 exceeds"),
        (i16(0) + i32(1) + i16(10) + b"ab", "topic needs 10 bytes"),
        (i16(0) + i32(1) + s(None), "topic has invalid length -1"),
        (i16(0) + i32(1) + i16(2) + b"\xff\xfe" + b(None), "topic is not valid UTF-8"),
        (i16(0) + i32(0) + i32(-2), "user_data has invalid length -2"),
        (i16(0) + i32(0) + i32(5) + b"ab", "user_data needs 5 bytes"),
        (i16(0) + i32(0) + b(None) + b"x", "1 trailing bytes"),
        (GOOD_SUB + b"\x00\x00", "2 trailing bytes"),
        (GOOD_SUB[:-1], "rack_id needs"),
        (i16(2) + i32(0) + b(None) + tps([]), "generation_id needs 4 bytes"),
    ],
)
def test_malformed_subscription(data: bytes, message: str) -> None:
    with pytest.raises(
        InconsistentGroupProtocolError, match="malformed consumer subscription"
    ) as e:
        decode_subscription(data)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (i16(0), "assigned_partitions count needs 4 bytes"),
        (i16(0) + i32(1) + s("t") + i32(2) + i32(0), "assigned_partitions needs 4 bytes"),
        (i16(3) + tps([]) + b(None) + b"\x00", "1 trailing bytes"),
        (i16(3) + tps([]), "user_data length needs 4 bytes"),
    ],
)
def test_malformed_assignment(data: bytes, message: str) -> None:
    with pytest.raises(InconsistentGroupProtocolError, match="malformed consumer assignment") as e:
        decode_assignment(data)
    assert message in str(e.value)


@given(st.binary(max_size=64))
def test_garbage_never_raises_anything_else(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(InconsistentGroupProtocolError):
            decode(data)


names = st.text(min_size=0, max_size=8)
partitions = st.lists(
    st.builds(TopicPartition, names, st.integers(0, 2**31 - 1)), max_size=10, unique=True
).map(sorted)


@given(
    st.lists(names, max_size=5),
    st.none() | st.binary(max_size=20),
    partitions,
    st.integers(-(2**31), 2**31 - 1),
    st.none() | names,
)
def test_subscription_round_trip(
    topics: list[str],
    user_data: bytes | None,
    owned: list[TopicPartition],
    generation: int,
    rack: str | None,
) -> None:
    sub = Subscription(topics, user_data, owned, generation, rack)
    assert decode_subscription(encode_subscription(sub)) == sub


@given(partitions, st.none() | st.binary(max_size=20))
def test_assignment_round_trip(parts: list[TopicPartition], user_data: bytes | None) -> None:
    a = Assignment(parts, user_data)
    assert decode_assignment(encode_assignment(a)) == a


def test_sticky_user_data_layout_v1_and_v0() -> None:
    data = encode_sticky_user_data([tp("t", 1), tp("t", 0)], 4)
    assert data == tps([("t", [0, 1])]) + i32(4)
    assert decode_sticky_user_data(data) == ([tp("t", 0), tp("t", 1)], 4)
    assert decode_sticky_user_data(tps([("t", [2])])) == ([tp("t", 2)], -1)
    with pytest.raises(InconsistentGroupProtocolError, match="sticky assignor user data"):
        decode_sticky_user_data(tps([]) + i32(1) + b"zz")
