"""Offset and time indexes: binary search, sparse spacing, mmap, trim, truncate, laziness."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.errors import StorageError
from strom_storage.log.offset_index import OffsetIndex, OffsetPosition
from strom_storage.log.time_index import TimeIndex, TimestampOffset


def _offset_index(tmp_path: Path, writable: bool = True, size: int = 8 * 100) -> OffsetIndex:
    return OffsetIndex(tmp_path / "00000000000000000100.index", 100, max_index_size=size,
                       writable=writable)  # fmt: skip


def test_offset_index_binary_search(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    for i in range(50):
        index.append(100 + i * 10, i * 1000)
    assert index.entries == 50
    assert index.lookup(99) == OffsetPosition(100, 0)
    assert index.lookup(100) == OffsetPosition(100, 0)
    assert index.lookup(105) == OffsetPosition(100, 0)
    assert index.lookup(110) == OffsetPosition(110, 1000)
    assert index.lookup(599) == OffsetPosition(590, 49000)
    assert index.lookup(10_000) == OffsetPosition(590, 49000)


def test_offset_index_rejects_non_increasing_and_full(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, size=8 * 2)
    index.append(101, 10)
    with pytest.raises(StorageError):
        index.append(101, 20)
    index.append(102, 20)
    assert index.is_full
    with pytest.raises(StorageError):
        index.append(103, 30)


def test_preallocated_then_trimmed_and_reopened_lazily(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    index.append(110, 100)
    index.append(120, 200)
    assert index.path.stat().st_size == 800  # preallocated and memory-mapped
    index.trim_to_valid_size()
    assert index.path.stat().st_size == 16
    reopened = _offset_index(tmp_path, writable=False)
    assert not reopened.is_open  # lazy: nothing mapped yet
    assert reopened.sanity_check()
    assert reopened.lookup(125) == OffsetPosition(120, 200)
    assert reopened.is_open


def test_truncate_to(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    for i in range(10):
        index.append(100 + i, i * 10)
    index.truncate_to(105)
    assert index.entries == 5
    assert index.last_entry() == OffsetPosition(104, 40)
    index.append(105, 50)  # appending continues after truncation
    assert index.entries == 6


def test_sanity_check_fails_on_torn_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(b"\x00" * 13)
    assert not OffsetIndex(path, 100, max_index_size=800).sanity_check()


def test_time_index_lookup_and_monotonic(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=1200,
                      writable=True)  # fmt: skip
    assert index.lookup(5) == TimestampOffset(-1, 0)
    assert index.maybe_append(1000, 0)
    assert not index.maybe_append(1000, 5)  # timestamps must grow
    assert index.maybe_append(2000, 10)
    assert index.maybe_append(3000, 20)
    assert index.lookup(999) == TimestampOffset(-1, 0)
    assert index.lookup(1500) == TimestampOffset(1000, 0)
    assert index.lookup(2000) == TimestampOffset(2000, 10)
    assert index.lookup(9999) == TimestampOffset(3000, 20)
    index.truncate_to(10)
    assert index.entries == 1
