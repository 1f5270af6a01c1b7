"""Records inside a v2 batch: the ``Record`` type and the pure-Python per-record codec.

This is the reference implementation of the hot loops; ``_native/_crecords.c`` is its C twin
with the same functions, the same checks in the same order and the same error messages (the
test suite runs both and compares them byte for byte and error for error).

Layout of one record (all varints zigzag, see ``varint.py``)::

    length          varint   bytes of the rest of the record (attributes .. last header)
    attributes      int8     unused, 0 (ignored when reading, as Kafka does)
    timestampDelta  varlong  timestamp - batch first_timestamp (int64 wrap-around)
    offsetDelta     varint   offset - batch base_offset (0, 1, 2, ... when written)
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headerCount     varint
    headers         headerCount times:
        headerKeyLength    varint   (>= 0: header keys are never null)
        headerKey          utf-8
        headerValueLength  varint   -1 for a null value
        headerValue        bytes

A record is at least 7 bytes: a 1-byte length and a 6-byte body (attributes and five 1-byte
varints). Reading is strict and checks, in this order, per record: the section does not end
before ``count`` records (``RecordCountMismatchError``), the length varint (truncated:
``TruncatedBatchError``; overlong: ``VarintOverflowError``), ``6 <= length``
(``InvalidBatchLengthError``), the record fits the section (``TruncatedBatchError``), then each
field: its varint fits the record (``InvalidRecordLayoutError``) and its width
(``VarintOverflowError``); offset deltas are increasing, >= 0 and <= the batch's last offset
delta; lengths are >= -1 (>= 0 for header keys); header keys are UTF-8; the fields fill the
record exactly (all ``InvalidRecordLayoutError``). After ``count`` records the section must end
(``RecordCountMismatchError``).

Not thread-safe: a ``RecordsWriter`` belongs to one producer batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from strom.errors import (
    InvalidBatchLengthError,
    InvalidRecordLayoutError,
    RecordCountMismatchError,
    TruncatedBatchError,
    VarintOverflowError,
)
from strom.records.header import HEADER_SIZE, MAX_BATCH_SIZE
from strom.records.varint import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    read_unsigned,
    size_of_varint,
    write_varint,
)

__all__ = [
    "MAX_RECORDS_SIZE",
    "MIN_RECORD_BODY",
    "Header",
    "Record",
    "RecordsWriter",
    "decode_columns",
    "decode_records",
    "encode_records",
]

#: Largest records section (uncompressed) a batch may carry.
MAX_RECORDS_SIZE = MAX_BATCH_SIZE - HEADER_SIZE
#: Smallest record body: attributes plus five one-byte varints.
MIN_RECORD_BODY = 6

_U64 = 1 << 64
_MAX_COUNT = INT32_MAX

Header = tuple[str, bytes | None]
BytesLike = bytes | bytearray | memoryview


class Record(NamedTuple):
    """One record as read from a batch (cheap: a tuple)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def _wrap64(value: int) -> int:
    """Two's-complement wrap to int64, as Java's long arithmetic does."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    return (value + (1 << 63)) % _U64 - (1 << 63)


def _as_bytes(obj: object, what: str) -> bytes | None:
    if obj is None or type(obj) is bytes:
        return obj  # type: ignore[return-value]
    try:
        view = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be bytes-like or None, not {type(obj).__name__}") from None
    with view:
        if not view.c_contiguous:
            raise BufferError(f"{what} must be a C-contiguous buffer")
        return view.tobytes()


def _too_large() -> ValueError:
    return ValueError(f"record would make the records section larger than {MAX_RECORDS_SIZE} bytes")


class RecordsWriter:
    """Appends records to an uncompressed records section (the batch builder's engine).

    Tracks what the batch header needs: record count, first and max timestamp. Deltas are
    relative to the first record's timestamp and offset delta 0. A failed append leaves the
    writer as it was. Not thread-safe.
    """

    __slots__ = ("_buf", "_closed", "_count", "_first_ts", "_max_ts")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._count = 0
        self._first_ts = -1
        self._max_ts = -1
        self._closed = False

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def size(self) -> int:
        """Bytes of the records section so far."""
        return len(self._buf)

    @property
    def first_timestamp(self) -> int:
        """The first record's timestamp (the base of the deltas); -1 before any record."""
        return self._first_ts

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp; -1 before any record."""
        return self._max_ts

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Refuse further appends (the batch was built)."""
        self._closed = True

    def getvalue(self) -> bytes:
        """The records section written so far."""
        return bytes(self._buf)

    def append(
        self,
        timestamp_ms: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[tuple[str, BytesLike | None]] | None = None,
        /,
    ) -> int:
        """Append one record; returns its offset delta."""
        if self._closed:
            raise RuntimeError("the batch was built; no more records can be appended")
        return self._append(timestamp_ms, key, value, headers)

    def append_many(
        self,
        timestamps: Sequence[int],
        keys: Sequence[BytesLike | None],
        values: Sequence[BytesLike | None],
        headers: Sequence[Sequence[tuple[str, BytesLike | None]] | None] | None = None,
        /,
    ) -> int:
        """Append records from parallel sequences, all or none; returns the first offset delta."""
        if self._closed:
            raise RuntimeError("the batch was built; no more records can be appended")
        timestamps, keys, values = list(timestamps), list(keys), list(values)
        n = len(timestamps)
        header_list = None if headers is None else list(headers)
        if (
            len(keys) != n
            or len(values) != n
            or (header_list is not None and len(header_list) != n)
        ):
            raise ValueError("timestamps, keys, values and headers must have the same length")
        first = self._count
        saved = (len(self._buf), self._count, self._first_ts, self._max_ts)
        try:
            for i in range(n):
                self._append(
                    timestamps[i],
                    keys[i],
                    values[i],
                    None if header_list is None else header_list[i],
                )
        except BaseException:
            del self._buf[saved[0] :]
            self._count, self._first_ts, self._max_ts = saved[1:]
            raise
        return first

    def _append(
        self,
        timestamp_ms: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[tuple[str, BytesLike | None]] | None,
    ) -> int:
        if not isinstance(timestamp_ms, int):
            raise TypeError(f"timestamp_ms must be an int, not {type(timestamp_ms).__name__}")
        if not INT64_MIN <= timestamp_ms <= INT64_MAX:
            raise ValueError(f"timestamp_ms {timestamp_ms} is outside the int64 range")
        if self._count >= _MAX_COUNT:
            raise ValueError(f"a batch holds at most {_MAX_COUNT} records")
        key = _as_bytes(key, "key")
        value = _as_bytes(value, "value")
        buf = self._buf
        start = len(buf)
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        if klen + vlen > MAX_RECORDS_SIZE - start:
            raise _too_large()
        encoded_headers = None if headers is None else _encode_headers(headers, start)
        offset_delta = self._count
        first_ts = timestamp_ms if offset_delta == 0 else self._first_ts
        ts_delta = _wrap64(timestamp_ms - first_ts)

        body = _record_body(ts_delta, offset_delta, key, value, encoded_headers)
        if start + size_of_varint(len(body)) + len(body) > MAX_RECORDS_SIZE:
            raise _too_large()
        write_varint(buf, len(body))
        buf += body

        self._count = offset_delta + 1
        self._first_ts = first_ts
        if offset_delta == 0 or timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        return offset_delta


def _record_body(
    ts_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    encoded_headers: tuple[int, bytearray] | None,
) -> bytearray:
    """One record after its length varint: attributes, deltas, key, value, headers."""
    body = bytearray(b"\x00")
    write_varint(body, ts_delta)
    write_varint(body, offset_delta)
    write_varint(body, -1 if key is None else len(key))
    if key:
        body += key
    write_varint(body, -1 if value is None else len(value))
    if value:
        body += value
    if encoded_headers is None:
        body.append(0)
    else:
        write_varint(body, encoded_headers[0])
        body += encoded_headers[1]
    return body


def encode_records(records: Iterable[Record], base_offset: int, base_timestamp: int) -> bytes:
    """A records section for records that keep their own offsets and timestamps (deltas
    against ``base_offset`` and ``base_timestamp``): what compaction writes, where offsets
    have gaps. Not the producer's path (``RecordsWriter`` numbers records 0, 1, 2, ...)."""
    out = bytearray()
    for record in records:
        headers = _encode_headers(record.headers, len(out)) if record.headers else None
        body = _record_body(
            _wrap64(record.timestamp - base_timestamp),
            record.offset - base_offset,
            _as_bytes(record.key, "key"),
            _as_bytes(record.value, "value"),
            headers,
        )
        write_varint(out, len(body))
        out += body
    return bytes(out)


def _encode_headers(
    headers: Sequence[tuple[str, BytesLike | None]], start: int
) -> tuple[int, bytearray] | None:
    """(count, encoded headers) or None when there are none; checks every pair."""
    try:
        pairs = list(headers)
    except TypeError:
        raise TypeError("headers must be a sequence of (str, bytes | None) pairs") from None
    if not pairs:
        return None
    out = bytearray()
    for pair in pairs:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError("each header must be a (str, bytes | None) pair")
        hkey, hvalue = pair
        if not isinstance(hkey, str):
            raise TypeError(f"header key must be a str, not {type(hkey).__name__}")
        encoded_key = hkey.encode("utf-8")
        encoded_value = _as_bytes(hvalue, "header value")
        vlen = -1 if encoded_value is None else len(encoded_value)
        if len(encoded_key) + vlen > MAX_RECORDS_SIZE - start - len(out):
            raise _too_large()
        write_varint(out, len(encoded_key))
        out += encoded_key
        write_varint(out, vlen)
        if encoded_value:
            out += encoded_value
    return len(pairs), out


class _Reader:
    """Cursor over a records section; raises the errors named in the module docstring."""

    __slots__ = ("base", "buf", "end", "index", "pos", "rec_end", "rec_start")

    def __init__(self, buf: bytes, start: int, end: int) -> None:
        self.buf = buf
        self.pos = start
        self.end = end
        self.base = start
        self.index = 0
        self.rec_start = 0
        self.rec_end = 0

    def where(self) -> str:
        return f"record {self.index} at byte {self.rec_start - self.base}"

    def field(self, name: str, bits: int = 32) -> int:
        """Read one zigzag varint field of the current record."""
        buf, pos, rec_end = self.buf, self.pos, self.rec_end
        if pos < rec_end:  # fast paths: one- and two-byte varints cannot overflow
            byte = buf[pos]
            if byte < 0x80:
                self.pos = pos + 1
                return (byte >> 1) ^ -(byte & 1)
            if pos + 1 < rec_end and buf[pos + 1] < 0x80:
                unsigned = (byte & 0x7F) | (buf[pos + 1] << 7)
                self.pos = pos + 2
                return (unsigned >> 1) ^ -(unsigned & 1)
        packed = read_unsigned(buf, pos, rec_end, bits)
        if packed == -1:
            raise InvalidRecordLayoutError(
                f"{self.where()}: {name} runs past the end of the record"
            )
        if packed == -2:
            raise VarintOverflowError(f"{self.where()}: {name} overflows {bits} bits")
        self.pos = pos + (packed & 0xFF)
        unsigned = packed >> 8
        return (unsigned >> 1) ^ -(unsigned & 1)

    def chunk(self, length: int, name: str) -> bytes:
        pos = self.pos
        if length > self.rec_end - pos:
            raise InvalidRecordLayoutError(
                f"{self.where()}: {name} runs past the end of the record"
            )
        self.pos = pos + length
        return self.buf[pos : pos + length]

    def begin(self, count: int) -> None:
        """Position on record ``self.index``: read and check its length."""
        buf, pos, end = self.buf, self.pos, self.end
        self.rec_start = pos
        if pos >= end:
            raise RecordCountMismatchError(
                f"batch says {count} records, its records section ends after {self.index}"
            )
        packed = read_unsigned(buf, pos, end, 32)
        if packed == -1:
            raise TruncatedBatchError(f"{self.where()}: length varint is truncated")
        if packed == -2:
            raise VarintOverflowError(f"{self.where()}: length overflows 32 bits")
        unsigned = packed >> 8
        length = (unsigned >> 1) ^ -(unsigned & 1)
        pos += packed & 0xFF
        if length < MIN_RECORD_BODY:
            raise InvalidBatchLengthError(
                f"{self.where()}: length {length} is below the minimum of {MIN_RECORD_BODY}"
            )
        if length > end - pos:
            raise TruncatedBatchError(
                f"{self.where()}: length {length} runs past the end of the records section "
                f"({end - pos} bytes left)"
            )
        self.pos = pos + 1  # attributes: unused
        self.rec_end = pos + length

    def record(
        self,
        first_timestamp: int,
        timestamp_override: int | None,
        last_offset_delta: int,
        prev: int,
    ) -> tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]:
        """The fields of the current record: (offset delta, timestamp, key, value, headers)."""
        ts_delta = self.field("timestamp delta", 64)
        offset_delta = self.field("offset delta")
        if offset_delta <= prev or offset_delta > last_offset_delta:
            raise InvalidRecordLayoutError(
                f"{self.where()}: offset delta {offset_delta} is out of order or beyond the "
                f"last offset delta {last_offset_delta}"
            )
        if timestamp_override is None:
            timestamp = _wrap64(first_timestamp + ts_delta)
        else:
            timestamp = timestamp_override
        key = self.nullable("key")
        value = self.nullable("value")
        n_headers = self.field("header count")
        if n_headers < 0:
            raise InvalidRecordLayoutError(f"{self.where()}: header count {n_headers} is negative")
        headers: tuple[Header, ...] = ()
        if n_headers:
            if n_headers > (self.rec_end - self.pos) // 2:
                raise InvalidRecordLayoutError(
                    f"{self.where()}: header count {n_headers} runs past the end of the record"
                )
            headers = tuple(self.header() for _ in range(n_headers))
        if self.pos != self.rec_end:
            raise InvalidRecordLayoutError(
                f"{self.where()}: {self.rec_end - self.pos} bytes left over inside the record"
            )
        return offset_delta, timestamp, key, value, headers

    def nullable(self, name: str) -> bytes | None:
        length = self.field(f"{name} length")
        if length < 0:
            if length == -1:
                return None
            raise InvalidRecordLayoutError(f"{self.where()}: {name} length {length} is negative")
        return self.chunk(length, name)

    def header(self) -> Header:
        klen = self.field("header key length")
        if klen < 0:
            raise InvalidRecordLayoutError(f"{self.where()}: header key length {klen} is negative")
        raw_key = self.chunk(klen, "header key")
        try:
            hkey = raw_key.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecordLayoutError(
                f"{self.where()}: header key is not valid UTF-8"
            ) from None
        return hkey, self.nullable("header value")


def _prepare(  # noqa: PLR0917 - internal helper of the two decoders
    buf: BytesLike, start: int, end: int, count: int, base_offset: int, last_offset_delta: int
) -> tuple[bytes, int, int]:
    if not 0 <= start <= end <= len(buf):
        raise ValueError(f"records section [{start}, {end}) is outside the buffer")
    if not 0 <= count <= _MAX_COUNT:
        raise ValueError(f"record count {count} is out of range")
    if not 0 <= last_offset_delta <= INT32_MAX:
        raise ValueError(f"last offset delta {last_offset_delta} is out of range")
    if base_offset > INT64_MAX - last_offset_delta:
        raise InvalidRecordLayoutError(
            f"base offset {base_offset} plus last offset delta {last_offset_delta} overflows int64"
        )
    if type(buf) is not bytes:
        buf = bytes(memoryview(buf)[start:end])
        start, end = 0, len(buf)
    return buf, start, end  # type: ignore[return-value]


def decode_records(  # noqa: PLR0917 - positional, as its C twin
    buf: BytesLike,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    first_timestamp: int,
    last_offset_delta: int,
    timestamp_override: int | None,
) -> list[Record]:
    """Decode the ``count`` records filling ``buf[start:end]`` (an uncompressed section).

    ``timestamp_override`` replaces every record's timestamp (LogAppendTime batches).
    """
    data, start, end = _prepare(buf, start, end, count, base_offset, last_offset_delta)
    reader = _Reader(data, start, end)
    records: list[Record] = []
    prev = -1
    make = Record._make
    for index in range(count):
        reader.index = index
        reader.begin(count)
        delta, timestamp, key, value, headers = reader.record(
            first_timestamp, timestamp_override, last_offset_delta, prev
        )
        prev = delta
        records.append(make((base_offset + delta, timestamp, key, value, headers)))
    _check_end(reader, count)
    return records


def decode_columns(  # noqa: PLR0917 - positional, as its C twin
    buf: BytesLike,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    first_timestamp: int,
    last_offset_delta: int,
    timestamp_override: int | None,
) -> tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[tuple[Header, ...]]]:
    """Like ``decode_records``, as parallel lists (offsets, timestamps, keys, values, headers)."""
    data, start, end = _prepare(buf, start, end, count, base_offset, last_offset_delta)
    reader = _Reader(data, start, end)
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers_list: list[tuple[Header, ...]] = []
    prev = -1
    for index in range(count):
        reader.index = index
        reader.begin(count)
        delta, timestamp, key, value, headers = reader.record(
            first_timestamp, timestamp_override, last_offset_delta, prev
        )
        prev = delta
        offsets.append(base_offset + delta)
        timestamps.append(timestamp)
        keys.append(key)
        values.append(value)
        headers_list.append(headers)
    _check_end(reader, count)
    return offsets, timestamps, keys, values, headers_list


def _check_end(reader: _Reader, count: int) -> None:
    if reader.pos != reader.end:
        raise RecordCountMismatchError(
            f"batch says {count} records, but {reader.end - reader.pos} bytes follow the last one"
        )
