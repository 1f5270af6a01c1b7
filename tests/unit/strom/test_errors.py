"""strom.errors mirrors the ErrorCode enum of proto/: one class per code, flags from proto."""

from __future__ import annotations

import pytest

from strom import errors
from strom.errors import BrokerResponseError, ErrorCode, for_code, is_retriable

ALL_CODES = [v.number for v in ErrorCode.DESCRIPTOR.values if v.number != ErrorCode.NONE]


def test_every_code_has_exactly_one_owning_class() -> None:
    owners: dict[int, list[str]] = {}
    for name in errors.__all__:
        obj = getattr(errors, name)
        if (
            isinstance(obj, type)
            and issubclass(obj, BrokerResponseError)
            and obj is not BrokerResponseError
            and "code" in vars(obj)
        ):
            owners.setdefault(obj.code, []).append(name)
    assert sorted(owners) == sorted(ALL_CODES)
    assert {code: names for code, names in owners.items() if len(names) > 1} == {}


@pytest.mark.parametrize("code", ALL_CODES)
def test_for_code_round_trips_and_carries_the_proto_retriable_flag(code: int) -> None:
    error = for_code(code, "details")
    assert error.code == code
    assert error.retriable is is_retriable(code)
    assert "details" in str(error)


def test_every_code_declares_retriable_explicitly_in_proto() -> None:
    from strom.protocol.v1.common_pb2 import retriable

    missing = [
        v.name
        for v in ErrorCode.DESCRIPTOR.values
        if v.number != 0 and not v.GetOptions().HasExtension(retriable)
    ]
    assert missing == []


def test_kafka_semantics_of_well_known_codes() -> None:
    assert errors.NotLeaderOrFollowerError.retriable
    assert errors.NotEnoughReplicasError.retriable
    assert errors.NotControllerError.retriable
    assert not errors.MessageTooLargeError.retriable
    assert not errors.OffsetOutOfRangeError.retriable
    assert errors.NotLeaderOrFollowerError.code == 6
    assert errors.CorruptRecordError.code == 2


def test_record_format_errors_are_corrupt_message_on_the_wire() -> None:
    for cls in (
        errors.InvalidCrcError,
        errors.TruncatedBatchError,
        errors.UnsupportedMagicError,
        errors.RecordCountMismatchError,
        errors.VarintOverflowError,
        errors.InvalidBatchLengthError,
        errors.InvalidRecordLayoutError,
    ):
        assert issubclass(cls, errors.CorruptRecordError)
        assert cls("x").code == ErrorCode.CORRUPT_MESSAGE
    assert for_code(ErrorCode.CORRUPT_MESSAGE).__class__ is errors.CorruptRecordError


def test_unknown_code_becomes_unknown_server_error() -> None:
    error = for_code(31337, "from the future")
    assert isinstance(error, errors.UnknownServerError)
    assert "31337" in str(error)
    assert not error.retriable


def test_public_names_are_unique_and_exported() -> None:
    assert len(set(errors.__all__)) == len(errors.__all__)
    for name in errors.__all__:
        assert hasattr(errors, name), name
