"""Zigzag varints, as Kafka writes the fields of a v2 record (pure-Python reference).

A signed value is first zigzag-mapped to an unsigned one, so that small magnitudes of either
sign stay short, then written base-128, least significant group first, with the high bit of
every byte but the last set::

    zigzag(n) = (n << 1) ^ (n >> 63)        0, -1, 1, -2, 2, ... -> 0, 1, 2, 3, 4, ...

        value         zigzag         bytes
            0              0         00
           -1              1         01
            1              2         02
           63            126         7e
          -64            127         7f
           64            128         80 01
          300            600         d8 04
    2**31 - 1     4294967294         fe ff ff ff 0f
       -2**31     4294967295         ff ff ff ff 0f

A varint (32-bit field) takes at most 5 bytes, a varlong (64-bit field) at most 10. Decoding
is strict: a longer encoding, or a last byte carrying bits beyond the type's width, raises
``VarintOverflowError``; a buffer that ends inside a varint raises ``TruncatedBatchError``.
The C twin (``strom.records._native._crecords``) implements the same rules.
"""

from __future__ import annotations

from strom.errors import TruncatedBatchError, VarintOverflowError

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_varint",
    "write_varint",
    "zigzag_decode",
    "zigzag_encode",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# Longest encoding and the largest value its last byte may hold, per width.
_LIMITS = {32: (5, 0x0F), 64: (10, 0x01)}


def zigzag_encode(value: int) -> int:
    """Map a signed 64-bit value to its unsigned zigzag form."""
    return (value << 1) ^ (value >> 63)


def zigzag_decode(value: int) -> int:
    """Inverse of ``zigzag_encode``."""
    return (value >> 1) ^ -(value & 1)


def size_of_varint(value: int) -> int:
    """Bytes the zigzag encoding of ``value`` takes (same for varint and varlong)."""
    unsigned = (value << 1) ^ (value >> 63)
    size = 1
    while unsigned >= 0x80:
        unsigned >>= 7
        size += 1
    return size


def write_varint(out: bytearray, value: int) -> None:
    """Append the zigzag varint of ``value`` (caller checks its range) to ``out``."""
    unsigned = (value << 1) ^ (value >> 63)
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a 32-bit ``value``; ``ValueError`` outside the int32 range."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of a 64-bit ``value``; ``ValueError`` outside the int64 range."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} is outside the int64 range")
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def read_unsigned(buf: bytes | bytearray | memoryview, pos: int, end: int, bits: int) -> int:
    """Raw (not zigzag-decoded) varint at ``pos``; returns ``value << 8 | length``.

    Returns -1 when ``end`` comes first and -2 when the encoding overflows ``bits`` (32 or
    64): callers turn these into errors naming the field. Packing the length into the low
    byte keeps the hot path free of tuple allocations.
    """
    max_bytes, last_max = _LIMITS[bits]
    result = 0
    shift = 0
    i = pos
    while True:
        if i >= end:
            return -1
        byte = buf[i]
        if i - pos == max_bytes - 1 and byte > last_max:
            return -2
        result |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return (result << 8) | (i - pos)
        shift += 7


def _decode(buf: bytes | bytearray | memoryview, pos: int, bits: int) -> tuple[int, int]:
    if pos < 0 or pos > len(buf):
        raise ValueError(f"position {pos} is outside the buffer of {len(buf)} bytes")
    packed = read_unsigned(buf, pos, len(buf), bits)
    if packed == -1:
        raise TruncatedBatchError(f"varint at byte {pos} is truncated")
    if packed == -2:
        raise VarintOverflowError(f"varint at byte {pos} overflows {bits} bits")
    return zigzag_decode(packed >> 8), pos + (packed & 0xFF)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode the 32-bit zigzag varint at ``pos``; returns ``(value, next_pos)``."""
    return _decode(buf, pos, 32)


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode the 64-bit zigzag varint at ``pos``; returns ``(value, next_pos)``."""
    return _decode(buf, pos, 64)
