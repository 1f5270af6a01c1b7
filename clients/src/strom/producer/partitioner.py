"""Partition choice: Kafka's murmur2 for keyed records, a sticky partition for keyless ones.

``murmur2`` is the 32-bit MurmurHash2 variant Kafka's Java client uses (seed 0x9747b28c, the
tail bytes mixed in little-endian order, signed 32-bit result), and ``murmur2_partition`` is
its default partitioner: ``(murmur2(key) & 0x7fffffff) % num_partitions``. The same key lands
on the same partition as with any Kafka client for the same partition count.

A custom partitioner is any callable ``(topic, key_bytes, num_partitions) -> partition``.
Both functions are bound to their C twins (``strom.producer._native``) when it is built; the
pure-Python ones stay as the reference (``murmur2_py``, ``murmur2_partition_py``).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from strom.producer import _native

__all__ = [
    "Partitioner",
    "StickyPartitioner",
    "murmur2",
    "murmur2_partition",
    "murmur2_partition_py",
    "murmur2_py",
]

#: A custom partitioner: ``(topic, serialized key or None, partition count) -> partition``.
Partitioner = Callable[[str, bytes | None, int], int]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2_py(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the signed 32-bit hash of ``data`` (pure Python)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length & ~3
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail == 3:
        h ^= data[end + 2] << 16
    if tail >= 2:
        h ^= data[end + 1] << 8
    if tail >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition_py(key: bytes, num_partitions: int) -> int:
    """Kafka's default partition for a keyed record: ``toPositive(murmur2(key)) % n``."""
    return (murmur2_py(key) & 0x7FFFFFFF) % num_partitions


murmur2: Callable[[bytes], int] = _native.murmur2 or murmur2_py
murmur2_partition: Callable[[bytes, int], int] = _native.murmur2_partition or murmur2_partition_py


class StickyPartitioner:
    """Keyless records stick to one partition per topic until its batch closes (Kafka 2.4+):
    fuller batches, fewer requests. ``next()`` picks another partition at random."""

    __slots__ = ("_current",)

    def __init__(self) -> None:
        self._current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        current = self._current.get(topic)
        if current is None or current >= num_partitions:
            current = self._current[topic] = random.randrange(num_partitions)
        return current

    def next(self, topic: str, num_partitions: int, previous: int) -> None:
        """The batch of ``previous`` closed: move on (no-op if another thread already did)."""
        if self._current.get(topic) != previous:
            return
        if num_partitions <= 1:
            self._current[topic] = 0
            return
        choice = random.randrange(num_partitions - 1)
        self._current[topic] = choice + 1 if choice >= previous else choice
