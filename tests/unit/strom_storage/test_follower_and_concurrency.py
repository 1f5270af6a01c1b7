"""Follower appends, truncation, and reads racing appends in threads."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from storage_batches import simple_batch

from strom.errors import CorruptRecordError
from strom.records.header import walk_batches
from strom_storage.log import FetchIsolation, Log


def test_follower_append_keeps_offsets(open_log: Callable[..., Log]) -> None:
    log = open_log()
    info = log.append_as_follower(simple_batch(2, base_offset=0, leader_epoch=4) +
                                  simple_batch(1, base_offset=5, leader_epoch=4))  # fmt: skip
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert log.log_end_offset == 6
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(simple_batch(1, base_offset=3))
    data = log.reader.read(0, 1 << 20, isolation=FetchIsolation.LOG_END).records
    assert [h.base_offset for _, h in walk_batches(data)] == [0, 5]
    assert walk_batches(data)[0][1].partition_leader_epoch == 4


def test_truncate_across_segments(open_log: Callable[..., Log]) -> None:
    size = len(simple_batch(1))
    log = open_log(segment_bytes=size * 2)
    for _ in range(7):
        log.append_as_leader(simple_batch(1))
    log.update_high_watermark(7)
    assert log.truncate_to(3)
    assert log.log_end_offset == 3
    assert log.high_watermark == 3
    assert [s.base_offset for s in log.segments()] == [0, 2]
    assert log.append_as_leader(simple_batch(1)).first_offset == 3
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.append_as_leader(simple_batch(1)).first_offset == 100


def test_reads_in_threads_while_appending(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=4096, index_interval_bytes=256)
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                end = log.log_end_offset
                offset = 0
                while offset < end:
                    data = log.reader.read(offset, 2048, isolation=FetchIsolation.LOG_END).records
                    batches = walk_batches(data)  # whole batches with valid CRCs only
                    assert batches and batches[0][1].base_offset <= offset
                    offset = batches[-1][1].next_offset
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for _ in range(300):
        log.append_as_leader(simple_batch(3, value_size=50))
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert log.log_end_offset == 900


def test_follower_append_larger_than_a_segment_is_split(open_log: Callable[..., Log]) -> None:
    size = len(simple_batch(1))
    log = open_log(segment_bytes=size * 2)
    data = b"".join(simple_batch(1, base_offset=i) for i in range(5))
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 4, 5)
    assert [s.base_offset for s in log.segments()] == [0, 2, 4]
    assert all(s.size <= size * 2 for s in log.segments())


def test_follower_offsets_with_gaps_roll_at_the_batch_offset(open_log: Callable[..., Log]) -> None:
    size = len(simple_batch(1))
    log = open_log(segment_bytes=size * 2)
    log.append_as_follower(simple_batch(1, base_offset=0) + simple_batch(1, base_offset=1))
    log.append_as_follower(simple_batch(1, base_offset=50))  # compacted upstream: a gap
    assert [s.base_offset for s in log.segments()] == [0, 50]
    assert log.log_end_offset == 51
    data = log.reader.read(2, 1 << 20, isolation=FetchIsolation.LOG_END).records
    assert [h.base_offset for _, h in walk_batches(data)] == [50]
