"""Transactional offsets in the group coordinator, without a network: TxnOffsetCommit stages
offsets (verified, persisted as pending records), markers commit or drop them, OffsetFetch
require_stable, reload, and what deletion and expiry do with pending offsets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest
from group_unitkit import FAST, MemoryLog, join

from strom.errors import (
    BrokerResponseError,
    IllegalGenerationError,
    InvalidRequestError,
    NonEmptyGroupError,
    NotEnoughReplicasError,
    ProducerFencedError,
)
from strom.types import TopicPartition
from strom_coordinator.group import records
from strom_coordinator.group.api import CommitPartition, TxnCommitRequest
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.manager import GroupManager

PID = 4000
MINUTE = 60_000


@dataclass
class FakeVerifier:
    """The transaction coordinator's verify_only answer, chosen by the test."""

    refusal: BrokerResponseError | None = None
    calls: list[tuple[str, int, int, TopicPartition]] = field(default_factory=list)

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> BrokerResponseError | None:
        self.calls.append((transactional_id, producer_id, producer_epoch, tp))
        return self.refusal


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def manager(
    log: MemoryLog,
    verifier: FakeVerifier | None = None,
    *,
    clock: list[int] | None = None,
    config: GroupConfig = FAST,
    load: bool = True,
) -> GroupManager:
    wall = clock if clock is not None else [1_000_000]
    m = GroupManager(
        log, config, wall_clock_ms=lambda: wall[0], verifier=verifier or FakeVerifier()
    )
    m.partition_count = 1
    if load:
        m.begin_loading(0)
        m.finish_loading(0)
    return m


def reloaded(log: MemoryLog, *, into: MemoryLog | None = None) -> GroupManager:
    """A new owner of partition 0 that replayed every record of ``log`` (and writes to
    ``into``)."""
    fresh = manager(into or MemoryLog(), load=False)
    fresh.begin_loading(0)
    for key, value in log.records(0):
        fresh.replay(0, key, value, 0)
    fresh.finish_loading(0)
    return fresh


def txn(
    *offsets: tuple[str, int, int], epoch: int = 3, group: str = "g", **kw: Any
) -> TxnCommitRequest:
    parts = [CommitPartition(t, p, o, 5, "txn-meta") for t, p, o in offsets]
    return TxnCommitRequest("tid", group, PID, epoch, parts, **kw)


async def visible(m: GroupManager, group: str = "g") -> dict[tuple[str, int], int]:
    return {(o.topic, o.partition): o.offset for o in await m.fetch_offsets(group)}


async def stable(m: GroupManager, *tps: tuple[str, int]) -> dict[tuple[str, int], str | int]:
    """require_stable answers: the offset, or the error's name."""
    found = await m.fetch_offsets("g", list(tps), require_stable=True)
    return {(o.topic, o.partition): o.error.code_name if o.error else o.offset for o in found}


def test_commit_marker_makes_staged_offsets_visible() -> None:
    async def scenario() -> None:
        log, verifier = MemoryLog(), FakeVerifier()
        m = manager(log, verifier)
        await m.commit_offsets("g", -1, "", [CommitPartition("t", 0, 2)])
        results = await m.txn_commit_offsets(txn(("t", 0, 10), ("t", 1, 20)))
        assert [r.error for r in results] == [None, None]
        assert verifier.calls == [("tid", PID, 3, TopicPartition("__consumer_offsets", 0))]
        # Staged: invisible to a plain fetch, unstable to a stable one.
        assert await visible(m) == {("t", 0): 2}
        assert await stable(m, ("t", 0), ("t", 1), ("t", 2)) == {
            ("t", 0): "UNSTABLE_OFFSET_COMMIT",
            ("t", 1): "UNSTABLE_OFFSET_COMMIT",
            ("t", 2): -1,
        }
        key, value = log.batches[-1][1][0]
        assert records.decode_key(key) == records.PendingKey("g", PID, "t", 0)
        assert value is not None and records.decode_pending_value(value).offset == 10

        (result,) = await m.end_txn(["g"], PID, 3, committed=True)
        assert result.group_id == "g" and result.error is None
        assert await visible(m) == {("t", 0): 10, ("t", 1): 20}
        assert await stable(m, ("t", 0), ("t", 1)) == {("t", 0): 10, ("t", 1): 20}
        (fetched,) = await m.fetch_offsets("g", [("t", 0)])
        assert (fetched.leader_epoch, fetched.metadata) == (5, "txn-meta")
        # One batch: the commit records and the pending records' tombstones.
        kinds = [(type(records.decode_key(k)).__name__, v is None) for k, v in log.batches[-1][1]]
        assert sorted(kinds) == [
            ("OffsetKey", False),
            ("OffsetKey", False),
            ("PendingKey", True),
            ("PendingKey", True),
        ]

    run(scenario)


def test_abort_marker_drops_staged_offsets_and_markers_are_idempotent() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = manager(log)
        await m.commit_offsets("g", -1, "", [CommitPartition("t", 0, 2)])
        await m.txn_commit_offsets(txn(("t", 0, 10)))
        (result,) = await m.end_txn(["g"], PID, 3, committed=False)
        assert result.error is None
        assert await visible(m) == {("t", 0): 2}
        assert await stable(m, ("t", 0)) == {("t", 0): 2}
        assert log.batches[-1][1] == [(records.pending_key("g", PID, "t", 0), None)]
        written = len(log.batches)
        # A resent marker (either decision), a marker for a group without pending offsets and
        # one for an unknown group: NONE, nothing written.
        again = await m.end_txn(["g", "unknown"], PID, 3, committed=True)
        assert [(r.group_id, r.error) for r in again] == [("g", None), ("unknown", None)]
        assert len(log.batches) == written
        assert await visible(m) == {("t", 0): 2}

    run(scenario)


def test_reload_rebuilds_pending_offsets_then_a_resent_marker_commits_them() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = manager(log)
        await m.commit_offsets("g", -1, "", [CommitPartition("t", 0, 2)])
        await m.txn_commit_offsets(txn(("t", 0, 10), ("t", 1, 20)))
        await m.txn_commit_offsets(txn(("u", 0, 7), group="other"))
        fresh_log = MemoryLog()
        fresh = reloaded(log, into=fresh_log)
        assert await visible(fresh) == {("t", 0): 2}
        assert await stable(fresh, ("t", 0), ("t", 1)) == {
            ("t", 0): "UNSTABLE_OFFSET_COMMIT",
            ("t", 1): "UNSTABLE_OFFSET_COMMIT",
        }
        await fresh.end_txn(["g", "other"], PID, 3, committed=True)
        assert await visible(fresh) == {("t", 0): 10, ("t", 1): 20}
        assert await visible(fresh, "other") == {("u", 0): 7}
        # And the next owner sees the end state: committed, nothing pending.
        third = reloaded(MemoryLog(batches=log.batches + fresh_log.batches))
        assert await stable(third, ("t", 0), ("t", 1)) == {("t", 0): 10, ("t", 1): 20}

    run(scenario)


def test_a_refused_verification_writes_nothing() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        verifier = FakeVerifier(ProducerFencedError("epoch 3 is old"))
        m = manager(log, verifier)
        results = await m.txn_commit_offsets(txn(("t", 0, 10), ("", 1, 3)))
        assert [(r.topic, r.error and r.error.code_name) for r in results] == [
            ("t", "PRODUCER_FENCED"),
            ("", "INVALID_TOPIC_EXCEPTION"),  # its own validation error comes first
        ]
        assert log.batches == []
        assert await stable(m, ("t", 0)) == {("t", 0): -1}

    run(scenario)


def test_without_a_verifier_every_transactional_commit_is_refused() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = GroupManager(log, FAST)
        m.partition_count = 1
        m.begin_loading(0)
        m.finish_loading(0)
        (result,) = await m.txn_commit_offsets(txn(("t", 0, 10)))
        assert result.error is not None and result.error.code_name == "UNKNOWN_SERVER_ERROR"
        assert log.batches == []

    run(scenario)


def test_member_and_request_checks_are_an_offset_commits() -> None:
    async def scenario() -> None:
        m = manager(MemoryLog())
        joined = await join(m, "g")
        gen, member = joined.generation_id, joined.member_id
        await m.sync_group("g", gen, member, assignments={member: b"a"})
        with pytest.raises(IllegalGenerationError):
            await m.txn_commit_offsets(txn(("t", 0, 1), generation_id=gen + 1, member_id=member))
        ok = await m.txn_commit_offsets(txn(("t", 0, 1), generation_id=gen, member_id=member))
        assert ok[0].error is None
        with pytest.raises(InvalidRequestError):
            await m.txn_commit_offsets(TxnCommitRequest("", "g", PID, 3, []))

    run(scenario)


def test_a_marker_ends_only_its_epoch_and_drops_older_leftovers() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = manager(log)
        await m.txn_commit_offsets(txn(("t", 0, 10), epoch=3))  # left over by transaction 3
        await m.txn_commit_offsets(txn(("t", 1, 20), epoch=4))
        await m.end_txn(["g"], PID, 4, committed=True)
        assert await visible(m) == {("t", 1): 20}  # epoch 3's offset is dropped, not applied
        assert await stable(m, ("t", 0)) == {("t", 0): -1}
        await m.txn_commit_offsets(txn(("t", 0, 30), epoch=6))
        await m.end_txn(["g"], PID, 5, committed=True)  # an older marker leaves epoch 6 alone
        assert await stable(m, ("t", 0)) == {("t", 0): "UNSTABLE_OFFSET_COMMIT"}

    run(scenario)


def test_a_plain_commit_after_the_staging_wins() -> None:
    async def scenario() -> None:
        m = manager(MemoryLog())
        await m.txn_commit_offsets(txn(("t", 0, 10), ("t", 1, 11)))
        await m.commit_offsets("g", -1, "", [CommitPartition("t", 0, 99)])
        await m.end_txn(["g"], PID, 3, committed=True)
        assert await visible(m) == {("t", 0): 99, ("t", 1): 11}

    run(scenario)


def test_failed_writes_stage_nothing_and_a_failed_marker_can_be_resent() -> None:
    async def scenario() -> None:
        log = MemoryLog(fail_with=NotEnoughReplicasError("1 of 3 in sync"))
        m = manager(log)
        (result,) = await m.txn_commit_offsets(txn(("t", 0, 10)))
        assert result.error is not None and result.error.code_name == "COORDINATOR_NOT_AVAILABLE"
        assert await stable(m, ("t", 0)) == {("t", 0): -1}
        log.fail_with = None
        await m.txn_commit_offsets(txn(("t", 0, 10)))
        log.fail_with = NotEnoughReplicasError("1 of 3 in sync")
        (marker,) = await m.end_txn(["g"], PID, 3, committed=True)
        assert marker.error is not None and marker.error.retriable
        assert await stable(m, ("t", 0)) == {("t", 0): "UNSTABLE_OFFSET_COMMIT"}
        log.fail_with = None
        (marker,) = await m.end_txn(["g"], PID, 3, committed=True)
        assert marker.error is None and await visible(m) == {("t", 0): 10}

    run(scenario)


def test_pending_offsets_block_group_deletion_and_expiry() -> None:
    async def scenario() -> None:
        clock = [1_000_000]
        log = MemoryLog()
        m = manager(log, clock=clock)
        await m.commit_offsets("g", -1, "", [CommitPartition("t", 0, 2)])
        await m.txn_commit_offsets(txn(("t", 0, 10)))
        (deleted,) = await m.delete_groups(["g"])
        assert isinstance(deleted.error, NonEmptyGroupError)
        assert "transactional offsets pending" in str(deleted.error)
        clock[0] += FAST.offsets_retention_ms + MINUTE
        await m.expire(clock[0])
        assert await visible(m) == {("t", 0): 2}  # kept while its transaction is open
        await m.end_txn(["g"], PID, 3, committed=False)
        await m.expire(clock[0] + FAST.offsets_retention_ms + MINUTE)
        assert await visible(m) == {}
        (deleted,) = await m.delete_groups(["g"])
        assert deleted.error is not None and deleted.error.code_name == "GROUP_ID_NOT_FOUND"

    run(scenario)


def test_pending_records_round_trip_and_are_not_kafka_keys() -> None:
    key = records.pending_key("grp", 2**40, "topic", 7)
    assert records.decode_key(key) == records.PendingKey("grp", 2**40, "topic", 7)
    assert key[:2] == b"\x7f\xf0"
    value = records.PendingValue(32766, 123, 9, "meta", 456)
    assert records.decode_pending_value(records.pending_value(value)) == value


def test_a_partition_given_up_during_the_verification_writes_nothing() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        holder: list[GroupManager] = []

        class UnloadingVerifier(FakeVerifier):
            async def verify(
                self, transactional_id: str, producer_id: int, epoch: int, tp: TopicPartition
            ) -> BrokerResponseError | None:
                holder[0].unload(0)  # another coordinator takes the partition meanwhile
                return None

        m = manager(log, UnloadingVerifier())
        holder.append(m)
        (result,) = await m.txn_commit_offsets(txn(("t", 0, 10)))
        assert result.error is not None and result.error.code_name == "COORDINATOR_NOT_AVAILABLE"
        assert log.batches == []

    run(scenario)


def test_a_marker_waits_for_the_offsets_its_transaction_is_still_writing() -> None:
    """TxnOffsetCommit verified, its pending records not yet acknowledged, and the abort marker
    arrives: the marker must see (and drop) those offsets. Before, it found nothing pending,
    the write landed after it, and require_stable fetches answered UNSTABLE_OFFSET_COMMIT until
    the producer's next transaction, on this coordinator and on any that reloaded the log."""

    async def scenario() -> None:
        log = MemoryLog()
        m = manager(log)
        await m.commit_offsets("g", -1, "", [CommitPartition("t", 0, 7)])
        log.gate = asyncio.Event()  # every append waits
        staging = asyncio.ensure_future(m.txn_commit_offsets(txn(("t", 0, 10))))
        await asyncio.sleep(0)  # verified; its append is held
        marker = asyncio.ensure_future(m.end_txn(["g"], PID, 3, committed=False))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not marker.done(), "the marker did not wait for the offsets being written"
        log.gate.set()
        (staged,) = await staging
        (ended,) = await marker
        assert staged.error is None and ended.error is None
        assert await stable(m, ("t", 0)) == {("t", 0): 7}
        assert await stable(reloaded(log), ("t", 0)) == {("t", 0): 7}

    run(scenario)


def test_delete_groups_racing_a_staging_waits_for_it_and_refuses() -> None:
    """A TxnOffsetCommit being written when DeleteGroups arrives is staged first: the deletion
    then finds a pending offset (NON_EMPTY_GROUP) instead of deleting a group a replay would
    bring back with it."""

    async def scenario() -> None:
        log = MemoryLog()
        m = manager(log)
        await m.commit_offsets("g", -1, "", [CommitPartition("t", 0, 2)])
        release = log.hold_next()
        staging = asyncio.ensure_future(m.txn_commit_offsets(txn(("t", 0, 10))))
        await asyncio.sleep(0.01)
        deleting = asyncio.ensure_future(m.delete_groups(["g"]))
        await asyncio.sleep(0.01)
        release.set()
        assert [r.error for r in await staging] == [None]
        [refused] = await deleting
        assert isinstance(refused.error, NonEmptyGroupError)
        [d] = await m.describe_groups(["g"])
        assert d.state == "Empty"
        assert await stable(m, ("t", 0)) == {("t", 0): "UNSTABLE_OFFSET_COMMIT"}
        assert await stable(reloaded(log), ("t", 0)) == {("t", 0): "UNSTABLE_OFFSET_COMMIT"}

    run(scenario)


def test_a_pending_record_the_markers_coordinator_never_loaded_does_not_come_back() -> None:
    """Coordinator A stages an offset; its record is in the log but was not committed when B
    took the partition over and loaded it, so B's memory has nothing pending when the abort
    marker arrives. Before, B wrote nothing and every later owner replayed the record as
    pending for good (read_committed consumers of the group stuck on UNSTABLE_OFFSET_COMMIT:
    a fault run's pipeline stopped for minutes); now the marker's ended-transaction record,
    after it in the log, drops it at replay."""

    async def scenario() -> None:
        log = MemoryLog()
        a = manager(log)
        await a.commit_offsets("g", -1, "", [CommitPartition("t", 0, 7)])
        loaded_by_b = len(log.records(0))
        (staged,) = await a.txn_commit_offsets(txn(("t", 0, 10)))
        assert staged.error is None
        b = manager(log, load=False)
        b.begin_loading(0)
        for key, value in log.records(0)[:loaded_by_b]:
            b.replay(0, key, value, 0)
        b.finish_loading(0)
        (ended,) = await b.end_txn(["g"], PID, 3, committed=False)
        assert ended.error is None
        assert await stable(b, ("t", 0)) == {("t", 0): 7}
        assert await stable(reloaded(log), ("t", 0)) == {("t", 0): 7}

    run(scenario)


def test_ended_transaction_records_round_trip_and_are_not_kafka_keys() -> None:
    key = records.ended_key("grp", 2**40)
    assert records.decode_key(key) == records.EndedKey("grp", 2**40)
    assert key[:2] == b"\x7f\xf1"
    assert records.decode_ended_value(records.ended_value(32766)) == 32766


def test_a_late_staging_of_an_ended_transaction_does_not_replace_the_newer_one() -> None:
    """A TxnOffsetCommit of an earlier transaction (epoch 2) lands after the producer's current
    one (epoch 3) staged its offset: a deposed coordinator resuming after a pause wrote it.
    Before, it replaced the newer pending offset, the epoch-3 commit marker then found only an
    older epoch and committed nothing, and the partition's next owner re-read records the
    committed transaction had consumed (two duplicated outputs in a fault run)."""

    async def scenario() -> None:
        log = MemoryLog()
        m = manager(log)
        await m.commit_offsets("g", -1, "", [CommitPartition("t", 0, 2)])
        (current,) = await m.txn_commit_offsets(txn(("t", 0, 10), epoch=3))
        (late,) = await m.txn_commit_offsets(txn(("t", 0, 8), epoch=2))
        assert current.error is None and late.error is None
        (ended,) = await m.end_txn(["g"], PID, 3, committed=True)
        assert ended.error is None
        assert await stable(m, ("t", 0)) == {("t", 0): 10}
        assert await stable(reloaded(log), ("t", 0)) == {("t", 0): 10}

    run(scenario)


def test_replay_keeps_the_newer_pending_offset_whatever_the_log_order() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        m = manager(log)
        await m.txn_commit_offsets(txn(("t", 0, 10), epoch=3))
        stale = (records.pending_key("g", PID, "t", 0),
                 records.pending_value(records.PendingValue(2, 8)))  # fmt: skip
        await log.append(0, [stale])  # written late by a deposed owner
        fresh = reloaded(log)
        (ended,) = await fresh.end_txn(["g"], PID, 3, committed=True)
        assert ended.error is None
        assert await stable(fresh, ("t", 0)) == {("t", 0): 10}

    run(scenario)
