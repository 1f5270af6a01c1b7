"""The typed contract both record kernels (pure Python and C) fulfil.

A kernel is the per-record part of the codec: ``record.py`` + ``varint.py`` in Python and
``_native/_crecords.c`` in C. ``batch.py`` does everything per batch (header, CRC,
compression) once, on top of whichever kernel is bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from strom.records.record import Record

BytesLike = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]
HeaderIn = tuple[str, BytesLike | None]
Columns = tuple[
    list[int], list[int], list[bytes | None], list[bytes | None], list[tuple[Header, ...]]
]

__all__ = [
    "BytesLike",
    "Columns",
    "DecodeRecords",
    "Header",
    "HeaderIn",
    "RecordsWriterProtocol",
    "VarintDecoder",
]


class RecordsWriterProtocol(Protocol):
    """Appends records to an uncompressed records section. Not thread-safe."""

    @property
    def record_count(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def first_timestamp(self) -> int: ...

    @property
    def max_timestamp(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    def append(
        self,
        timestamp_ms: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[HeaderIn] | None = None,
        /,
    ) -> int: ...

    def append_many(
        self,
        timestamps: Sequence[int],
        keys: Sequence[BytesLike | None],
        values: Sequence[BytesLike | None],
        headers: Sequence[Sequence[HeaderIn] | None] | None = None,
        /,
    ) -> int: ...

    def getvalue(self) -> bytes: ...

    def close(self) -> None: ...


class DecodeRecords(Protocol):
    """``(buf, start, end, count, base_offset, first_timestamp, last_offset_delta,
    timestamp_override) -> list[Record]``."""

    def __call__(  # noqa: PLR0917 - the C twin's positional signature
        self,
        buf: BytesLike,
        start: int,
        end: int,
        count: int,
        base_offset: int,
        first_timestamp: int,
        last_offset_delta: int,
        timestamp_override: int | None,
        /,
    ) -> list[Record]: ...


class DecodeColumns(Protocol):
    """Same arguments as ``DecodeRecords``; returns parallel lists."""

    def __call__(  # noqa: PLR0917 - the C twin's positional signature
        self,
        buf: BytesLike,
        start: int,
        end: int,
        count: int,
        base_offset: int,
        first_timestamp: int,
        last_offset_delta: int,
        timestamp_override: int | None,
        /,
    ) -> Columns: ...


class VarintDecoder(Protocol):
    def __call__(self, buf: BytesLike, pos: int = 0, /) -> tuple[int, int]: ...
