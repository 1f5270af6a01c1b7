"""Leader appends without copying the records: new header prefixes written beside them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_batches import simple_batch

from strom.records.header import walk_batches
from strom_storage.log import Log
from strom_storage.log.scattered import ScatteredBatches, write_all
from strom_storage.log.validator import assign_offsets, offsets_by_prefix


def _batches(counts: list[int]) -> bytes:
    return b"".join(simple_batch(n, value_size=7 * n) for n in counts)


@settings(max_examples=50, deadline=None)
@given(
    counts=st.lists(st.integers(1, 20), min_size=1, max_size=8),
    next_offset=st.integers(0, 1 << 40),
    epoch=st.integers(0, 1 << 20),
)
def test_prefixes_write_exactly_what_patching_in_place_gives(
    counts: list[int], next_offset: int, epoch: int
) -> None:
    data = _batches(counts)
    batches = walk_batches(data)
    patched = bytearray(data)
    expected = assign_offsets(
        patched, batches, next_offset=next_offset, leader_epoch=epoch, log_append_time_ms=None
    )
    scattered, final = offsets_by_prefix(data, batches, next_offset=next_offset, leader_epoch=epoch)
    assert b"".join(bytes(part) for part in scattered.parts) == bytes(patched)
    assert len(scattered) == len(data)
    assert final == expected.batches
    assert data == _batches(counts)  # the received bytes are untouched


def test_write_all_writes_every_buffer_in_order_across_writev_calls(tmp_path: Path) -> None:
    parts = [bytes([i % 251]) * (i % 5) for i in range(3000)]  # empty ones too, > IOV_MAX
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        assert write_all(fd, parts) == sum(map(len, parts))
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(parts)


def test_write_all_raises_on_a_failing_descriptor(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "ro", os.O_RDONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError):
            write_all(fd, [b"abc"])
    finally:
        os.close(fd)


def test_leader_append_of_bytes_reads_back_with_offsets_and_epoch(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    log.append_as_leader(simple_batch(2), leader_epoch=3)
    received = _batches([3, 1, 4])
    info = log.append_as_leader(memoryview(received), leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.size_bytes) == (2, 9, len(received))
    log.update_high_watermark(log.log_end_offset)
    headers = [h for _, h in walk_batches(log.reader.read(0, 1 << 20).records)]  # CRCs checked
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [
        (0, 3),
        (2, 5),
        (5, 5),
        (6, 5),
    ]
    assert received == _batches([3, 1, 4])


def test_leader_append_of_scattered_batches_survives_reopening(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(_batches([2, 2]))
    log.close()
    reopened = open_log()
    assert reopened.log_end_offset == 12
    reopened.update_high_watermark(12)
    offsets = [h.base_offset for _, h in walk_batches(reopened.reader.read(0, 1 << 20).records)]
    assert offsets == [0, 2, 4, 6, 8, 10]


def test_scattered_batches_report_their_total_size() -> None:
    assert len(ScatteredBatches([b"ab", memoryview(b"cde")], 5)) == 5
