"""One encoder and one decoder for every message ``messages`` describes.

Both walk a ``Struct``'s plan for a version: non-flexible versions use Kafka's classic types
(int16-length strings, int32-length bytes and arrays, -1 for null), flexible versions the compact
ones (unsigned-varint length + 1, 0 for null) and a tagged-field section after every struct.
Unknown tagged fields are skipped. Every read is bounds-checked: a truncated body, a negative or
oversized length, a null where the version allows none, or bytes left over raise
``MalformedMessageError``. ``records`` fields stay bytes (a view of the frame, never decoded).
"""

from __future__ import annotations

import struct as _struct
from typing import Any

from strom_gateway.kafka.protocol.schema import Field, Struct

__all__ = ["MalformedMessageError", "Reader", "Writer", "decode", "encode"]

_I8 = _struct.Struct(">b")
_I16 = _struct.Struct(">h")
_U16 = _struct.Struct(">H")
_I32 = _struct.Struct(">i")
_I64 = _struct.Struct(">q")
_F64 = _struct.Struct(">d")


class MalformedMessageError(ValueError):
    """The bytes do not form the message they claim to be."""


class Reader:
    """Bounds-checked reads from one frame."""

    __slots__ = ("buf", "end", "pos")

    def __init__(
        self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
    ) -> None:
        self.buf = memoryview(buf)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, n: int) -> memoryview:
        if n < 0:
            raise MalformedMessageError(f"negative size {n}")
        if n > self.end - self.pos:
            raise MalformedMessageError(
                f"needs {n} bytes at offset {self.pos}, only {self.end - self.pos} left"
            )
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def fixed(self, codec: _struct.Struct) -> Any:
        return codec.unpack(self.take(codec.size))[0]

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise MalformedMessageError("unsigned varint longer than 5 bytes")

    def length(self, compact: bool) -> int | None:
        """A string/bytes length: None for null."""
        n = self.uvarint() - 1 if compact else self.fixed(_I16)
        if n < -1:
            raise MalformedMessageError(f"negative length {n}")
        return None if n == -1 else n

    def count(self, compact: bool, *, wide: bool = True) -> int | None:
        """An array count or int32 bytes length: None for null; never more than the bytes
        left (each element takes at least one)."""
        n = self.uvarint() - 1 if compact else self.fixed(_I32 if wide else _I16)
        if n < -1:
            raise MalformedMessageError(f"negative length {n}")
        if n > self.remaining:
            raise MalformedMessageError(f"length {n} exceeds the {self.remaining} bytes left")
        return None if n == -1 else n


class Writer:
    """Appends encoded parts; ``getvalue`` joins them once."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []

    def fixed(self, codec: _struct.Struct, value: Any) -> None:
        self.parts.append(codec.pack(value))

    def raw(self, data: bytes | memoryview) -> None:
        self.parts.append(data)

    def uvarint(self, value: int) -> None:
        if 0 <= value < 0x80:  # lengths, counts, tags: nearly always one byte
            self.parts.append(_ONE_BYTE[value])
            return
        out = bytearray()
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self.parts.append(bytes(out))

    def length(self, n: int | None, compact: bool, wide: bool) -> None:
        """A length/count prefix (None: null)."""
        if compact:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.fixed(_I32 if wide else _I16, -1 if n is None else n)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)

    def size(self) -> int:
        return sum(len(p) for p in self.parts)


# -- primitives ---------------------------------------------------------------------------------

_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
_NO_TAGS = b"\x00"
#: Each tagged field's default, to compare against (never handed out: lists and dicts).
_DEFAULTS: dict[int, Any] = {}


def _is_default(f: Field, value: Any) -> bool:
    default = _DEFAULTS.get(id(f))
    if default is None:
        default = _DEFAULTS[id(f)] = f.zero()
    return bool(value == default)


_FIXED = {"int8": _I8, "int16": _I16, "uint16": _U16, "int32": _I32, "int64": _I64,
          "float64": _F64}  # fmt: skip


def _read_primitive(r: Reader, f: Field, kind: str, version: int, compact: bool) -> Any:
    codec = _FIXED.get(kind)
    if codec is not None:
        return r.fixed(codec)
    if kind == "bool":
        return r.take(1)[0] != 0
    if kind == "uuid":
        return bytes(r.take(16))
    if kind == "string":
        n = r.length(compact)
        if n is None:
            _null(f, version)
            return None
        try:
            return str(r.take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedMessageError(f"{f.name}: not UTF-8") from exc
    # bytes, records
    n = r.count(compact) if compact else _bytes_length(r)
    if n is None:
        _null(f, version)
        return None
    view = r.take(n)
    return view if kind == "records" else bytes(view)


def _bytes_length(r: Reader) -> int | None:
    n = r.fixed(_I32)
    if n < -1:
        raise MalformedMessageError(f"negative length {n}")
    if n > r.remaining:
        raise MalformedMessageError(f"length {n} exceeds the {r.remaining} bytes left")
    return None if n == -1 else n


def _null(f: Field, version: int) -> None:
    """A null where ``f`` allows one (the caller returns None), else an error."""
    if version not in f.nullable:
        raise MalformedMessageError(f"{f.name}: null in version {version}, which has no null")


def _write_primitive(w: Writer, kind: str, value: Any, compact: bool) -> None:
    codec = _FIXED.get(kind)
    if codec is not None:
        w.fixed(codec, value)
    elif kind == "bool":
        w.raw(b"\x01" if value else b"\x00")
    elif kind == "uuid":
        if len(value) != 16:
            raise ValueError(f"a uuid is 16 bytes, not {len(value)}")
        w.raw(value)
    elif kind == "string":
        if value is None:
            w.length(None, compact, wide=False)
        else:
            data = value.encode()
            w.length(len(data), compact, wide=False)
            w.raw(data)
    elif value is None:  # bytes, records
        w.length(None, compact, wide=True)
    else:
        w.length(len(value), compact, wide=True)
        w.raw(value)


# -- structs ------------------------------------------------------------------------------------


def _read_value(r: Reader, f: Field, version: int, flexible: bool) -> Any:
    if f.array:
        n = r.count(flexible)
        if n is None:
            _null(f, version)
            return None
        if isinstance(f.type, Struct):
            return [_read_struct(r, f.type, version, flexible) for _ in range(n)]
        return [_read_primitive(r, f, f.type, version, flexible) for _ in range(n)]
    if isinstance(f.type, Struct):
        return _read_struct(r, f.type, version, flexible)
    return _read_primitive(r, f, f.type, version, flexible)


def _read_struct(r: Reader, s: Struct, version: int, flexible: bool) -> dict[str, Any]:
    plain, tagged = s.plan(version, flexible)
    out: dict[str, Any] = {}
    for f in plain:
        out[f.name] = _read_value(r, f, version, flexible)
    tag_count = r.uvarint() if flexible else 0
    if tag_count:
        by_tag = {f.tag: f for f in tagged}
        for _ in range(tag_count):
            tag = r.uvarint()
            size = r.uvarint()
            known = by_tag.get(tag)
            if known is None:
                r.take(size)
                continue
            inner = Reader(r.buf, r.pos, r.pos + size)
            r.take(size)
            out[known.name] = _read_value(inner, known, version, flexible)
            if inner.remaining:
                raise MalformedMessageError(f"{known.name}: {inner.remaining} bytes left over")
    for f in s.fields:
        if f.name not in out:
            out[f.name] = f.zero()
    return out


def _write_value(w: Writer, f: Field, value: Any, version: int, flexible: bool) -> None:
    if f.array:
        if value is None:
            if version not in f.nullable:
                raise ValueError(f"{f.name}: null in version {version}, which has no null")
            w.length(None, flexible, wide=True)
            return
        w.length(len(value), flexible, wide=True)
        if isinstance(f.type, Struct):
            for item in value:
                _write_struct(w, f.type, item, version, flexible)
        else:
            for item in value:
                _write_primitive(w, f.type, item, flexible)
        return
    if isinstance(f.type, Struct):
        _write_struct(w, f.type, value, version, flexible)
        return
    if value is None and f.type != "records" and version not in f.nullable:
        raise ValueError(f"{f.name}: null in version {version}, which has no null")
    _write_primitive(w, f.type, value, flexible)


def _write_struct(
    w: Writer, s: Struct, value: dict[str, Any], version: int, flexible: bool
) -> None:
    plain, tagged = s.plan(version, flexible)
    for f in plain:
        _write_value(w, f, value[f.name] if f.name in value else f.zero(), version, flexible)
    if flexible:
        if not tagged:
            w.parts.append(_NO_TAGS)
            return
        present = [
            (f, value[f.name])
            for f in tagged
            if value.get(f.name) is not None and not _is_default(f, value[f.name])
        ]  # Kafka writes a tagged field only when it differs from its default
        w.uvarint(len(present))
        for f, item in present:
            inner = Writer()
            _write_value(inner, f, item, version, flexible)
            w.uvarint(f.tag or 0)
            w.uvarint(inner.size())
            w.parts.extend(inner.parts)


def decode(
    s: Struct,
    version: int,
    flexible: bool,
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    exact: bool = True,
) -> dict[str, Any]:
    """The message ``s`` at ``version`` from ``buf[pos:]``, which it must fill exactly unless
    ``exact`` is false (Kafka brokers ignore bytes after a request, and librdkafka sends some
    after a Metadata v12 request)."""
    r = Reader(buf, pos)
    try:
        out = _read_struct(r, s, version, flexible)
    except (_struct.error, IndexError) as exc:
        raise MalformedMessageError(str(exc)) from exc
    if exact and r.remaining:
        raise MalformedMessageError(f"{r.remaining} bytes left after {s.name} v{version}")
    return out


def encode_into(w: Writer, s: Struct, version: int, flexible: bool, value: dict[str, Any]) -> None:
    """Append ``value`` as the message ``s`` at ``version``."""
    _write_struct(w, s, value, version, flexible)


def encode(s: Struct, version: int, flexible: bool, value: dict[str, Any]) -> bytes:
    """``value`` as the message ``s`` at ``version`` (missing fields take their zero value)."""
    w = Writer()
    _write_struct(w, s, value, version, flexible)
    return w.getvalue()
