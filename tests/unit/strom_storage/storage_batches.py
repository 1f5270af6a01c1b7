"""Test helper: build v2 record batches with the client codec (``strom.records``)."""

from __future__ import annotations

from collections.abc import Sequence

from strom.records import BatchBuilder, Compression

Record = tuple[bytes | None, bytes | None, int]  # key, value, timestamp


def make_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    compression: Compression = Compression.NONE,
) -> bytes:
    """One batch holding ``records`` (key, value, timestamp)."""
    builder = BatchBuilder(
        compression=compression,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for key, value, ts in records:
        builder.append(ts, key, value)
    return builder.build()


def simple_batch(
    n: int = 1,
    *,
    ts: int = 1_700_000_000_000,
    value_size: int = 10,
    key: bytes | None = None,
    **kwargs: int,
) -> bytes:
    """A batch of ``n`` records with the same timestamp and filler values."""
    return make_batch([(key, bytes([65 + i % 26]) * value_size, ts) for i in range(n)], **kwargs)  # type: ignore[arg-type]
