"""LogSegment: append, read semantics, offset translation, truncation, recovery."""

from __future__ import annotations

from pathlib import Path

from storage_batches import simple_batch

from strom.records.header import walk_batches
from strom_storage.log.segment import LogSegment


def _segment(tmp_path: Path, base: int = 0, interval: int = 100) -> LogSegment:
    return LogSegment(tmp_path, base, index_interval_bytes=interval, max_index_size=4096,
                      created_ms=0, writable=True)  # fmt: skip


def _fill(segment: LogSegment, count: int, records: int = 2, base: int = 0) -> list[bytes]:
    batches = []
    offset = base
    for i in range(count):
        data = simple_batch(records, base_offset=offset, ts=1000 + i * 10)
        segment.append(data, walk_batches(data))
        batches.append(data)
        offset += records
    return batches


def test_sparse_index_and_translate(tmp_path: Path) -> None:
    segment = _segment(tmp_path, interval=200)
    batches = _fill(segment, 30)
    size = len(batches[0])
    assert segment.size == 30 * size
    entries = segment.offset_index.entries
    assert 0 < entries < 30  # sparse
    for offset in range(60):
        location = segment.translate_offset(offset)
        assert location is not None
        assert location.header.base_offset == offset - offset % 2
        assert location.position == (offset // 2) * size
    assert segment.translate_offset(60) is None
    assert segment.read_next_offset() == 60


def test_read_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    batches = _fill(segment, 10)
    size = len(batches[0])
    result = segment.read(0, size * 3 + size // 2)
    assert result is not None
    assert result[1] == b"".join(batches[:3])
    # An offset in the middle of a batch returns that batch.
    result = segment.read(5, size)
    assert result is not None and result[1] == batches[2]
    # Below one batch: the first batch whole with min-one semantics, nothing without.
    result = segment.read(0, 10)
    assert result is not None and result[1] == batches[0]
    result = segment.read(0, 10, min_one_batch=False)
    assert result is not None and result[1] == b""
    # max_offset stops before a batch starting at or above it.
    result = segment.read(0, 1 << 20, max_offset=6)
    assert result is not None and result[1] == b"".join(batches[:3])
    # max_position bounds the bytes read.
    result = segment.read(0, 1 << 20, max_position=size * 2)
    assert result is not None and result[1] == b"".join(batches[:2])


def test_truncate_to_keeps_batches_below(tmp_path: Path) -> None:
    segment = _segment(tmp_path, interval=50)
    batches = _fill(segment, 10)
    removed = segment.truncate_to(8)
    assert removed == len(batches[0]) * 6
    assert segment.read_next_offset() == 8
    assert segment.offset_index.last_entry().offset < 8
    data = simple_batch(2, base_offset=8, ts=5000)
    segment.append(data, walk_batches(data))
    assert segment.read_next_offset() == 10
    assert segment.max_timestamp == 5000


def test_recover_truncates_torn_tail_and_rebuilds_index(tmp_path: Path) -> None:
    segment = _segment(tmp_path, interval=50)
    batches = _fill(segment, 10)
    entries = segment.offset_index.entries
    size = len(batches[0])
    segment.close()
    with open(tmp_path / "00000000000000000000.log", "r+b") as f:
        f.truncate(size * 7 + 20)
    (tmp_path / "00000000000000000000.index").unlink()
    reopened = _segment(tmp_path, interval=50)
    seen: list[int] = []
    truncated = reopened.recover(lambda h: seen.append(h.base_offset))
    assert truncated == 20
    assert seen == [0, 2, 4, 6, 8, 10, 12]
    assert reopened.size == size * 7
    assert 0 < reopened.offset_index.entries <= entries
    assert reopened.read_next_offset() == 14


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment = _segment(tmp_path, interval=50)
    _fill(segment, 10)  # batch i has timestamp 1000 + 10 i, offsets 2i, 2i+1
    found = segment.find_offset_by_timestamp(1035)
    assert found is not None and found.offset == 8 and found.timestamp == 1040
    found = segment.find_offset_by_timestamp(0)
    assert found is not None and found.offset == 0
    assert segment.find_offset_by_timestamp(2000) is None
    found = segment.find_offset_by_timestamp(1000, starting_offset=5)
    assert found is not None and found.offset == 5
