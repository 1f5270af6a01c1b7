"""CRC-32C (Castagnoli), hardware-accelerated through the ``crc32c`` package (SSE4.2 / ARMv8)."""

from __future__ import annotations

from crc32c import crc32c as _crc32c

__all__ = ["crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data``, continuing from ``value`` (0 to start)."""
    return _crc32c(data, value)
