"""Types of the C twin of strom.records.record (see _crecords.c)."""

from collections.abc import Sequence

from strom.records._protocols import BytesLike, Columns, HeaderIn
from strom.records.record import Record

class RecordsWriter:
    """Appends records to an uncompressed records section. Not thread-safe."""

    def __init__(self) -> None: ...
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

def decode_records(
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
def decode_columns(
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
def encode_varint(value: int, /) -> bytes: ...
def encode_varlong(value: int, /) -> bytes: ...
def decode_varint(buf: BytesLike, pos: int = 0, /) -> tuple[int, int]: ...
def decode_varlong(buf: BytesLike, pos: int = 0, /) -> tuple[int, int]: ...
