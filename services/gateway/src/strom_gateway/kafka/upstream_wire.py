"""The listener's side of the storage messages, without copying record bytes into messages.

A Kafka Produce's record batches go upstream inside a serialized ProduceRequest written here
from the small fields and the batches' views of the request frame (one copy, the join); a
leader's FetchPartitionResult is read here field by field, its records kept as a view of the
leader's answer, and spliced into Kafka's Fetch response as they are. Field numbers:
proto/strom/protocol/v1/storage.proto.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeAlias, cast

from strom.protocol.v1 import common_pb2, storage_pb2
from strom_server.rpc.protowire import (
    LEN,
    VARINT,
    fields,
    int32,
    int64,
    len_field,
    len_prefix,
    varint_field,
)

__all__ = [
    "FetchAnswer",
    "ProduceRequestWriter",
    "fetch_answer",
    "fetch_answer_of",
    "produce_request_bytes",
]

#: (topic, partition, records) of one partition of a Produce.
ProduceEntry = tuple[str, int, "bytes | memoryview | None"]
#: Pieces of a serialized message, joined to write it.
_Parts: TypeAlias = list[bytes | memoryview]


class ProduceRequestWriter:
    """A ProduceRequest of ``entries`` written as ``SerializeToString`` would write it, in
    pieces: each partition's once, so that the request of any of them (a leader's share, a
    retry) is one join of those pieces and the record views."""

    def __init__(
        self,
        *,
        acks: int,
        timeout_ms: int,
        client_id: str,
        transactional_id: str,
        entries: Iterable[ProduceEntry],
    ) -> None:
        self._head: _Parts = [varint_field(0x08, acks), varint_field(0x10, timeout_ms)]
        self._tail: _Parts = [
            *len_field(0x2A, client_id.encode()),
            *len_field(0x32, transactional_id.encode()),
        ]
        self._entries: list[_Parts] = []
        for topic, partition, records in entries:
            body = [*len_field(0x0A, topic.encode()), varint_field(0x10, partition)]
            if records:
                body += len_field(0x1A, records)
            self._entries.append([len_prefix(0x1A, sum(map(len, body))), *body])
        #: The length of the whole request's bytes.
        self.size = sum(map(len, chain(self._head, self._tail, *self._entries)))

    def write(self, indexes: Iterable[int]) -> bytes:
        """The serialized ProduceRequest of the entries ``indexes``, in that order."""
        parts = list(self._head)
        for i in indexes:
            parts += self._entries[i]
        parts += self._tail
        return b"".join(parts)


def produce_request_bytes(
    *,
    acks: int,
    timeout_ms: int,
    client_id: str,
    transactional_id: str,
    entries: Iterable[ProduceEntry],
) -> bytes:
    """A serialized ProduceRequest of ``entries``, as ``SerializeToString`` would write it."""
    entries = list(entries)
    writer = ProduceRequestWriter(
        acks=acks,
        timeout_ms=timeout_ms,
        client_id=client_id,
        transactional_id=transactional_id,
        entries=entries,
    )
    return writer.write(range(len(entries)))


@dataclass(slots=True)
class FetchAnswer:
    """One partition of a fetch's answer, as Kafka's Fetch response needs it."""

    topic: str
    partition: int
    error_code: common_pb2.ErrorCode = common_pb2.NONE
    error_message: str = ""
    high_watermark: int = 0
    last_stable_offset: int = 0
    log_start_offset: int = 0
    records: bytes | memoryview = b""
    #: (producer id, first offset) of each aborted transaction.
    aborted: list[tuple[int, int]] = field(default_factory=list)


def fetch_answer(entry: memoryview) -> FetchAnswer:
    """A serialized FetchPartitionResult read field by field (records: a view of ``entry``);
    ``ValueError`` when it cannot be."""
    answer = FetchAnswer("", 0)
    for number, kind, value in fields(entry):
        if kind == VARINT:
            if number == 2:
                answer.partition = int32(value)
            elif number == 3:
                answer.error_code = cast(common_pb2.ErrorCode, int32(value))
            elif number == 5:
                answer.high_watermark = int64(value)
            elif number == 6:
                answer.last_stable_offset = int64(value)
            elif number == 7:
                answer.log_start_offset = int64(value)
        elif kind == LEN:
            if number == 8:
                answer.records = value
            elif number == 1:
                answer.topic = str(value, "utf-8")
            elif number == 4:
                answer.error_message = str(value, "utf-8")
            elif number == 11:
                producer_id = first_offset = 0
                for sub, sub_kind, sub_value in fields(value):
                    if sub_kind == VARINT and sub == 1:
                        producer_id = int64(sub_value)
                    elif sub_kind == VARINT and sub == 2:
                        first_offset = int64(sub_value)
                answer.aborted.append((producer_id, first_offset))
    return answer


def fetch_answer_of(result: storage_pb2.FetchPartitionResult) -> FetchAnswer:
    """The same from a result message (one the gateway made, or a merged answer's)."""
    return FetchAnswer(
        result.topic,
        result.partition,
        result.error_code,
        result.error_message,
        result.high_watermark,
        result.last_stable_offset,
        result.log_start_offset,
        result.records,
        [(a.producer_id, a.first_offset) for a in result.aborted_transactions],
    )
