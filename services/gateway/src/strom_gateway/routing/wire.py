"""Routing fields of data-path messages, read without copying record bytes.

Routing a Produce needs each partition's topic and number, and relaying a Fetch answer needs
each partition's error code: both sit in small fields beside one large ``records`` field,
read with ``strom_server.rpc.produce_request`` and ``strom_server.rpc.protowire``. Field numbers:
proto/strom/protocol/v1/storage.proto.
A message these scanners cannot read raises ``ValueError``; callers then parse it normally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from strom.protocol.v1 import storage_pb2
from strom_server.rpc.produce_request import read_produce_request
from strom_server.rpc.protowire import LEN, VARINT, fields, int32

__all__ = [
    "FetchResult",
    "LazyFetchResponse",
    "PartitionRef",
    "produce_partitions",
    "resolve",
    "serialized",
]


@dataclass(frozen=True, slots=True)
class PartitionRef:
    """One partition entry of a request: where it goes (and its place in the request)."""

    topic: str
    partition: int
    index: int


def produce_partitions(raw: bytes) -> list[PartitionRef]:
    """The (topic, partition) of each ProducePartitionData in a serialized ProduceRequest."""
    entries = read_produce_request(raw).entries
    return [PartitionRef(topic, partition, i) for i, (topic, partition, _) in enumerate(entries)]


class _RawFetchResponse:
    """The serialized response and, once asked for, its parse (shared by its results)."""

    __slots__ = ("_message", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._message: storage_pb2.FetchResponse | None = None

    def message(self) -> storage_pb2.FetchResponse:
        if self._message is None:
            self._message = storage_pb2.FetchResponse.FromString(self.raw)
        return self._message


@dataclass(slots=True)
class _LazyResult:
    """A FetchPartitionResult's routing fields; ``resolve()`` parses the real one."""

    topic: str
    partition: int
    error_code: int
    response: _RawFetchResponse
    index: int
    #: The serialized result itself: a view of the response (read by the Kafka listener).
    entry: memoryview

    def resolve(self) -> storage_pb2.FetchPartitionResult:
        return self.response.message().partitions[self.index]


class LazyFetchResponse:
    """A serialized FetchResponse: the partitions' error codes read at once, the whole message
    parsed only when asked (when answers of several leaders are merged).

    No reference cycle: results point at the shared ``_RawFetchResponse``, never back at this
    object, so reference counting frees the record bytes as soon as the answer is sent (a
    cycle here held every fetched byte until a garbage collection, which the services run
    rarely: the gateway grew by ~140 MB/s under a 1 MiB fetch load)."""

    __slots__ = ("_raw", "partitions")

    def __init__(self, raw: bytes) -> None:
        self._raw = _RawFetchResponse(raw)
        self.partitions: list[_LazyResult] = []
        for number, kind, value in fields(memoryview(raw)):
            if number == 2 and kind == LEN:
                topic, partition, code = "", 0, 0
                for sub, sub_kind, sub_value in fields(value):
                    if sub == 1 and sub_kind == LEN:
                        topic = bytes(sub_value).decode()
                    elif sub == 2 and sub_kind == VARINT:
                        partition = int32(sub_value)
                    elif sub == 3 and sub_kind == VARINT:
                        code = int32(sub_value)
                self.partitions.append(
                    _LazyResult(topic, partition, code, self._raw, len(self.partitions), value)
                )

    @property
    def raw(self) -> bytes:
        """The serialized response, as it came."""
        return self._raw.raw

    def message(self) -> storage_pb2.FetchResponse:
        return self._raw.message()


#: A fetch's per-partition result: a leader's, read lazily, or one the gateway made (an error).
FetchResult: TypeAlias = storage_pb2.FetchPartitionResult | _LazyResult


def resolve(result: FetchResult) -> storage_pb2.FetchPartitionResult:
    """A real result message for a lazily read one; anything else as it is."""
    return result.resolve() if isinstance(result, _LazyResult) else result


def serialized(result: FetchResult) -> memoryview | None:
    """A leader's result as its own serialized bytes (a view of the response); None for a
    result the gateway made."""
    return result.entry if isinstance(result, _LazyResult) else None
