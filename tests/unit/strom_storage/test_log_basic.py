"""Appends, reads and offsets of the partition log."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from storage_batches import simple_batch

from strom.errors import OffsetOutOfRangeError
from strom.records.header import walk_batches
from strom_storage.log import FetchIsolation, Log


def test_append_assigns_offsets_and_read_returns_the_same_bytes(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    info1 = log.append_as_leader(simple_batch(3), leader_epoch=7)
    info2 = log.append_as_leader(simple_batch(2))
    assert (info1.first_offset, info1.last_offset) == (0, 2)
    assert (info2.first_offset, info2.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    log.update_high_watermark(5)
    data = log.reader.read(0, 1 << 20).records
    batches = walk_batches(data)
    assert [h.base_offset for _, h in batches] == [0, 3]
    assert batches[0][1].partition_leader_epoch == 7
    data = log.reader.read(4, 1 << 20).records
    assert [h.base_offset for _, h in walk_batches(data)] == [3]


def test_read_stops_at_high_watermark_unless_follower(open_log: Callable[..., Log]) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(simple_batch(1))
    log.update_high_watermark(2)
    assert [h.base_offset for _, h in walk_batches(log.reader.read(0, 1 << 20).records)] == [0, 1]
    assert log.reader.read(2, 1 << 20).records == b""
    follower = log.reader.read(0, 1 << 20, isolation=FetchIsolation.LOG_END).records
    assert len(walk_batches(follower)) == 3


def test_out_of_range(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(simple_batch(1))
    with pytest.raises(OffsetOutOfRangeError):
        log.reader.read(2, 100)
    assert log.reader.read(1, 100).records == b""


def test_flush_messages_fsyncs_and_moves_recovery_point(open_log: Callable[..., Log]) -> None:
    log = open_log(flush_messages=2)
    log.append_as_leader(simple_batch(1))
    assert log.recovery_point == 0  # default: left to the page cache
    log.append_as_leader(simple_batch(1))
    assert log.recovery_point == 2
    log.append_as_leader(simple_batch(3))
    assert log.recovery_point == 5


def test_append_listener_sees_every_append(open_log: Callable[..., Log]) -> None:
    log = open_log()
    seen: list[tuple[int, int]] = []
    log.add_append_listener(lambda _log, info: seen.append((info.first_offset, info.last_offset)))
    log.append_as_leader(simple_batch(2))
    log.append_as_follower(simple_batch(1, base_offset=2))
    assert seen == [(0, 1), (2, 2)]
