"""Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, the payload."""

from __future__ import annotations

import struct

from strom.errors import StromError

__all__ = [
    "HEADER",
    "HEADER_SIZE",
    "MAGIC_BYTE",
    "SerializationError",
    "frame",
    "header",
    "split_frame",
]

MAGIC_BYTE = 0
HEADER_SIZE = 5
#: The header's layout: the magic byte, the schema id.
HEADER = struct.Struct(">bI")


class SerializationError(StromError):
    """A value could not be serialized or deserialized (bad frame, schema mismatch...)."""


def header(schema_id: int) -> bytes:
    """The 5 bytes in front of every value written with ``schema_id``."""
    return HEADER.pack(MAGIC_BYTE, schema_id)


def frame(schema_id: int, payload: bytes) -> bytes:
    return header(schema_id) + payload


def split_frame(data: bytes) -> tuple[int, memoryview]:
    """``(schema id, payload)`` of a framed value; ``SerializationError`` when not framed."""
    if len(data) < HEADER_SIZE or data[0] != MAGIC_BYTE:
        raise SerializationError(
            f"not a schema-registry framed value (expected magic byte 0 and a 4-byte schema id, "
            f"got {bytes(data[:HEADER_SIZE])!r})"
        )
    return HEADER.unpack_from(data)[1], memoryview(data)[HEADER_SIZE:]
