"""Just enough of the protobuf wire format to read a message's small fields without parsing it,
and to write a data-path message around record bytes without copying them into a message.

The data path's messages carry one large ``bytes`` field (record batches) beside a few small
ones. Parsing such a message copies the large field once into the parser's memory and once
more into a Python ``bytes`` when it is read; reading the small fields here and taking the
large one as a ``memoryview`` of the received bytes copies nothing. Fields of an unexpected
wire type are skipped, as a parser keeps them as unknown fields. A message these functions
cannot read raises ``ValueError``; callers then parse it normally, which names the problem.

The writers (``varint``, ``varint_field``, ``len_prefix``, ``len_field``) write a field as
``SerializeToString`` does (a zero or empty proto3 field not at all), so that a message joined
from their parts is byte for byte the serialized message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = [
    "I32",
    "I64",
    "LEN",
    "VARINT",
    "fields",
    "int32",
    "int64",
    "len_field",
    "len_prefix",
    "varint",
    "varint_field",
]

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field in order: an int for varints, a
    memoryview into ``data`` for length-delimited fields, None for fixed-size ones."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, kind = key >> 3, key & 7
        value: Any
        if kind == VARINT:
            value, pos = _varint(data, pos)
        elif kind == LEN:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError("truncated length-delimited field")
            value, pos = data[pos : pos + size], pos + size
        elif kind == I64:
            value, pos = None, pos + 8
        elif kind == I32:
            value, pos = None, pos + 4
        else:
            raise ValueError(f"unsupported wire type {kind}")
        if number == 0 or pos > len(data):
            raise ValueError("invalid field number or truncated fixed-size field")
        yield number, kind, value


def int32(value: int) -> int:
    """A varint read as a protobuf int32 (negative values are sign-extended to 64 bits)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def int64(value: int) -> int:
    """A varint read as a protobuf int64."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value & 0x8000000000000000 else value


def varint(value: int) -> bytes:
    """Protobuf base-128 varint; negative numbers as their 64-bit two's complement (ten
    bytes, as protobuf writes a negative int32 or int64)."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_field(key: int, value: int) -> bytes:
    """A varint field (``key``: its one-byte tag); nothing for 0."""
    return bytes((key,)) + varint(value) if value else b""


def len_prefix(key: int, size: int) -> bytes:
    """The tag and length of a length-delimited field of ``size`` bytes (its bytes follow)."""
    return bytes((key,)) + varint(size)


def len_field(key: int, data: bytes | memoryview) -> list[bytes | memoryview]:
    """A length-delimited field as parts (``data`` itself, not copied); none when empty."""
    return [len_prefix(key, len(data)), data] if data else []
