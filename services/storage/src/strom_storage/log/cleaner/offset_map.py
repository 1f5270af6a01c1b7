"""A fixed-capacity map from a key's hash to the latest offset seen for it.

The cleaner's memory bound: ``memory_bytes`` is allocated once as a flat ``bytearray`` of
slots, each a 16-byte BLAKE2b digest of the key followed by an 8-byte big-endian offset
(24 bytes a slot), with open addressing and linear probing. ``capacity`` (slots times
``load_factor``) is how many distinct keys fit; the cleaner stops filling the map before it is
reached and cleans the rest of the log in a later pass. Two keys with the same 128-bit digest
would be confused; the odds are negligible (Kafka's SkimpyOffsetMap makes the same trade).

Slot layout::

    offset size field
         0   16 digest    BLAKE2b-128 of the key (all zero: empty slot)
        16    8 offset    int64, the latest offset of a record with this key

Thread-safety: not thread-safe; one cleaning pass owns it.
"""

from __future__ import annotations

import hashlib
import struct

__all__ = ["OffsetMap"]

_DIGEST = 16
_SLOT = _DIGEST + 8
_OFFSET = struct.Struct(">q")
_EMPTY = bytes(_DIGEST)


class OffsetMap:
    """Key digest -> latest offset, in ``memory_bytes`` of memory (see module docstring).

    Thread-safety: not thread-safe; one cleaning pass owns it.
    """

    def __init__(self, memory_bytes: int, *, load_factor: float = 0.9) -> None:
        self.slots = max(memory_bytes // _SLOT, 2)
        self.capacity = max(int(self.slots * load_factor), 1)
        self._buf = bytearray(self.slots * _SLOT)
        self._size = 0
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return self._size

    @property
    def free(self) -> int:
        """How many more distinct keys fit."""
        return self.capacity - self._size

    def clear(self) -> None:
        self._buf = bytearray(len(self._buf))
        self._size = 0
        self.latest_offset = -1

    @staticmethod
    def _digest(key: bytes) -> bytes:
        digest = hashlib.blake2b(key, digest_size=_DIGEST).digest()
        return digest if digest != _EMPTY else b"\x01" + digest[1:]

    def _find(self, digest: bytes) -> int:
        """Position of ``digest``'s slot, or of the empty slot where it would go."""
        slot = int.from_bytes(digest[:8], "big") % self.slots
        buf = self._buf
        while True:
            pos = slot * _SLOT
            current = bytes(buf[pos : pos + _DIGEST])
            if current in (digest, _EMPTY):
                return pos
            slot = (slot + 1) % self.slots

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` for ``key``; raises when a new key does not fit."""
        digest = self._digest(key)
        pos = self._find(digest)
        if self._buf[pos : pos + _DIGEST] == _EMPTY:
            if self._size >= self.capacity:
                raise OverflowError("offset map is full")
            self._buf[pos : pos + _DIGEST] = digest
            self._size += 1
        _OFFSET.pack_into(self._buf, pos + _DIGEST, offset)
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int | None:
        """The latest offset recorded for ``key``, or None."""
        digest = self._digest(key)
        pos = self._find(digest)
        if self._buf[pos : pos + _DIGEST] == _EMPTY:
            return None
        return _OFFSET.unpack_from(self._buf, pos + _DIGEST)[0]
