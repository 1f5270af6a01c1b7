"""A serialized ProduceRequest read without parsing it: its fields, records left in place.

Both the storage node (which writes the records) and the gateway (which routes them) read
produce requests this way: parsing would copy every record byte twice, into the parser and out
of it. Field numbers: proto/strom/protocol/v1/storage.proto.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError

from strom.errors import InvalidRequestError
from strom.protocol.v1 import storage_pb2
from strom_server.rpc.protowire import LEN, VARINT, fields, int32, int64

__all__ = ["ProduceCall", "produce_call", "produce_call_from_bytes", "read_produce_request"]


@dataclass(frozen=True, slots=True)
class ProduceCall:
    """A ProduceRequest's fields; each entry is (topic, partition, records), the records a
    view into the request when read by ``read_produce_request``."""

    acks: int
    timeout_ms: int
    correlation_id: int
    entries: list[tuple[str, int, bytes | memoryview]]
    #: Set by transactional producers (empty otherwise).
    transactional_id: str = ""


def read_produce_request(raw: bytes) -> ProduceCall:
    """The fields of a serialized ProduceRequest. Raises ``ValueError`` when the bytes cannot be
    read this way (callers then parse them, which names the problem)."""
    acks = timeout_ms = correlation_id = 0
    transactional_id = ""
    entries: list[tuple[str, int, bytes | memoryview]] = []
    for number, kind, value in fields(memoryview(raw)):
        if kind == VARINT:
            if number == 1:
                acks = int32(value)
            elif number == 2:
                timeout_ms = int32(value)
            elif number == 4:
                correlation_id = int64(value)
        elif number == 3 and kind == LEN:
            topic, partition, records = "", 0, memoryview(b"")
            for sub, sub_kind, sub_value in fields(value):
                if sub == 1 and sub_kind == LEN:
                    topic = bytes(sub_value).decode()  # UnicodeDecodeError is a ValueError
                elif sub == 2 and sub_kind == VARINT:
                    partition = int32(sub_value)
                elif sub == 3 and sub_kind == LEN:
                    records = sub_value
            entries.append((topic, partition, records))
        elif number == 5 and kind == LEN:
            bytes(value).decode()  # client_id: unused, but a parser would refuse bad UTF-8
        elif number == 6 and kind == LEN:
            transactional_id = bytes(value).decode()
    return ProduceCall(acks, timeout_ms, correlation_id, entries, transactional_id)


def produce_call(request: storage_pb2.ProduceRequest) -> ProduceCall:
    """A parsed ProduceRequest's fields."""
    return ProduceCall(
        request.acks,
        request.timeout_ms,
        request.correlation_id,
        [(p.topic, p.partition, p.records) for p in request.partitions],
        request.transactional_id,
    )


def produce_call_from_bytes(raw: bytes) -> ProduceCall:
    """A serialized ProduceRequest's fields, its records left in place (parsing would copy
    them twice): what the storage node serves and the security guard checks. Raises
    ``InvalidRequestError`` for bytes that are not a ProduceRequest."""
    try:
        return read_produce_request(raw)
    except ValueError:  # the parser names what is wrong, or reads what the scan could not
        try:
            return produce_call(storage_pb2.ProduceRequest.FromString(raw))
        except DecodeError as exc:
            raise InvalidRequestError(f"malformed ProduceRequest: {exc}") from exc
