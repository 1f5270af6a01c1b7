"""Helpers shared by the record-codec tests: hand-made batches and outcome comparison."""

from __future__ import annotations

import struct
from collections.abc import Callable

from hypothesis import HealthCheck, settings

from strom.records.crc import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")

#: Hypothesis settings of this suite (per test, so other suites keep their own profile).
PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def outcome(fn: Callable[[], object]) -> tuple[str, object]:
    """``("ok", result)`` or ``(exception type name, message)``: compares kernels' behaviour."""
    try:
        return "ok", fn()
    except Exception as exc:  # the comparison is the point
        return type(exc).__name__, str(exc)


def zigzag_varint(value: int) -> bytes:
    """Independent zigzag varint writer (test-side reference, not the codec's)."""
    unsigned = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = unsigned & 0x7F
        unsigned >>= 7
        if unsigned:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def raw_record(
    body: bytes | None = None,
    *,
    ts_delta: int = 0,
    offset_delta: int = 0,
    key: bytes | None = None,
    value: bytes | None = b"v",
    headers: tuple[tuple[bytes, bytes | None], ...] = (),
    length: int | None = None,
) -> bytes:
    """One record laid out by hand; ``body`` overrides every field, ``length`` the length."""
    if body is None:
        parts = [b"\x00", zigzag_varint(ts_delta), zigzag_varint(offset_delta)]
        for field in (key, value):
            parts.append(zigzag_varint(-1) if field is None else zigzag_varint(len(field)) + field)
        parts.append(zigzag_varint(len(headers)))
        for hkey, hvalue in headers:
            parts.append(zigzag_varint(len(hkey)) + hkey)
            parts.append(
                zigzag_varint(-1) if hvalue is None else zigzag_varint(len(hvalue)) + hvalue
            )
        body = b"".join(parts)
    return zigzag_varint(len(body) if length is None else length) + body


def raw_batch(
    records: bytes,
    *,
    count: int,
    base_offset: int = 0,
    leader_epoch: int = -1,
    magic: int = 2,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    first_timestamp: int = 0,
    max_timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    length: int | None = None,
    crc: int | None = None,
) -> bytes:
    """A batch laid out by hand with struct, as Kafka's DefaultRecordBatch writes it; the CRC
    is computed here (independently of the codec) unless given."""
    if last_offset_delta is None:
        last_offset_delta = max(count - 1, 0)
    header = bytearray(
        HEADER.pack(
            base_offset,
            49 + len(records) if length is None else length,
            leader_epoch,
            magic,
            0,
            attributes,
            last_offset_delta,
            first_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    if crc is None:
        crc = crc32c(bytes(header[21:]) + records)
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + records


def refresh_crc(batch: bytes | bytearray) -> bytes:
    """Recompute the CRC of a (tampered) single batch so later checks are reached."""
    out = bytearray(batch)
    if len(out) >= 21:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)
