"""Transactions in the partition log: verified transactional appends, COMMIT/ABORT markers, the
last stable offset, read_committed reads with their aborted transactions, the ``.txnindex``
files, and how all of it survives restarts, recovery, truncation, retention and replication."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from storage_batches import simple_batch

from strom.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from strom.records import BatchBuilder, BatchHeader, walk_batches
from strom_server.runtime.clock import ManualClock
from strom_storage.log import LATEST_TIMESTAMP, FetchIsolation, Log
from strom_storage.log.producer_state import (
    ActiveProducer,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
)
from strom_storage.log.txn_index import AbortedTxn
from strom_storage.log.txn_markers import build_marker_batch

TS = 1_700_000_000_000
PID, PID2 = 1000, 2000
COMMITTED = FetchIsolation.TXN_COMMITTED


def txn_batch(n: int = 1, *, seq: int = 0, pid: int = PID, epoch: int = 0) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    for i in range(n):
        builder.append(TS, None, b"p%d-e%d-s%d" % (pid, epoch, seq + i))
    return builder.build()


def write(log: Log, n: int = 1, *, seq: int = 0, pid: int = PID, epoch: int = 0) -> int:
    """Append a (verified) transactional batch; returns its first offset."""
    info = log.append_as_leader(
        txn_batch(n, seq=seq, pid=pid, epoch=epoch), verified={(pid, epoch)}
    )
    return info.first_offset


def end(
    log: Log, *, committed: bool, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 0
) -> int:
    """Append a marker; returns its offset."""
    info = log.append_txn_marker(
        pid, epoch, committed=committed, coordinator_epoch=coordinator_epoch, leader_epoch=0
    )
    assert info is not None
    return info.first_offset


def replicate(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


def headers(data: bytes | memoryview) -> list[BatchHeader]:
    return [h for _, h in walk_batches(data)]


def aborted_entries(log: Log) -> list[AbortedTxn]:
    return [txn for s in log.segments() for txn in s.txn_index.entries()]


def test_commit_across_several_batches(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(simple_batch(2))  # 0-1
    assert write(log, 2, seq=0) == 2  # 2-3
    assert write(log, 3, seq=2) == 4  # 4-6: continues the open transaction, no verification
    assert log.append_as_leader(txn_batch(1, seq=5)).first_offset == 7
    replicate(log)
    assert log.high_watermark == 8 and log.last_stable_offset == 2
    read = log.reader.read(0, 1 << 20, isolation=COMMITTED)
    assert [h.base_offset for h in headers(read.records)] == [0]
    assert read.last_stable_offset == 2 and read.high_watermark == 8
    assert log.reader.read(0, 1 << 20).last_stable_offset == 2  # always reported

    assert end(log, committed=True) == 8
    replicate(log)
    assert log.last_stable_offset == 9
    read = log.reader.read(0, 1 << 20, isolation=COMMITTED)
    batches = headers(read.records)
    assert [h.base_offset for h in batches] == [0, 2, 4, 7, 8]
    assert batches[-1].is_control and batches[-1].is_transactional
    assert read.aborted_transactions == ()
    assert aborted_entries(log) == []
    assert not any(log.directory.glob("*.txnindex"))  # no abort: no file


def test_abort_across_several_batches_is_listed_for_the_overlapping_reads(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    log.append_as_leader(simple_batch(1))  # 0
    write(log, 2, seq=0)  # 1-2
    write(log, 2, seq=2)  # 3-4
    assert end(log, committed=False, coordinator_epoch=3) == 5
    replicate(log)
    assert log.last_stable_offset == 6
    assert aborted_entries(log) == [AbortedTxn(PID, 1, 5, 6)]
    read = log.reader.read(0, 1 << 20, isolation=COMMITTED)
    assert [h.base_offset for h in headers(read.records)] == [0, 1, 3, 5]
    assert read.aborted_transactions == ((PID, 1),)
    # Only TXN_COMMITTED reads report them.
    assert log.reader.read(0, 1 << 20).aborted_transactions == ()
    # A read of the plain batch alone does not overlap the transaction.
    first_batch = len(simple_batch(1))
    assert log.reader.read(0, first_batch, isolation=COMMITTED).aborted_transactions == ()
    # Neither does a read starting after its marker.
    log.append_as_leader(simple_batch(1))  # 6
    replicate(log)
    assert log.reader.read(6, 1 << 20, isolation=COMMITTED).aborted_transactions == ()
    producer = log.active_producers()[0]
    assert producer == ActiveProducer(PID, 0, 3, TS, 3, -1) or (
        producer.coordinator_epoch == 3 and producer.current_txn_start_offset == -1
    )


def test_lso_stalls_at_an_open_transaction_and_moves_with_marker_and_high_watermark(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    write(log, 1)  # 0
    for _ in range(3):
        log.append_as_leader(simple_batch(1))  # 1, 2, 3
    replicate(log)
    assert log.high_watermark == 4 and log.last_stable_offset == 0
    assert log.reader.offset_for_timestamp(LATEST_TIMESTAMP, isolation=COMMITTED).offset == 0  # type: ignore[union-attr]
    assert log.reader.offset_for_timestamp(LATEST_TIMESTAMP).offset == 4  # type: ignore[union-attr]
    assert log.reader.offset_for_timestamp(TS, isolation=COMMITTED) is None  # nothing stable yet
    assert log.reader.read(0, 1 << 20, isolation=COMMITTED).records == b""
    marker = end(log, committed=True)
    # Until the marker is replicated the transaction still holds the LSO back.
    assert log.last_stable_offset == 0
    log.update_high_watermark(marker)
    assert log.last_stable_offset == 0
    log.update_high_watermark(marker + 1)
    assert log.last_stable_offset == marker + 1 == log.high_watermark
    assert log.reader.offset_for_timestamp(TS, isolation=COMMITTED).offset == 0  # type: ignore[union-attr]


def test_interleaved_transactions_of_two_producers(open_log: Callable[..., Log]) -> None:
    log = open_log()
    write(log, 1, pid=PID)  # 0
    write(log, 1, pid=PID2, epoch=4)  # 1
    write(log, 1, seq=1, pid=PID)  # 2
    write(log, 1, seq=1, pid=PID2, epoch=4)  # 3
    replicate(log)
    assert log.last_stable_offset == 0
    assert end(log, committed=False, pid=PID) == 4  # PID2's transaction is still open
    replicate(log)
    assert log.last_stable_offset == 1
    assert aborted_entries(log) == [AbortedTxn(PID, 0, 4, 1)]
    read = log.reader.read(0, 1 << 20, isolation=COMMITTED)
    assert [h.base_offset for h in headers(read.records)] == [0]
    assert read.aborted_transactions == ((PID, 0),)
    assert end(log, committed=True, pid=PID2, epoch=4) == 5
    replicate(log)
    assert log.last_stable_offset == 6
    read = log.reader.read(0, 1 << 20, isolation=COMMITTED)
    assert [h.base_offset for h in headers(read.records)] == [0, 1, 2, 3, 4, 5]
    assert read.aborted_transactions == ((PID, 0),)
    producers = {p.producer_id: p for p in log.active_producers()}
    assert producers[PID2].producer_epoch == 4 and producers[PID2].last_sequence == 1


def test_zombie_write_after_the_marker_is_refused(open_log: Callable[..., Log]) -> None:
    log = open_log()
    write(log, 2, epoch=5)
    end(log, committed=True, epoch=5)
    late = txn_batch(1, seq=2, epoch=5)
    # At the ended epoch only the coordinator can tell a zombie (refused there) from a client
    # that keeps its epoch across transactions: the write needs verification.
    assert log.transactions_to_verify(late) == {(PID, 5)}
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(late)
    with pytest.raises(InvalidProducerEpochError):  # an older epoch is refused here
        log.append_as_leader(txn_batch(1, epoch=4), verified={(PID, 4)})
    end_before = log.log_end_offset
    # The next transaction, at the next epoch, starts at sequence 0 and needs verification.
    assert log.transactions_to_verify(txn_batch(1, epoch=6)) == {(PID, 6)}
    assert write(log, 1, epoch=6) == end_before


def test_transactions_at_one_epoch_for_clients_that_keep_it(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    write(log, 2, epoch=5)  # 0-1
    assert end(log, committed=True, epoch=5) == 2
    # The next transaction at the same epoch (verified) continues the sequence.
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(txn_batch(1, seq=0, epoch=5), verified={(PID, 5)})
    assert write(log, 1, seq=2, epoch=5) == 3
    assert write(log, 1, seq=3, epoch=5) == 4  # continues the open transaction
    replicate(log)
    assert log.last_stable_offset == 3
    # Its marker (same epoch) is written and ends it; a retry of it then writes nothing.
    assert end(log, committed=False, epoch=5) == 5
    assert (
        log.append_txn_marker(PID, 5, committed=False, coordinator_epoch=0, leader_epoch=0) is None
    )
    replicate(log)
    assert log.last_stable_offset == 6
    read = log.reader.read(0, 1 << 20, isolation=COMMITTED)
    assert read.aborted_transactions == ((PID, 3),)
    # A third one at the same epoch still works.
    assert write(log, 1, seq=4, epoch=5) == 6
    assert end(log, committed=True, epoch=5) == 7


def test_an_unverified_transaction_start_is_refused(open_log: Callable[..., Log]) -> None:
    log = open_log()
    data = txn_batch(2) + txn_batch(1, seq=2, pid=PID2)
    assert log.transactions_to_verify(data) == {(PID, 0), (PID2, 0)}
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data, verified={(PID, 0)})  # one of two
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(2), verified={(PID, 1)})  # another epoch
    assert log.log_end_offset == 0 and log.active_producers() == []
    log.append_as_leader(data, verified={(PID, 0), (PID2, 0)})
    # Open now: continuing needs no verification.
    assert log.transactions_to_verify(txn_batch(1, seq=2)) == set()
    log.append_as_leader(txn_batch(1, seq=2))


def test_non_transactional_writes_of_a_producer_in_a_transaction_and_control_batches(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    write(log, 1)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(simple_batch(1, producer_id=PID, producer_epoch=0, base_sequence=1))
    control = build_marker_batch(
        producer_id=PID, producer_epoch=0, committed=True, coordinator_epoch=0, base_offset=0,
        leader_epoch=0, timestamp_ms=TS,
    )  # fmt: skip
    with pytest.raises(InvalidRecordError):
        log.transactions_to_verify(control)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(control, verified={(PID, 0)})
    no_producer = BatchBuilder(is_transactional=True)
    no_producer.append(TS, None, b"x")
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(no_producer.build())
    # Other producers are not affected; after the marker the producer may write plainly again.
    log.append_as_leader(simple_batch(1, producer_id=PID2, producer_epoch=0, base_sequence=0))
    end(log, committed=True)
    log.append_as_leader(simple_batch(1, producer_id=PID, producer_epoch=1, base_sequence=0))
    assert log.log_end_offset == 4


def test_duplicate_and_stale_markers_write_nothing(open_log: Callable[..., Log]) -> None:
    log = open_log()
    write(log, 1, epoch=2)
    end(log, committed=False, epoch=2, coordinator_epoch=1)
    size = log.log_end_offset
    for epoch, committed in ((2, False), (2, True), (1, False)):
        assert (
            log.append_txn_marker(
                PID, epoch, committed=committed, coordinator_epoch=1, leader_epoch=0
            )
            is None
        )
    assert log.log_end_offset == size
    assert aborted_entries(log) == [AbortedTxn(PID, 0, 1, 2)]


def test_a_lower_coordinator_epoch_is_fenced(open_log: Callable[..., Log]) -> None:
    log = open_log()
    write(log, 1, epoch=0)
    end(log, committed=True, epoch=0, coordinator_epoch=5)
    write(log, 1, epoch=1)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_txn_marker(PID, 1, committed=True, coordinator_epoch=4, leader_epoch=0)
    assert end(log, committed=True, epoch=1, coordinator_epoch=5) == 3  # same epoch is fine
    write(log, 1, epoch=2)
    assert end(log, committed=False, epoch=2, coordinator_epoch=6) == 5


def test_a_marker_for_a_producer_that_wrote_nothing_here_ends_its_epoch(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    log.append_as_leader(simple_batch(1))
    assert end(log, committed=False, epoch=3) == 1
    replicate(log)
    assert aborted_entries(log) == [AbortedTxn(PID, 1, 1, 2)]
    assert log.last_stable_offset == 2
    with pytest.raises(InvalidProducerEpochError):
        log.transactions_to_verify(txn_batch(1, epoch=2))  # below the ended epoch
    (producer,) = log.active_producers()
    assert (producer.producer_epoch, producer.current_txn_start_offset) == (3, -1)


def _mixed_history(log: Log) -> None:
    """Aborted, committed and open transactions over several segments."""
    log.append_as_leader(simple_batch(1))  # 0
    write(log, 2, pid=PID)  # 1-2
    log.roll()
    write(log, 1, pid=PID2)  # 3
    end(log, committed=False, pid=PID, coordinator_epoch=2)  # 4
    log.roll()
    write(log, 1, seq=1, pid=PID2)  # 5
    end(log, committed=True, pid=PID2)  # 6
    write(log, 1, pid=PID2, epoch=1)  # 7
    write(log, 1, pid=PID, epoch=1)  # 8
    end(log, committed=False, pid=PID, epoch=1, coordinator_epoch=2)  # 9
    replicate(log)


def _state(log: Log) -> tuple[object, ...]:
    read = log.reader.read(0, 1 << 20, isolation=COMMITTED)
    return (
        log.log_end_offset,
        log.last_stable_offset,
        log.active_producers(),
        aborted_entries(log),
        bytes(read.records),
        read.aborted_transactions,
        read.last_stable_offset,
    )


def _read_committed(log: Log) -> tuple[bytes, set[tuple[int, int]]]:
    """Everything a read_committed consumer fetches, and the aborted transactions reported."""
    data, offset = b"", log.log_start_offset
    aborted: set[tuple[int, int]] = set()
    while offset < log.last_stable_offset:
        read = log.reader.read(offset, 1 << 20, isolation=COMMITTED)
        data += bytes(read.records)
        aborted.update(read.aborted_transactions)
        offset = headers(read.records)[-1].next_offset
    return data, aborted


def test_clean_restart_keeps_open_transactions_lso_and_txnindex(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    _mixed_history(log)
    assert log.last_stable_offset == 7
    assert aborted_entries(log) == [AbortedTxn(PID, 1, 4, 3), AbortedTxn(PID, 8, 9, 7)]
    before = _state(log)
    log.close()
    reopened = open_log()
    assert reopened.had_clean_shutdown
    assert _state(reopened) == before
    with pytest.raises(InvalidProducerEpochError):
        reopened.transactions_to_verify(txn_batch(1))  # below the ended epoch 1
    reopened.append_as_leader(txn_batch(1, seq=1, pid=PID2, epoch=1))  # still open: no verify


@pytest.mark.parametrize("lose_snapshots", [False, True])
def test_unclean_restart_rebuilds_open_transactions_lso_and_txnindex(
    open_log: Callable[..., Log], lose_snapshots: bool
) -> None:
    log = open_log()
    _mixed_history(log)
    before = _state(log)
    log.checkpoint()  # the high watermark, as the periodic checkpoint writes it
    log.close_unclean()
    # The crash lost the index entries written since the last flush (here: all of them).
    for path in log.directory.glob("*.txnindex"):
        path.unlink()
    if lose_snapshots:
        for path in log.directory.glob("*.snapshot"):
            path.unlink()
    reopened = open_log()
    assert not reopened.had_clean_shutdown
    assert _state(reopened) == before
    assert sorted(p.name for p in reopened.directory.glob("*.txnindex")) == [
        "00000000000000000003.txnindex",
        "00000000000000000005.txnindex",
    ]


def test_truncation_below_an_abort_marker_reopens_the_transaction(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    log.append_as_leader(simple_batch(1))  # 0
    write(log, 2)  # 1-2
    marker = end(log, committed=False)  # 3
    log.append_as_leader(simple_batch(1))  # 4
    replicate(log)
    assert aborted_entries(log) == [AbortedTxn(PID, 1, 3, 4)]
    assert log.truncate_to(marker)
    assert aborted_entries(log) == []
    assert log.last_stable_offset == 1
    (producer,) = log.active_producers()
    assert producer.current_txn_start_offset == 1
    # The marker can be written again (a new leader's coordinator re-sends it).
    assert end(log, committed=False) == 3
    replicate(log)
    assert aborted_entries(log) == [AbortedTxn(PID, 1, 3, 4)]
    assert log.last_stable_offset == 4
    # Truncating into the transaction itself leaves no trace of it.
    log.truncate_to(1)
    assert log.active_producers() == []
    assert log.last_stable_offset == 1 == log.high_watermark


def test_retention_and_delete_records_remove_txnindex_files(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = open_log(file_delete_delay_ms=0)
    write(log, 1)  # 0
    end(log, committed=False)  # 1
    log.roll()
    write(log, 1, epoch=1)  # 2
    end(log, committed=False, epoch=1)  # 3
    log.roll()
    log.append_as_leader(simple_batch(1))  # 4
    replicate(log)
    names = sorted(p.name for p in log.directory.glob("*.txnindex"))
    assert names == ["00000000000000000000.txnindex", "00000000000000000002.txnindex"]
    log.delete_records(2)
    log.maintenance()
    assert sorted(p.name for p in log.directory.glob("*.txnindex")) == names[1:]
    log.delete_records(4)
    log.maintenance()
    assert not any(log.directory.glob("*.txnindex*"))
    assert aborted_entries(log) == []


def test_follower_append_reproduces_the_leader_state(
    open_log: Callable[..., Log], tmp_path: Path, clock: ManualClock
) -> None:
    leader = open_log()
    _mixed_history(leader)
    data = leader.reader.read(0, 1 << 30, isolation=FetchIsolation.LOG_END).records
    assert data  # the first segment only: the follower fetches segment by segment
    follower = Log.open(tmp_path / "follower-0", leader.config, clock=clock)
    offset = 0
    while offset < leader.log_end_offset:
        chunk = leader.reader.read(offset, 1 << 30, isolation=FetchIsolation.LOG_END).records
        follower.append_as_follower(chunk)
        offset = headers(chunk)[-1].next_offset
    follower.update_high_watermark(leader.high_watermark)
    # Segment boundaries differ (a follower rolls on its own): compare whole reads.
    assert _state(follower)[:4] == _state(leader)[:4]
    assert _read_committed(follower) == _read_committed(leader)
    # The follower, made leader, refuses the zombie (an epoch below the ended one; at the
    # ended one it asks the coordinator) and knows the open transaction.
    with pytest.raises(InvalidProducerEpochError):
        follower.append_as_leader(txn_batch(1), verified={(PID, 0)})
    assert follower.transactions_to_verify(txn_batch(1, seq=1, epoch=1)) == {(PID, 1)}
    assert follower.transactions_to_verify(txn_batch(1, seq=1, pid=PID2, epoch=1)) == set()
    follower.close()


def test_a_version_1_snapshot_still_loads(open_log: Callable[..., Log]) -> None:
    entry = ProducerStateEntry(5, 2, last_timestamp=99)
    (decoded,) = decode_snapshot(encode_snapshot([entry], version=1))
    assert decoded == entry and decoded.ended_epoch == -1 and decoded.txn_first_offset == -1
    v2 = ProducerStateEntry(6, 3, last_timestamp=9, ended_epoch=2, coordinator_epoch=7,
                            txn_first_offset=40)  # fmt: skip
    assert decode_snapshot(encode_snapshot([v2])) == [v2]

    log = open_log()
    log.append_as_leader(simple_batch(2, producer_id=PID, producer_epoch=0, base_sequence=0))
    log.close()
    (snapshot,) = log.directory.glob("*.snapshot")
    entries = decode_snapshot(snapshot.read_bytes())
    snapshot.write_bytes(encode_snapshot(entries, version=1))
    reopened = open_log()
    assert reopened.producer_state.producers[PID].last_seq == 1  # from the v1 snapshot
    dup = reopened.append_as_leader(
        simple_batch(2, producer_id=PID, producer_epoch=0, base_sequence=0)
    )
    assert dup.duplicate


def test_expiration_keeps_producers_with_an_open_transaction(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = open_log(producer_id_expiration_ms=1000)
    write(log, 1, pid=PID)
    log.append_as_leader(simple_batch(1, producer_id=PID2, producer_epoch=0, base_sequence=0))
    clock.advance_ms(5000)
    log.maintenance()
    assert [p.producer_id for p in log.active_producers()] == [PID]


def test_crash_recovery_rebuilds_lost_txnindex_entries_past_the_recovery_point(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    for epoch in range(3):  # flushed and checkpointed: these entries survive the crash
        write(log, 1, epoch=epoch)
        end(log, committed=False, epoch=epoch)
        log.roll()
    log.maintenance()  # fsyncs the rolled segments, checkpoints the recovery point
    recovered_from = log.recovery_point
    assert recovered_from == log.log_end_offset == 6
    for epoch in range(3, 7):  # unflushed: a power failure loses their index entries
        write(log, 1, epoch=epoch)
        write(log, 1, seq=epoch - 3, pid=PID2)
        end(log, committed=epoch % 2 == 0, epoch=epoch, coordinator_epoch=1)
        log.roll()
    write(log, 1, epoch=7)
    replicate(log)
    before = _state(log)
    # Snapshots are kept back to the segment recovery starts from, not only the newest two.
    assert min(int(p.name.split(".")[0]) for p in log.directory.glob("*.snapshot")) <= 6
    log.checkpoint()
    log.close_unclean()
    for path in log.directory.glob("*.txnindex"):
        if int(path.name.split(".")[0]) >= recovered_from:
            path.unlink()
    reopened = open_log()
    assert _state(reopened) == before
    assert len(aborted_entries(reopened)) == 5


def test_size_retention_renames_then_deletes_the_txnindex_with_its_segment(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = open_log(retention_bytes=1, file_delete_delay_ms=1000)
    write(log, 1)
    end(log, committed=False)
    log.roll()
    log.append_as_leader(simple_batch(1))
    replicate(log)
    assert (log.directory / "00000000000000000000.txnindex").exists()
    assert log.apply_retention() == 1
    assert not (log.directory / "00000000000000000000.txnindex").exists()
    assert (log.directory / "00000000000000000000.txnindex.deleted").exists()
    clock.advance_ms(1000)
    log.maintenance()
    assert not any(log.directory.glob("*.txnindex*"))
    assert log.reader.read(2, 1 << 20, isolation=COMMITTED).aborted_transactions == ()


def test_a_retried_batch_of_an_ended_epoch_is_verified_before_it_counts_as_a_duplicate(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    write(log, 1, epoch=2)
    end(log, committed=False, epoch=2)
    retried = txn_batch(1, epoch=2)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(retried)
    assert log.transactions_to_verify(retried) == {(PID, 2)}
    # Verified (a client keeping its epoch, in its next transaction): the usual duplicate.
    info = log.append_as_leader(retried, verified={(PID, 2)})
    assert info.first_offset == 0


def test_the_ended_epoch_is_a_zombies_once_a_newer_epoch_wrote(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    write(log, 1, epoch=2)
    end(log, committed=True, epoch=2)
    write(log, 1, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        log.transactions_to_verify(txn_batch(1, seq=1, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(1, seq=1, epoch=2), verified={(PID, 2)})
