"""Replication without a network: the leader's high watermark, ISR decisions and acks=all
waits (``Partition``), and a follower's truncation by leader epoch (``node.follower``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from storage_batches import simple_batch

from strom.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
)
from strom_server.runtime.clock import ManualClock
from strom_storage.log import Log, LogConfig
from strom_storage.node.follower import FetchedData, apply_fetched, next_truncation
from strom_storage.node.partition import Partition

LEADER, F1, F2 = 1, 2, 3
REPLICAS = (LEADER, F1, F2)


def leader_partition(log: Log, *, isr: tuple[int, ...] = REPLICAS, epoch: int = 0) -> Partition:
    partition = Partition("t", 0, log, node_id=LEADER)
    partition.make_leader(epoch, isr, replicas=REPLICAS, partition_epoch=0, now_ms=1000)
    return partition


def test_high_watermark_is_the_smallest_log_end_of_the_isr(open_log: Callable[..., Log]) -> None:
    partition = leader_partition(open_log())
    partition.append_as_leader(simple_batch(5))
    assert partition.log.high_watermark == 0  # followers' positions unknown
    assert not partition.update_follower(F1, 5, now_ms=1001)
    assert partition.log.high_watermark == 0  # F2 still unknown
    assert partition.update_follower(F2, 3, now_ms=1001)
    assert partition.log.high_watermark == 3
    assert partition.update_follower(F2, 5, now_ms=1002)
    assert partition.log.high_watermark == 5
    assert not partition.update_follower(F2, 5, now_ms=1003)  # never moves backwards


def test_a_sole_replica_commits_on_append(open_log: Callable[..., Log]) -> None:
    partition = Partition("t", 0, open_log(), node_id=LEADER)  # standalone: no replica list
    partition.append_as_leader(simple_batch(3))
    assert partition.log.high_watermark == 3


def test_fetch_from_a_node_that_is_not_a_replica_is_refused(open_log: Callable[..., Log]) -> None:
    partition = leader_partition(open_log())
    with pytest.raises(NotLeaderOrFollowerError, match="node 9 is not a follower"):
        partition.update_follower(9, 0, now_ms=1000)


def test_a_caught_up_follower_is_proposed_for_the_isr(open_log: Callable[..., Log]) -> None:
    partition = leader_partition(open_log(), isr=(LEADER, F1))
    partition.append_as_leader(simple_batch(4))
    partition.update_follower(F1, 4, now_ms=1001)
    assert partition.log.high_watermark == 4
    partition.update_follower(F2, 2, now_ms=1001)
    assert partition.isr_expansion(F2) is None  # below the high watermark
    partition.update_follower(F2, 4, now_ms=1002)
    change = partition.isr_expansion(F2)
    assert change is not None and change.new_isr == (LEADER, F1, F2)
    assert partition.isr_expansion(F2) is None  # one change in flight at a time
    # While pending, the high watermark waits for the joining member too.
    partition.append_as_leader(simple_batch(1))
    partition.update_follower(F1, 5, now_ms=1003)
    assert partition.log.high_watermark == 4
    partition.isr_committed(change, (LEADER, F1, F2), partition_epoch=1)
    assert (partition.isr, partition.partition_epoch, partition.pending_isr) == (
        (LEADER, F1, F2),
        1,
        None,
    )


def test_a_lagging_follower_is_proposed_out_of_the_isr(open_log: Callable[..., Log]) -> None:
    partition = leader_partition(open_log())
    partition.append_as_leader(simple_batch(2))
    partition.update_follower(F1, 2, now_ms=2000)
    partition.update_follower(F2, 0, now_ms=2000)  # fetching, but never catching up
    assert partition.isr_shrink(now_ms=1000 + 30000, lag_max_ms=30000) is None
    change = partition.isr_shrink(now_ms=1000 + 30001, lag_max_ms=30000)
    assert change is not None and change.new_isr == (LEADER, F1)
    # Until the controller commits, the removed member still holds the high watermark back.
    assert partition.log.high_watermark == 0
    assert partition.isr_committed(change, (LEADER, F1), partition_epoch=1)
    assert partition.log.high_watermark == 2


def test_caught_up_time_counts_from_the_previous_fetch(open_log: Callable[..., Log]) -> None:
    """A follower that had everything the leader had at its previous fetch is caught up as of
    that fetch, even if the leader appended since (Kafka's lastCaughtUpTime)."""
    partition = leader_partition(open_log())
    partition.append_as_leader(simple_batch(2))
    partition.update_follower(F1, 2, now_ms=5000)
    partition.append_as_leader(simple_batch(2))
    partition.update_follower(F1, 2, now_ms=6000)  # behind now, but had it all at 5000
    assert partition.followers[F1].last_caught_up_ms == 5000
    partition.update_follower(F1, 4, now_ms=7000)
    assert partition.followers[F1].last_caught_up_ms == 7000


def test_acks_all_waits_for_the_isr(open_log: Callable[..., Log]) -> None:
    async def scenario() -> None:
        partition = leader_partition(open_log(min_insync_replicas=2))
        info = partition.append_as_leader(simple_batch(3), acks=-1)
        waiting = partition.wait_for_high_watermark(info.last_offset + 1)
        partition.update_follower(F1, 3, now_ms=1001)
        await asyncio.sleep(0)
        assert not waiting.done()
        partition.update_follower(F2, 3, now_ms=1001)
        await asyncio.wait_for(waiting, 1)

    asyncio.run(scenario())


def test_acks_all_is_refused_below_min_insync_replicas(open_log: Callable[..., Log]) -> None:
    partition = leader_partition(open_log(min_insync_replicas=2), isr=(LEADER,))
    with pytest.raises(NotEnoughReplicasError, match=r"ISR \[1\] is smaller than min.insync"):
        partition.append_as_leader(simple_batch(1), acks=-1)
    assert partition.log.log_end_offset == 0  # nothing written
    partition.append_as_leader(simple_batch(1), acks=1)  # acks=1 does not care
    assert partition.log.log_end_offset == 1


def test_acks_all_fails_when_the_isr_shrank_while_waiting(open_log: Callable[..., Log]) -> None:
    async def scenario() -> None:
        partition = leader_partition(open_log(min_insync_replicas=3))
        info = partition.append_as_leader(simple_batch(1), acks=-1)
        waiting = partition.wait_for_high_watermark(info.last_offset + 1)
        partition.update_follower(F1, 1, now_ms=1001)
        change = partition.isr_shrink(now_ms=100_000, lag_max_ms=30000)
        assert change is not None
        partition.isr_committed(change, change.new_isr, partition_epoch=1)
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            await asyncio.wait_for(waiting, 1)

    asyncio.run(scenario())


def test_losing_leadership_fails_waiting_produces(open_log: Callable[..., Log]) -> None:
    async def scenario() -> None:
        partition = leader_partition(open_log())
        info = partition.append_as_leader(simple_batch(1), acks=-1)
        waiting = partition.wait_for_high_watermark(info.last_offset + 1)
        partition.make_follower(F1, 1, replicas=REPLICAS, isr=(F1, F2), partition_epoch=1)
        with pytest.raises(NotLeaderOrFollowerError, match="lost the leadership"):
            await waiting
        with pytest.raises(NotLeaderOrFollowerError):
            partition.append_as_leader(simple_batch(1))

    asyncio.run(scenario())


def test_delete_records_moves_the_leaders_start_at_once_and_waits_for_the_isr(
    open_log: Callable[..., Log],
) -> None:
    """Kafka's delayed DeleteRecords: the leader's log starts at the offset at once (reads
    there see it), the answer waits until every in-sync replica's log starts there too."""

    async def scenario() -> None:
        partition = leader_partition(open_log(), isr=(LEADER, F1))
        partition.append_as_leader(simple_batch(6))
        partition.update_follower(F1, 6, now_ms=1001, log_start_offset=0)
        partition.update_follower(F2, 1, now_ms=1001, log_start_offset=0)  # not in the ISR
        target, low = partition.delete_records(4)
        assert (target, partition.log.log_start_offset) == (4, 4)
        assert partition.low_watermark() == 0
        await asyncio.sleep(0)
        assert not low.done()
        partition.update_follower(F1, 6, now_ms=1002, log_start_offset=4)
        assert await asyncio.wait_for(low, 1) == 4
        _, whole = partition.delete_records(-1)  # -1: up to the high watermark
        assert partition.log.log_start_offset == 6
        partition.make_follower(F1, 1, replicas=REPLICAS, isr=(F1,), partition_epoch=1)
        with pytest.raises(NotLeaderOrFollowerError, match="lost the leadership"):
            await whole
        with pytest.raises(NotLeaderOrFollowerError):
            partition.delete_records(6)

    asyncio.run(scenario())


def test_a_follower_leaving_the_isr_no_longer_holds_a_delete(
    open_log: Callable[..., Log],
) -> None:
    async def scenario() -> None:
        partition = leader_partition(open_log())
        partition.append_as_leader(simple_batch(3))
        partition.update_follower(F1, 3, now_ms=1001, log_start_offset=0)
        partition.update_follower(F2, 3, now_ms=50_000, log_start_offset=0)
        _, low = partition.delete_records(2)
        partition.update_follower(F2, 3, now_ms=50_001, log_start_offset=2)
        await asyncio.sleep(0)
        assert not low.done()  # F1 still starts at 0
        change = partition.isr_shrink(now_ms=100_000, lag_max_ms=60_000)
        assert change is not None and change.new_isr == (LEADER, F2)
        partition.isr_committed(change, change.new_isr, partition_epoch=1)
        assert await asyncio.wait_for(low, 1) == 2

    asyncio.run(scenario())


def test_an_older_metadata_view_does_not_undo_a_committed_isr(
    open_log: Callable[..., Log],
) -> None:
    partition = leader_partition(open_log(), isr=(LEADER, F1))
    partition.update_follower(F2, 0, now_ms=1001)
    change = partition.isr_expansion(F2)
    assert change is not None
    partition.isr_committed(change, (LEADER, F1, F2), partition_epoch=1)
    partition.make_leader(0, (LEADER, F1), replicas=REPLICAS, partition_epoch=0)  # stale watch
    assert partition.isr == (LEADER, F1, F2)


# -- follower truncation ------------------------------------------------------------------------


def follower_log(tmp_path: Path, name: str, epochs: list[tuple[int, int]]) -> Log:
    """A log holding, for each (epoch, count), ``count`` one-record batches of ``epoch``."""
    log = Log.open(tmp_path / name, LogConfig(), clock=ManualClock())
    offset = 0
    for epoch, count in epochs:
        for _ in range(count):
            log.append_as_follower(simple_batch(1, base_offset=offset, leader_epoch=epoch))
            offset += 1
    return log


def test_truncating_inside_a_batch_removes_the_whole_batch(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "straddle", LogConfig(), clock=ManualClock())
    log.append_as_follower(simple_batch(5, base_offset=0, leader_epoch=0))
    log.append_as_follower(simple_batch(5, base_offset=5, leader_epoch=0))
    log.truncate_to(7)  # nothing at or above 7 may survive: 5..9 goes whole
    assert log.log_end_offset == 5
    log.close()


def test_truncation_keeps_the_common_prefix_of_the_same_epoch(tmp_path: Path) -> None:
    log = follower_log(tmp_path, "a", [(0, 5), (1, 5)])  # epoch 1 = offsets 5..9
    # The leader also led epoch 1 but wrote only up to 7 in it.
    step = next_truncation(log, leader_epoch=1, leader_end_offset=7)
    assert (step.offset, step.done) == (7, True)


def test_truncation_never_drops_below_the_leaders_end_when_we_are_shorter(
    tmp_path: Path,
) -> None:
    log = follower_log(tmp_path, "b", [(0, 5)])
    step = next_truncation(log, leader_epoch=0, leader_end_offset=9)
    assert (step.offset, step.done) == (5, True)  # nothing to cut: fetch from 5


def test_an_epoch_unknown_to_the_leader_is_cut_back_in_steps(tmp_path: Path) -> None:
    """Follower: epochs 0 (0..9), 2 (10..14). Leader: epochs 0 (0..6), 1 (7..). The follower
    asks for epoch 2; the leader answers (1, end of 1); the follower never had epoch 1, so it
    cuts back to where its epoch 0 ended, asks for 0, and the leader says 0 ended at 7."""
    log = follower_log(tmp_path, "c", [(0, 10), (2, 5)])
    first = next_truncation(log, leader_epoch=1, leader_end_offset=12)
    assert (first.offset, first.done) == (10, False)
    log.truncate_to(first.offset)
    assert log.latest_epoch == 0
    second = next_truncation(log, leader_epoch=0, leader_end_offset=7)
    assert (second.offset, second.done) == (7, True)
    log.truncate_to(second.offset)
    assert log.log_end_offset == 7
    log.close()


def test_a_leader_without_epochs_falls_back_to_the_high_watermark(tmp_path: Path) -> None:
    log = follower_log(tmp_path, "d", [(0, 6)])
    log.update_high_watermark(4)
    step = next_truncation(log, leader_epoch=-1, leader_end_offset=-1)
    assert (step.offset, step.done) == (4, True)
    log.close()


def test_applied_fetches_follow_the_leaders_high_watermark_and_start(tmp_path: Path) -> None:
    log = follower_log(tmp_path, "e", [])
    info = apply_fetched(log, FetchedData(simple_batch(5, leader_epoch=3), 4, 0))
    assert info is not None and info.record_count == 5
    assert (log.log_end_offset, log.high_watermark, log.latest_epoch) == (5, 4, 3)
    assert apply_fetched(log, FetchedData(b"", 2, 0)) is None
    assert log.high_watermark == 4  # a new leader's lower watermark never moves ours back
    apply_fetched(log, FetchedData(b"", 5, 3))
    assert (log.high_watermark, log.log_start_offset) == (5, 3)
    log.close()
