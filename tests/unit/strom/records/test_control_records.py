"""Control records (transaction markers): Kafka's key and end-transaction-marker layouts."""

from __future__ import annotations

import struct

import pytest

from strom.errors import InvalidRecordLayoutError
from strom.records import ControlRecord, ControlRecordType, decode_control_record


def test_commit_and_abort_markers_carry_the_coordinator_epoch() -> None:
    commit = decode_control_record(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 17))
    assert commit == ControlRecord(version=0, type=ControlRecordType.COMMIT, coordinator_epoch=17)
    assert commit.type_name == "COMMIT"
    abort = decode_control_record(struct.pack(">hh", 0, 0), struct.pack(">hi", 0, -1))
    assert (abort.type_name, abort.coordinator_epoch) == ("ABORT", -1)


def test_other_types_have_no_epoch_and_unknown_ones_are_named_by_number() -> None:
    leader_change = decode_control_record(struct.pack(">hh", 0, 2), b"anything")
    assert (leader_change.type_name, leader_change.coordinator_epoch) == ("LEADER_CHANGE", None)
    assert decode_control_record(struct.pack(">hh", 0, 42), None).type_name == "UNKNOWN(42)"


def test_newer_versions_with_more_fields_still_decode() -> None:
    record = decode_control_record(
        struct.pack(">hh", 1, 1) + b"xx", struct.pack(">hi", 1, 3) + b"y"
    )
    assert (record.version, record.type_name, record.coordinator_epoch) == (1, "COMMIT", 3)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (None, None, "control record key of -1 bytes, at least 4 expected"),
        (b"\x00\x00\x00", None, "control record key of 3 bytes, at least 4 expected"),
        (struct.pack(">hh", 0, 1), b"\x00\x00", "end-transaction marker of 2 bytes"),
        (struct.pack(">hh", 0, 0), None, "end-transaction marker of -1 bytes"),
    ],
)
def test_short_keys_and_markers_are_refused(
    key: bytes | None, value: bytes | None, message: str
) -> None:
    with pytest.raises(InvalidRecordLayoutError, match=message):
        decode_control_record(key, value)
