"""The hand-built FetchResponse bytes equal protobuf's serialization of the same response."""

from __future__ import annotations

import pytest

from strom.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from strom.protocol.v1 import storage_pb2
from strom_storage import convert
from strom_storage.node import FetchPartitionResult

CASES = [
    [],
    [FetchPartitionResult("t", 0, None, 0, 0, b"")],
    [FetchPartitionResult("orders", 3, None, 1_000_000, 17, b"\x00" * 300)],
    [
        FetchPartitionResult("a", 0, None, 5, 0, b"x" * 70_000),
        FetchPartitionResult("b-é", 2**31 - 1, OffsetOutOfRangeError("offset 9 is out"), -1, -1),
        FetchPartitionResult("c", 1, UnknownTopicOrPartitionError("no c-1"), 2**62, 2**40, b""),
    ],
]


@pytest.mark.parametrize("results", CASES)
@pytest.mark.parametrize("correlation_id", [0, 1, 2**40, -5])
def test_encoded_fetch_response_matches_protobuf(
    results: list[FetchPartitionResult], correlation_id: int
) -> None:
    expected = convert.fetch_response(correlation_id, results).SerializeToString()
    encoded = convert.encode_fetch_response(correlation_id, results)
    assert encoded == expected
    assert storage_pb2.FetchResponse.FromString(encoded) == convert.fetch_response(
        correlation_id, results
    )
