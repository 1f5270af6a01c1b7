"""murmur2 as Kafka's default partitioner computes it, and the sticky partitioner."""

from __future__ import annotations

import pytest

from strom.producer.partitioner import StickyPartitioner, murmur2, murmur2_partition

# Kafka's UtilsTest.testMurmur2 vectors (signed 32-bit results of Utils.murmur2).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def _reference_murmur2(data: bytes) -> int:
    """Straight transcription of the published MurmurHash2 (seed 0x9747b28c, Kafka's), kept
    independent of the implementation's structure."""
    m, r = 0x5BD1E995, 24
    h = 0x9747B28C ^ len(data)
    rest = len(data)
    i = 0
    while rest >= 4:
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) % 2**32
        k ^= k >> r
        k = (k * m) % 2**32
        h = (h * m) % 2**32
        h ^= k
        i += 4
        rest -= 4
    if rest == 3:
        h ^= data[i + 2] << 16
    if rest >= 2:
        h ^= data[i + 1] << 8
    if rest >= 1:
        h ^= data[i]
        h = (h * m) % 2**32
    h ^= h >> 13
    h = (h * m) % 2**32
    h ^= h >> 15
    return h - 2**32 if h >= 2**31 else h


def test_murmur2_every_tail_length_and_high_bytes() -> None:
    for n in range(40):
        data = bytes((i * 37 + 200) % 256 for i in range(n))
        assert murmur2(data) == _reference_murmur2(data)


def test_partition_is_to_positive_mod_n() -> None:
    # toPositive(x) = x & 0x7fffffff; e.g. murmur2(b"21") = -973932308.
    assert murmur2_partition(b"21", 6) == (-973932308 & 0x7FFFFFFF) % 6
    assert murmur2_partition(b"abc", 10) == 479470107 % 10
    assert {murmur2_partition(str(i).encode(), 3) for i in range(100)} == {0, 1, 2}
    assert murmur2(b"") == _reference_murmur2(b"")


def test_sticky_partitioner_moves_only_when_told() -> None:
    sticky = StickyPartitioner()
    first = sticky.partition("t", 5)
    assert all(sticky.partition("t", 5) == first for _ in range(10))
    sticky.next("t", 5, first)
    second = sticky.partition("t", 5)
    assert second != first and 0 <= second < 5
    sticky.next("t", 5, first)  # stale notice (another thread moved already): ignored
    assert sticky.partition("t", 5) == second
    single = StickyPartitioner()
    assert single.partition("u", 1) == 0
    single.next("u", 1, 0)
    assert single.partition("u", 1) == 0
