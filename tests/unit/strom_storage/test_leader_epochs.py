"""The leader-epoch cache and its use by the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from storage_batches import simple_batch

from strom_storage.log import Log
from strom_storage.log.leader_epochs import LeaderEpochCache


def test_cache_end_offsets_and_truncation(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(3, 0) == (-1, -1)
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)
    assert cache.assign(3, 10)
    assert cache.assign(4, 25)
    assert cache.end_offset_for(0, 40) == (-1, -1)
    assert cache.end_offset_for(1, 40) == (1, 10)
    assert cache.end_offset_for(2, 40) == (1, 10)
    assert cache.end_offset_for(4, 40) == (4, 40)
    assert LeaderEpochCache(tmp_path).entries == cache.entries  # persisted
    cache.truncate_from_end(20)
    assert cache.latest_epoch == 3
    cache.truncate_from_start(12)
    assert [tuple(e) for e in cache.entries] == [(3, 12)]


def test_cache_start_offsets(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.start_offset_for(1, 7) == 7  # not started: the log end
    cache.assign(1, 0)
    cache.assign(3, 10)
    assert (cache.start_offset_for(1, 40), cache.start_offset_for(3, 40)) == (0, 10)
    assert cache.start_offset_for(2, 40) == 40  # an epoch this log skipped


def test_log_records_epochs_from_appends(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(simple_batch(2), leader_epoch=0)
    log.append_as_leader(simple_batch(2), leader_epoch=2)
    log.append_as_leader(simple_batch(1), leader_epoch=2)
    assert log.latest_epoch == 2
    assert log.end_offset_for_epoch(0) == (0, 2)
    assert log.end_offset_for_epoch(1) == (0, 2)
    assert log.end_offset_for_epoch(2) == (2, 5)
    log.truncate_to(2)
    assert log.latest_epoch == 0
    log.append_as_follower(simple_batch(1, base_offset=2, leader_epoch=5))
    log.close()
    reopened = open_log()
    assert reopened.end_offset_for_epoch(5) == (5, 3)
