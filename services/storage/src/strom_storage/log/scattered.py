"""Batches to write as several buffers: a producer's bytes with rewritten header prefixes.

A leader gives each batch its offsets and its leader epoch. Both sit in the batch's first 16
bytes, outside the CRC, so instead of copying a request's records into a mutable buffer to
patch them (a copy of every produced byte), the append writes a new 16-byte prefix and then
the rest of the batch straight from the received bytes, in one ``writev``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

from strom.records.header import LOG_OVERHEAD, BatchHeader

__all__ = ["REWRITTEN_PREFIX", "ScatteredBatches", "write_all"]

#: base_offset, batch_length, partition_leader_epoch: what a leader rewrites.
REWRITTEN_PREFIX = struct.Struct(">qii")
#: Buffers per writev call (Linux's IOV_MAX is 1024).
_IOV_MAX = 1024

Buffer = bytes | bytearray | memoryview


class ScatteredBatches:
    """Whole batches as a list of buffers, ``len()`` bytes in all."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[Buffer], size: int) -> None:
        self.parts = parts
        self.size = size

    def __len__(self) -> int:
        return self.size

    @classmethod
    def with_new_prefixes(
        cls,
        data: Buffer,
        batches: Sequence[tuple[int, BatchHeader]],
        headers: Sequence[BatchHeader],
    ) -> ScatteredBatches:
        """``data``'s batches at their positions, each with the prefix of ``headers[i]``
        (base offset, length, leader epoch) instead of its own."""
        view = memoryview(data)
        parts: list[Buffer] = []
        for (pos, old), new in zip(batches, headers, strict=True):
            parts.append(
                REWRITTEN_PREFIX.pack(new.base_offset, old.batch_length, new.partition_leader_epoch)
            )
            parts.append(view[pos + REWRITTEN_PREFIX.size : pos + old.batch_length + LOG_OVERHEAD])
        return cls(parts, len(view))


def write_all(fd: int, parts: Sequence[Buffer]) -> int:
    """Write every buffer, in order, with as few ``writev`` calls as the kernel allows; the
    bytes written (all of them, or an ``OSError``)."""
    pending = [memoryview(p) for p in parts if len(p)]
    first, written = 0, 0
    while first < len(pending):
        n = os.writev(fd, pending[first : first + _IOV_MAX])
        if n <= 0:
            raise OSError(f"writev wrote {n} bytes")
        written += n
        while n:
            head = pending[first]
            if n >= len(head):
                n -= len(head)
                first += 1
            else:
                pending[first] = head[n:]
                n = 0
    return written
