"""Transactions at the node level, without a network: ``ReplicaManager`` over real logs in a
temporary directory. A transaction's first write to a partition is verified (an in-memory
coordinator table stands behind the ``TxnVerifier`` protocol), markers end transactions and
move the last stable offset, read_committed fetches and ListOffsets stop at it, and
DescribeProducers lists the open transactions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from strom.errors import (
    BrokerResponseError,
    InvalidTxnStateError,
    NotLeaderOrFollowerError,
    ProducerFencedError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from strom.records import BatchBuilder, BatchHeader, walk_batches
from strom_server.runtime.clock import SystemClock
from strom_storage.log import LATEST_TIMESTAMP
from strom_storage.log.log_manager import LogManager
from strom_storage.node import (
    FetchPartitionRequest,
    ReplicaManager,
    TxnMarker,
)
from strom_storage.stats import NodeStats

PID, EPOCH = 1000, 3
#: Record timestamps near the markers' (the broker's clock), so no segment rolls by time.
NOW_MS = int(time.time() * 1000)
NODE = 1
TID = "tid-a"

Key = tuple[str, int]


class CoordinatorTable:
    """What a transaction coordinator knows, enough to answer verify_only: the partitions of
    each producer's ongoing transaction. ``gate``, when set, holds every answer until set."""

    def __init__(self) -> None:
        self.ongoing: dict[tuple[str, int, int], set[Key]] = {}
        self.fenced_below: dict[int, int] = {}
        self.calls: list[tuple[str, int, int, tuple[Key, ...]]] = []
        self.gate: asyncio.Event | None = None

    def add(self, tid: str, pid: int, epoch: int, *keys: Key) -> None:
        self.ongoing.setdefault((tid, pid, epoch), set()).update(keys)

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Sequence[Key],
    ) -> Mapping[Key, BrokerResponseError | None]:  # fmt: skip
        self.calls.append((transactional_id, producer_id, producer_epoch, tuple(partitions)))
        if self.gate is not None:
            await self.gate.wait()
        if producer_epoch < self.fenced_below.get(producer_id, 0):
            return dict.fromkeys(partitions, ProducerFencedError("an older epoch"))
        held = self.ongoing.get((transactional_id, producer_id, producer_epoch), set())
        return {
            key: None if key in held else InvalidTxnStateError(f"{key} not in the transaction")
            for key in partitions
        }


def txn_batch(n: int, *, seq: int, pid: int = PID, epoch: int = EPOCH) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    for i in range(n):
        builder.append(NOW_MS, None, f"txn-{seq + i}".encode())
    return builder.build()


def plain_batch(n: int) -> bytes:
    builder = BatchBuilder()
    for i in range(n):
        builder.append(NOW_MS, None, f"plain-{i}".encode())
    return builder.build()


def run(
    tmp_path: Path, scenario: Callable[[ReplicaManager, CoordinatorTable], Awaitable[None]],
    *, partitions: int = 2, verifier: bool = True,
) -> None:  # fmt: skip
    async def main() -> None:
        replicas = ReplicaManager(
            LogManager([tmp_path], clock=SystemClock()), node_id=NODE, stats=NodeStats()
        )
        for index in range(partitions):
            replicas.hosted.host("t", index)  # standalone leader: its own ISR
        table = CoordinatorTable()
        if verifier:
            replicas.txn_verifier = table
        try:
            await scenario(replicas, table)
        finally:
            replicas.close()

    asyncio.run(main())


async def until(condition: Callable[[], object]) -> None:
    """Let the loop run until ``condition()`` holds (a few hundred turns at most)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


def headers(records: bytes | memoryview) -> list[BatchHeader]:
    return [header for _, header in walk_batches(records)]


def log_end(replicas: ReplicaManager, index: int = 0) -> int:
    return replicas.hosted.partitions()[index].log.log_end_offset


def lso(replicas: ReplicaManager, index: int = 0) -> int:
    return replicas.hosted.get("t", index).log.last_stable_offset


async def fetch(
    replicas: ReplicaManager, offset: int = 0, *, read_committed: bool, index: int = 0, **kw: Any
) -> Any:
    (result,) = await replicas.fetch(
        [FetchPartitionRequest("t", index, offset, 1 << 20)], read_committed=read_committed, **kw
    )
    return result


def marker(committed: bool, *keys: Key, epoch: int = EPOCH, coordinator_epoch: int = 1) -> Any:
    return TxnMarker(PID, epoch, committed, coordinator_epoch, tuple(keys or [("t", 0)]))


# -- produce: verification ------------------------------------------------------------------


def test_plain_produce_never_asks_the_coordinator(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        (result,) = await replicas.append(1, 0, [("t", 0, plain_batch(3))], TID)
        assert result.error is None and result.base_offset == 0
        assert table.calls == []
        assert replicas.verifications.queue.tails == {}

    run(tmp_path, scenario)


def test_first_write_is_verified_once_per_producer_for_all_its_partitions(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        table.add(TID, PID, EPOCH, ("t", 0), ("t", 1))
        results = await replicas.append(
            -1, 0, [("t", 0, txn_batch(2, seq=0)), ("t", 1, txn_batch(1, seq=0))], TID
        )
        assert [(r.error, r.base_offset) for r in results] == [(None, 0), (None, 0)]
        assert table.calls == [(TID, PID, EPOCH, (("t", 0), ("t", 1)))]
        # The transaction is open on both partitions now: later writes are not verified.
        (again,) = await replicas.append(-1, 0, [("t", 0, txn_batch(1, seq=2))], TID)
        assert again.error is None and again.base_offset == 2
        assert len(table.calls) == 1
        assert lso(replicas) == 0  # the open transaction holds the LSO at its first offset
        assert replicas.verifications.queue.tails == {}

    run(tmp_path, scenario)


def test_a_partition_not_in_the_transaction_is_refused_and_nothing_written(
    tmp_path: Path,
) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        table.add(TID, PID, EPOCH, ("t", 0))
        ok, refused = await replicas.append(
            1, 0, [("t", 0, txn_batch(1, seq=0)), ("t", 1, txn_batch(1, seq=0))], TID
        )
        assert ok.error is None
        assert isinstance(refused.error, InvalidTxnStateError)
        assert log_end(replicas, 1) == 0

    run(tmp_path, scenario)


def test_a_fenced_producer_gets_the_coordinators_error(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        table.fenced_below[PID] = EPOCH + 1
        (result,) = await replicas.append(1, 0, [("t", 0, txn_batch(1, seq=0))], TID)
        assert isinstance(result.error, ProducerFencedError)
        assert log_end(replicas) == 0

    run(tmp_path, scenario)


def test_a_transactional_batch_without_a_transactional_id_is_refused(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        table.add(TID, PID, EPOCH, ("t", 0))
        (result,) = await replicas.append(1, 0, [("t", 0, txn_batch(1, seq=0))], "")
        assert isinstance(result.error, InvalidTxnStateError)
        assert "transactional_id" in str(result.error)
        assert table.calls == [] and log_end(replicas) == 0

    run(tmp_path, scenario)


def test_a_standalone_node_refuses_transactions(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        (result,) = await replicas.append(1, 0, [("t", 0, txn_batch(1, seq=0))], TID)
        assert isinstance(result.error, InvalidTxnStateError)
        assert "without a cluster" in str(result.error)

    run(tmp_path, scenario, verifier=False)


def test_appends_queued_behind_a_verification_keep_arrival_order(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        table.add(TID, PID, EPOCH, ("t", 0))
        table.gate = asyncio.Event()
        first = asyncio.ensure_future(replicas.append(1, 0, [("t", 0, txn_batch(2, seq=0))], TID))
        await until(lambda: table.calls)  # waiting for the coordinator
        # Pipelined behind it: the next batch of the transaction, and a plain write elsewhere.
        second = asyncio.ensure_future(
            replicas.append(1, 0, [("t", 0, txn_batch(1, seq=2)), ("t", 1, plain_batch(1))], TID)
        )
        await asyncio.sleep(0)
        assert log_end(replicas, 0) == 0  # nothing of partition 0 overtook the first
        assert log_end(replicas, 1) == 1  # the other partition did not wait
        table.gate.set()
        (r1,) = await first
        r2, r3 = await second
        assert (r1.error, r1.base_offset) == (None, 0)
        assert (r2.error, r2.base_offset) == (None, 2)
        assert (r3.error, r3.base_offset) == (None, 0)
        assert len(table.calls) == 1  # the queued batch found the transaction open
        assert replicas.verifications.queue.tails == {}

    run(tmp_path, scenario)


def test_a_cancelled_verification_releases_the_partition(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        table.add(TID, PID, EPOCH, ("t", 0))
        table.gate = asyncio.Event()
        first = asyncio.ensure_future(replicas.append(1, 0, [("t", 0, txn_batch(1, seq=0))], TID))
        await until(lambda: table.calls)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert replicas.verifications.queue.tails == {}
        table.gate.set()
        (result,) = await replicas.append(1, 0, [("t", 0, txn_batch(1, seq=0))], TID)
        assert result.error is None and result.base_offset == 0

    run(tmp_path, scenario)


# -- markers, LSO, read_committed -----------------------------------------------------------


async def open_transaction(replicas: ReplicaManager, table: CoordinatorTable, n: int = 3) -> None:
    table.add(TID, PID, EPOCH, ("t", 0))
    await replicas.append(1, 0, [("t", 0, plain_batch(2))])  # offsets 0-1
    (result,) = await replicas.append(1, 0, [("t", 0, txn_batch(n, seq=0))], TID)  # 2..
    assert result.error is None and result.base_offset == 2


def test_commit_marker_moves_the_lso_and_read_committed_sees_the_data(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        await open_transaction(replicas, table)
        committed = await fetch(replicas, read_committed=True)
        assert committed.last_stable_offset == 2 and committed.high_watermark == 5
        assert [h.base_offset for h in headers(committed.records)] == [0]
        uncommitted = await fetch(replicas, read_committed=False)
        assert uncommitted.last_stable_offset == 2
        assert [h.base_offset for h in headers(uncommitted.records)] == [0, 2]
        (result,) = await replicas.write_txn_markers([marker(True)], 1000)
        assert result.producer_id == PID and result.partitions == (("t", 0, None),)
        assert log_end(replicas) == 6 and lso(replicas) == 6
        after = await fetch(replicas, read_committed=True)
        batches = headers(after.records)
        assert [h.base_offset for h in batches] == [0, 2, 5]
        assert batches[-1].is_control
        assert after.aborted_transactions == ()

    run(tmp_path, scenario)


def test_abort_marker_lists_the_aborted_transaction_for_read_committed(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        await open_transaction(replicas, table)
        (result,) = await replicas.write_txn_markers([marker(False)], 1000)
        assert result.partitions == (("t", 0, None),)
        committed = await fetch(replicas, read_committed=True)
        assert committed.last_stable_offset == 6
        assert committed.aborted_transactions == ((PID, 2),)
        uncommitted = await fetch(replicas, read_committed=False)
        assert uncommitted.aborted_transactions == ()
        assert uncommitted.last_stable_offset == 6

    run(tmp_path, scenario)


def test_a_duplicate_marker_writes_nothing_and_a_fenced_coordinator_is_refused(
    tmp_path: Path,
) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        await open_transaction(replicas, table)
        await replicas.write_txn_markers([marker(True, coordinator_epoch=5)], 1000)
        end = log_end(replicas)
        (again,) = await replicas.write_txn_markers([marker(True, coordinator_epoch=5)], 1000)
        assert again.partitions == (("t", 0, None),) and log_end(replicas) == end
        (stale,) = await replicas.write_txn_markers(
            [marker(False, epoch=EPOCH + 1, coordinator_epoch=4)], 1000
        )
        (_, _, error) = stale.partitions[0]
        assert isinstance(error, TransactionCoordinatorFencedError)
        assert log_end(replicas) == end

    run(tmp_path, scenario)


def test_a_marker_ends_the_epoch_even_on_a_partition_the_producer_never_wrote(
    tmp_path: Path,
) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        (result,) = await replicas.write_txn_markers([marker(False, ("t", 1))], 1000)
        assert result.partitions == (("t", 1, None),)
        assert log_end(replicas, 1) == 1
        # A late write of the ended epoch is a zombie's: the coordinator (asked, since only it
        # knows whether the producer keeps its epoch across transactions) fences it ...
        table.fenced_below[PID] = EPOCH + 1
        (late,) = await replicas.append(1, 0, [("t", 1, txn_batch(1, seq=0))], TID)
        assert late.error is not None and late.error.code_name == "PRODUCER_FENCED"
        assert log_end(replicas, 1) == 1
        # ... while the next transaction of a client keeping its epoch is verified and written.
        del table.fenced_below[PID]
        table.add(TID, PID, EPOCH, ("t", 1))
        (kept,) = await replicas.append(1, 0, [("t", 1, txn_batch(1, seq=0))], TID)
        assert kept.error is None and kept.base_offset == 1

    run(tmp_path, scenario)


def test_marker_errors_per_partition(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        follower = replicas.hosted.get("t", 1)
        follower.make_follower(2, 1, replicas=(1, 2), isr=(1, 2))
        (result,) = await replicas.write_txn_markers(
            [marker(True, ("t", 0), ("t", 1), ("nope", 0))], 1000
        )
        errors = [type(e) if e else None for _, _, e in result.partitions]
        assert errors == [None, NotLeaderOrFollowerError, UnknownTopicOrPartitionError]

    run(tmp_path, scenario)


def test_a_marker_waits_for_the_isr_and_times_out_without_it(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        partition = replicas.hosted.get("t", 0)
        partition.make_leader(1, (NODE, 2), replicas=(NODE, 2), partition_epoch=0)
        (timed_out,) = await replicas.write_txn_markers([marker(True)], 50)
        assert isinstance(timed_out.partitions[0][2], RequestTimedOutError)
        # The next marker completes when the follower fetches past it.
        waiting = asyncio.ensure_future(
            replicas.write_txn_markers([marker(True, epoch=EPOCH + 1)], 30000)
        )
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await replicas.fetch(
            [FetchPartitionRequest("t", 0, log_end(replicas), 1 << 20)], replica_id=2
        )
        (result,) = await asyncio.wait_for(waiting, 10)
        assert result.partitions == (("t", 0, None),)
        assert partition.log.high_watermark == 2

    run(tmp_path, scenario)


def test_a_waiting_read_committed_fetch_wakes_when_a_marker_moves_the_lso(
    tmp_path: Path,
) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        await open_transaction(replicas, table)
        # Everything below the LSO was read: a read_committed fetch from 2 waits, although
        # bytes above the LSO are there (they do not count towards min_bytes).
        waiting = asyncio.ensure_future(
            fetch(replicas, 2, read_committed=True, max_wait_ms=60000, min_bytes=1)
        )
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await replicas.write_txn_markers([marker(True)], 1000)
        result = await asyncio.wait_for(waiting, 10)
        assert [h.base_offset for h in headers(result.records)] == [2, 5]
        assert result.last_stable_offset == 6

    run(tmp_path, scenario)


def test_list_offsets_latest_under_read_committed_is_the_lso(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        await open_transaction(replicas, table)
        committed = replicas.list_offset("t", 0, LATEST_TIMESTAMP, read_committed=True)
        uncommitted = replicas.list_offset("t", 0, LATEST_TIMESTAMP)
        assert (committed.error, committed.offset) == (None, 2)
        assert (uncommitted.error, uncommitted.offset) == (None, 5)

    run(tmp_path, scenario)


def test_describe_producers_shows_the_open_transaction_on_leaders_only(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, table: CoordinatorTable) -> None:
        await open_transaction(replicas, table)
        described = replicas.describe_producers("t", 0)
        assert described.error is None
        (producer,) = described.producers
        assert (producer.producer_id, producer.producer_epoch) == (PID, EPOCH)
        assert producer.current_txn_start_offset == 2
        assert producer.last_sequence == 2
        await replicas.write_txn_markers([marker(True)], 1000)
        (after,) = replicas.describe_producers("t", 0).producers
        assert after.current_txn_start_offset == -1 and after.coordinator_epoch == 1
        replicas.hosted.get("t", 1).make_follower(2, 1, replicas=(1, 2), isr=(1, 2))
        assert isinstance(replicas.describe_producers("t", 1).error, NotLeaderOrFollowerError)
        assert isinstance(
            replicas.describe_producers("nope", 0).error, UnknownTopicOrPartitionError
        )

    run(tmp_path, scenario)
