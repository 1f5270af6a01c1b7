"""Idempotent-producer state: the producer id and epoch, and per-partition sequence numbers.

A storage node keeps, per partition and producer id, the sequence it expects next: a batch
repeating an appended one gets its original offsets back, a batch beyond the next sequence
gets OUT_OF_ORDER_SEQUENCE_NUMBER. The producer numbers each partition's batches when they
are first sent (``assign``), keeps the number across retries, and re-sends failed batches of
a partition in sequence order (the sender's job), so retries neither duplicate nor reorder.

When a sequenced batch fails for good (retries or delivery timeout exhausted, or the node
reports a gap or an unknown producer for the oldest unacknowledged batch) the sequence of its
partition can no longer continue: the sender fails the other sequenced batches of that
partition and this state is ``reset`` to a new producer id from InitProducerId, with every
sequence back at 0 (Kafka's idempotent producer does the same). Records already
acknowledged stay written exactly once; the records failed with the error were not written
(or their outcome is unknown, as with any failed send).
"""

from __future__ import annotations

import struct

from strom.records.crc import crc32c
from strom.records.header import CRC_OFFSET, CRC_START

__all__ = ["ProducerIdState", "restamp"]

# v2 batch header: producerId int64 @43, producerEpoch int16 @51, baseSequence int32 @53.
_PRODUCER_FIELDS = struct.Struct(">qhi")
_PRODUCER_OFFSET = 43
_CRC = struct.Struct(">I")
_SEQUENCE_LIMIT = 1 << 31


def restamp(data: bytes, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """``data`` (one batch) with its producer id, epoch and base sequence set, CRC updated."""
    out = bytearray(data)
    _PRODUCER_FIELDS.pack_into(out, _PRODUCER_OFFSET, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


class ProducerIdState:
    """Producer id, epoch and the next sequence per partition. Event-loop only."""

    __slots__ = ("acked", "known_to", "producer_epoch", "producer_id", "sequences")

    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}
        # The sequence a partition's oldest unacknowledged batch must have.
        self.acked: dict[tuple[str, int], int] = {}
        # Partitions whose leader acknowledged a batch under this producer id (any epoch): it
        # knows the producer, so it takes a new epoch only from sequence 0.
        self.known_to: set[tuple[str, int]] = set()

    @property
    def has_id(self) -> bool:
        return self.producer_id >= 0

    def set_id(self, producer_id: int, producer_epoch: int) -> None:
        if producer_id != self.producer_id:
            self.known_to.clear()
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.sequences.clear()
        self.acked.clear()

    def reset(self) -> None:
        """Forget the id (a new one is fetched before the next batch is sequenced)."""
        self.set_id(-1, -1)

    def assign(self, pk: tuple[str, int], count: int) -> int:
        """The base sequence for the next ``count`` records of ``pk`` (wrapping at 2**31)."""
        base = self.sequences.get(pk, 0)
        self.sequences[pk] = (base + count) % _SEQUENCE_LIMIT
        return base

    def acknowledge(self, pk: tuple[str, int], base_sequence: int, count: int) -> None:
        self.acked[pk] = (base_sequence + count) % _SEQUENCE_LIMIT
        self.known_to.add(pk)

    def is_next(self, pk: tuple[str, int], base_sequence: int) -> bool:
        """True when ``base_sequence`` is the partition's oldest unacknowledged sequence, so a
        gap reported for it cannot be explained by an earlier batch still in flight."""
        return self.acked.get(pk, 0) == base_sequence
