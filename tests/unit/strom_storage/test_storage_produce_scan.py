"""A ProduceRequest read from its bytes equals the parsed one, records left in place."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.errors import InvalidRequestError
from strom.protocol.v1 import storage_pb2
from strom_server.rpc import protowire
from strom_storage import convert

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.lists(
    st.builds(
        storage_pb2.ProducePartitionData,
        topic=st.text(max_size=20),
        partition=INT32,
        records=st.binary(max_size=300),
    ),
    max_size=4,
)


def _plain(call: convert.ProduceCall) -> tuple[object, ...]:
    entries = [(t, p, bytes(r)) for t, p, r in call.entries]
    return call.acks, call.timeout_ms, call.correlation_id, entries


@settings(max_examples=200, deadline=None)
@given(
    acks=INT32, timeout_ms=INT32, correlation_id=INT64, parts=partitions, client=st.text(max_size=8)
)
def test_scan_reads_what_the_parser_reads(
    acks: int,
    timeout_ms: int,
    correlation_id: int,
    parts: list[storage_pb2.ProducePartitionData],
    client: str,
) -> None:
    request = storage_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        partitions=parts,
        correlation_id=correlation_id,
        client_id=client,
    )
    raw = request.SerializeToString()
    assert _plain(convert.produce_call_from_bytes(raw)) == _plain(convert.produce_call(request))


def test_records_are_views_into_the_request_not_copies() -> None:
    request = storage_pb2.ProduceRequest(
        acks=1, partitions=[storage_pb2.ProducePartitionData(topic="t", records=b"r" * 1000)]
    )
    raw = request.SerializeToString()
    ((_, _, records),) = convert.produce_call_from_bytes(raw).entries
    assert isinstance(records, memoryview)
    assert records.obj is raw


def test_unknown_fields_and_unexpected_wire_types_are_skipped_like_the_parser() -> None:
    known = storage_pb2.ProduceRequest(acks=-1, correlation_id=7).SerializeToString()
    unknown = bytes([0x98, 0x06, 0x05])  # field 99, varint 5
    acks_as_bytes = bytes([0x0A, 0x01, 0x00])  # field 1 with wire type LEN
    raw = known + unknown + acks_as_bytes
    call = convert.produce_call_from_bytes(raw)
    parsed = storage_pb2.ProduceRequest.FromString(raw)
    assert (call.acks, call.correlation_id) == (parsed.acks, parsed.correlation_id) == (-1, 7)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x1a\x05\x0a\x02",  # a partition entry cut short
        b"\x08",  # a varint cut short
        b"\x1a\x03\x0a\x01\xff",  # a topic that is not UTF-8
        b"\x0f",  # wire type 7
    ],
)
def test_bytes_that_are_not_a_produce_request_are_an_invalid_request(raw: bytes) -> None:
    with pytest.raises(InvalidRequestError, match="malformed ProduceRequest"):
        convert.produce_call_from_bytes(raw)


def test_protowire_reads_signed_integers() -> None:
    assert protowire.int32((1 << 64) - 1) == -1
    assert protowire.int64((1 << 64) - 2) == -2
    assert protowire.int32(2**31 - 1) == 2**31 - 1
    with pytest.raises(ValueError, match="truncated"):
        list(protowire.fields(memoryview(b"\x09\x00\x00")))  # fixed64 with 2 bytes left
