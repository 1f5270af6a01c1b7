"""The __consumer_offsets record codec: round trips, stable keys, old versions, bad bytes."""

from __future__ import annotations

import struct

import pytest

from strom.errors import InvalidRecordError
from strom_coordinator.group import records
from strom_coordinator.group.records import (
    GroupKey,
    GroupMetadataValue,
    MarkerKey,
    MemberRecord,
    OffsetKey,
    OffsetValue,
)

MEMBER = MemberRecord("m-1", "instance-1", "client", "/10.0.0.1", 300_000, 45_000, b"sub", b"asg")


def test_keys_round_trip_and_are_deterministic() -> None:
    key = records.offset_key("grüppe", "topic", 7)
    assert key == records.offset_key("grüppe", "topic", 7)
    assert records.decode_key(key) == OffsetKey("grüppe", "topic", 7)
    assert records.decode_key(records.group_key("g")) == GroupKey("g")
    assert records.group_key("g") == b"\x00\x02\x00\x01g"
    assert key[:2] == b"\x00\x01"  # offset keys are version 1, as Kafka writes them
    assert records.offset_key("g", "t", 1) != records.offset_key("g", "t", 2)


def test_offset_value_round_trip() -> None:
    value = OffsetValue(42, 3, "meta", 1_700_000_000_000)
    assert records.decode_offset_value(records.offset_value(value)) == value


def test_group_value_round_trip() -> None:
    value = GroupMetadataValue("consumer", 5, "range", "m-1", 123, [MEMBER])
    decoded = records.decode_group_value(records.encode_group_value(value))
    assert decoded == GroupMetadataValue("consumer", 5, "range", "m-1", 123, [MEMBER])
    empty = GroupMetadataValue("consumer", 6, None, None, -1, [])
    assert records.decode_group_value(records.encode_group_value(empty)) == empty


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_older_versions_decode() -> None:
    v1 = struct.pack(">hq", 1, 9) + _s("m") + struct.pack(">qq", 100, 200)
    assert records.decode_offset_value(v1) == OffsetValue(9, -1, "m", 100, 200)
    v0_key = struct.pack(">h", 0) + _s("g") + _s("t") + struct.pack(">i", 3)
    assert records.decode_key(v0_key) == OffsetKey("g", "t", 3)
    member_v0 = (
        _s("m-1")
        + _s("c")
        + _s("/h")
        + struct.pack(">i", 10_000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 3)
        + b"asg"
    )
    v0 = struct.pack(">h", 0) + _s("consumer") + struct.pack(">i", 2) + _s("range") + _s("m-1")
    decoded = records.decode_group_value(v0 + struct.pack(">i", 1) + member_v0)
    assert decoded.current_state_timestamp_ms == -1
    assert decoded.members == [MemberRecord("m-1", None, "c", "/h", 10_000, 10_000, b"sub", b"asg")]


def test_ownership_marker_is_recognised() -> None:
    key, value = records.ownership_marker(2, 17)
    assert records.decode_key(key) == MarkerKey()
    assert key == records.ownership_marker(5, 1)[0]  # one key: compaction keeps the newest
    assert struct.unpack(">hii", value) == (0, 2, 17)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x09\x00\x01g",  # unknown key version
        b"\x00\x02\x00\x05g",  # string longer than the bytes
        b"\x00\x02\xff\xfe",  # negative string length
        b"\x00\x02\x00\x01g\x00",  # trailing byte
        b"\x00\x02\x00\x02\xff\xfe",  # not UTF-8
        b"\x00\x02\xff\xff",  # null group id
    ],
)
def test_malformed_keys_raise_invalid_record(data: bytes) -> None:
    with pytest.raises(InvalidRecordError, match="key"):
        records.decode_key(data)


def test_malformed_values_raise_invalid_record() -> None:
    good = records.encode_group_value(GroupMetadataValue("consumer", 1, "r", "m-1", 0, [MEMBER]))
    with pytest.raises(InvalidRecordError, match="group metadata value"):
        records.decode_group_value(good[:-1])
    with pytest.raises(InvalidRecordError, match="unknown version 9"):
        records.decode_group_value(b"\x00\x09")
    bad_count = good[:2] + _s("consumer") + struct.pack(">i", 1) + b"\xff\xff\xff\xff"
    with pytest.raises(InvalidRecordError):
        records.decode_group_value(bad_count + b"\x80\x00\x00\x00")
    with pytest.raises(InvalidRecordError, match="offset commit value"):
        records.decode_offset_value(records.offset_value(OffsetValue(1)) + b"x")
    with pytest.raises(InvalidRecordError, match="unknown version"):
        records.decode_offset_value(b"\x00\x07" + bytes(20))


def test_oversized_strings_cannot_be_encoded() -> None:
    with pytest.raises(InvalidRecordError, match="exceeds"):
        records.group_key("g" * 40_000)
