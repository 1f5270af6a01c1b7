"""Transaction markers: the control batch a leader writes when a transaction ends, and reading
one back (the one place the log decodes a record: control batches hold a single tiny one).

The batch (Kafka's): producer id and the epoch of the transaction it ends, base sequence -1,
attributes transactional + control, one record whose key is int16 version 0 + int16 type
(0 ABORT, 1 COMMIT) and whose value is int16 version 0 + int32 coordinator epoch. Both are
built and read by ``strom.records``.

Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Callable

from strom.errors import CorruptRecordError
from strom.records import BatchBuilder, decode_batch
from strom.records.control import ControlRecordType, decode_control_record, end_txn_marker
from strom.records.header import BatchHeader
from strom_storage.log.producer_state import EndTxnMarker

__all__ = ["MarkerOf", "build_marker_batch", "markers_in", "read_marker"]

#: What a control batch (by its header) says: the marker, or None when it is not one.
MarkerOf = Callable[[BatchHeader], EndTxnMarker | None]


def build_marker_batch(
    *,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    base_offset: int,
    leader_epoch: int,
    timestamp_ms: int,
    log_append_time: bool = False,
) -> bytes:
    """The control batch of one COMMIT or ABORT marker."""
    builder = BatchBuilder(
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
        log_append_time=log_append_time,
    )
    key, value = end_txn_marker(committed, coordinator_epoch)
    builder.append(timestamp_ms, key, value)
    return builder.build()


def read_marker(batch: bytes | bytearray | memoryview) -> EndTxnMarker | None:
    """What the control batch ``batch`` says; None when it is not a transaction marker (or its
    record does not decode: such a batch ends nothing)."""
    try:
        records = decode_batch(batch).records
        if not records:
            return None
        control = decode_control_record(records[0].key, records[0].value)
    except CorruptRecordError:
        return None
    if control.type == ControlRecordType.COMMIT:
        return EndTxnMarker(True, control.coordinator_epoch or 0)
    if control.type == ControlRecordType.ABORT:
        return EndTxnMarker(False, control.coordinator_epoch or 0)
    return None


def markers_in(
    data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]
) -> MarkerOf:
    """What each control batch among ``batches`` (positions in ``data``) says, decoded only
    when asked (replicated appends rarely hold one)."""
    by_offset: dict[int, int] | None = None

    def marker_of(header: BatchHeader) -> EndTxnMarker | None:
        nonlocal by_offset
        if by_offset is None:
            by_offset = {h.base_offset: pos for pos, h in batches if h.is_control}
        pos = by_offset[header.base_offset]
        return read_marker(data[pos : pos + header.size])

    return marker_of
