"""Big-endian primitives of Kafka's classic (non-flexible) message encoding.

int16/int32 integers; strings with an int16 length (-1 = null); bytes with an int32 length
(-1 = null); arrays with an int32 count. The consumer protocol and the sticky assignors' user
data are written with these.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import TypeVar

from strom.errors import InconsistentGroupProtocolError

T = TypeVar("T")

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class Writer:
    """Appends fields to a growing buffer."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int16(self, value: int) -> None:
        self._parts.append(_INT16.pack(value))

    def int32(self, value: int) -> None:
        self._parts.append(_INT32.pack(value))

    def string(self, value: str | None) -> None:
        if value is None:
            self.int16(-1)
            return
        data = value.encode()
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
        self.int16(len(data))
        self._parts.append(data)

    def bytes_(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1)
            return
        self.int32(len(value))
        self._parts.append(bytes(value))

    def array(self, items: Iterable[T], write: Callable[[T], None]) -> None:
        items = list(items)
        self.int32(len(items))
        for item in items:
            write(item)

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


class Reader:
    """Reads fields from ``data``; every failure raises ``InconsistentGroupProtocolError``
    whose message names ``what`` is being decoded and the field that is wrong."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = memoryview(bytes(data))
        self._pos = 0
        self.what = what

    def fail(self, problem: str) -> InconsistentGroupProtocolError:
        return InconsistentGroupProtocolError(f"malformed {self.what}: {problem}")

    def _take(self, size: int, field: str) -> memoryview:
        end = self._pos + size
        if end > len(self._data):
            raise self.fail(
                f"{field} needs {size} bytes at offset {self._pos}, "
                f"only {len(self._data) - self._pos} left"
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int16(self, field: str) -> int:
        value: int = _INT16.unpack(self._take(2, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = _INT32.unpack(self._take(4, field))[0]
        return value

    def string(self, field: str, *, nullable: bool = False) -> str | None:
        size = self.int16(f"{field} length")
        if size == -1 and nullable:
            return None
        if size < 0:
            raise self.fail(f"{field} has invalid length {size}")
        try:
            return str(self._take(size, field), "utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{field} is not valid UTF-8") from exc

    def required_string(self, field: str) -> str:
        value = self.string(field)
        assert value is not None
        return value

    def bytes_(self, field: str) -> bytes | None:
        size = self.int32(f"{field} length")
        if size == -1:
            return None
        if size < 0:
            raise self.fail(f"{field} has invalid length {size}")
        return bytes(self._take(size, field))

    def array(self, field: str, read: Callable[[], T]) -> list[T]:
        count = self.int32(f"{field} count")
        if count < 0:
            raise self.fail(f"{field} has invalid count {count}")
        # Every element takes at least 2 bytes: a garbled count fails here, not after a long loop.
        if count * 2 > self.remaining:
            raise self.fail(f"{field} count {count} exceeds the {self.remaining} bytes left")
        return [read() for _ in range(count)]

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def expect_end(self) -> None:
        if self.remaining:
            raise self.fail(f"{self.remaining} trailing bytes after the last field")
