"""Idempotent appends: duplicates, sequence gaps, fencing, and state across restarts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from storage_batches import make_batch

from strom.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
)
from strom_server.runtime.clock import ManualClock
from strom_storage.log import Log
from strom_storage.log.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
)


def _batch(pid: int, epoch: int, seq: int, n: int = 1, ts: int = 1_700_000_000_000) -> bytes:
    return make_batch([(None, b"v%d" % i, ts) for i in range(n)], producer_id=pid,
                      producer_epoch=epoch, base_sequence=seq)  # fmt: skip


def test_duplicate_batch_returns_original_offsets(open_log: Callable[..., Log]) -> None:
    log = open_log()
    first = log.append_as_leader(_batch(1, 0, 0, n=3))
    log.append_as_leader(_batch(2, 0, 0, n=2))
    second = log.append_as_leader(_batch(1, 0, 3, n=2))
    end = log.log_end_offset
    retry = log.append_as_leader(_batch(1, 0, 0, n=3))
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    retry = log.append_as_leader(_batch(1, 0, 3, n=2))
    assert (retry.first_offset, retry.last_offset) == (second.first_offset, second.last_offset)
    assert log.log_end_offset == end


def test_a_retry_of_several_batches_answers_for_all_of_them(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    first = log.append_as_leader(_batch(1, 0, 0, n=2) + _batch(1, 0, 2, n=3))
    end = log.log_end_offset
    retry = log.append_as_leader(_batch(1, 0, 0, n=2) + _batch(1, 0, 2, n=3))
    assert retry.duplicate and log.log_end_offset == end
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)


def test_a_retry_mixed_with_new_batches_is_refused_whole(open_log: Callable[..., Log]) -> None:
    """Skipping the whole append would drop the new batch; writing it whole would duplicate."""
    log = open_log()
    log.append_as_leader(_batch(1, 0, 0, n=2))
    end = log.log_end_offset
    with pytest.raises(DuplicateSequenceNumberError, match="mixes batches already written"):
        log.append_as_leader(_batch(1, 0, 0, n=2) + _batch(1, 0, 2, n=1))
    assert log.log_end_offset == end
    assert log.append_as_leader(_batch(1, 0, 2, n=1)).first_offset == end


def test_only_last_five_batches_are_remembered(open_log: Callable[..., Log]) -> None:
    log = open_log()
    for seq in range(7):
        log.append_as_leader(_batch(1, 0, seq))
    assert log.append_as_leader(_batch(1, 0, 2)).duplicate
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(_batch(1, 0, 1))  # older than the five remembered


def test_gap_is_out_of_order(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(_batch(1, 0, 0))
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(_batch(1, 0, 2))
    assert log.append_as_leader(_batch(1, 0, 1)).first_offset == 1


def test_new_producer_may_start_anywhere_new_epoch_must_start_at_zero(
    open_log: Callable[..., Log],
) -> None:
    log = open_log()
    log.append_as_leader(_batch(1, 0, 42))
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(_batch(1, 1, 5))
    log.append_as_leader(_batch(1, 1, 0))
    assert log.producer_state.last_entry(1).producer_epoch == 1  # type: ignore[union-attr]


def test_stale_epoch_is_fenced(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(_batch(1, 3, 0))
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(_batch(1, 2, 1))


def test_sequence_wraps_at_int31(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(_batch(1, 0, (1 << 31) - 1))
    log.append_as_leader(_batch(1, 0, 0))


def test_state_survives_clean_restart(open_log: Callable[..., Log]) -> None:
    log = open_log()
    first = log.append_as_leader(_batch(1, 0, 0, n=2))
    log.close()
    assert list(log.directory.glob("*.snapshot"))
    reopened = open_log()
    retry = reopened.append_as_leader(_batch(1, 0, 0, n=2))
    assert retry.duplicate and retry.first_offset == first.first_offset
    with pytest.raises(OutOfOrderSequenceNumberError):
        reopened.append_as_leader(_batch(1, 0, 5))


def test_state_rebuilt_from_log_tail_after_unclean_stop(open_log: Callable[..., Log]) -> None:
    log = open_log(segment_bytes=len(_batch(1, 0, 0)) * 2)
    for seq in range(5):  # rolls take snapshots; the tail after the last one is replayed
        log.append_as_leader(_batch(1, 0, seq))
    last = log.append_as_leader(_batch(1, 0, 5))
    log.close_unclean()
    reopened = open_log(segment_bytes=len(_batch(1, 0, 0)) * 2)
    retry = reopened.append_as_leader(_batch(1, 0, 5))
    assert retry.duplicate and retry.first_offset == last.first_offset
    assert reopened.append_as_leader(_batch(1, 0, 6)).first_offset == 6


def test_state_rebuilt_without_any_snapshot(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(_batch(7, 2, 0, n=4))
    log.close_unclean()
    for snap in log.directory.glob("*.snapshot"):
        snap.unlink()
    reopened = open_log()
    with pytest.raises(InvalidProducerEpochError):
        reopened.append_as_leader(_batch(7, 1, 0))
    assert reopened.append_as_leader(_batch(7, 2, 0, n=4)).duplicate


def test_corrupt_snapshot_is_ignored(open_log: Callable[..., Log], tmp_path: Path) -> None:
    log = open_log()
    log.append_as_leader(_batch(1, 0, 0))
    log.close()
    snap = sorted(log.directory.glob("*.snapshot"))[-1]
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0xFF
    snap.write_bytes(bytes(data))
    (log.directory / ".clean-shutdown").unlink()
    reopened = open_log()
    assert reopened.append_as_leader(_batch(1, 0, 0)).duplicate  # rebuilt from the log


def test_snapshot_round_trip() -> None:
    entry = ProducerStateEntry(5, 2, last_timestamp=99)
    entry.batches.append(BatchMetadata(0, 4, 100, 4, 98))
    entry.batches.append(BatchMetadata(5, 5, 105, 0, 99))
    (decoded,) = decode_snapshot(encode_snapshot([entry]))
    assert decoded == entry


def test_truncation_reloads_state(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(_batch(1, 0, 0))
    log.append_as_leader(_batch(1, 0, 1))
    log.truncate_to(1)
    assert log.log_end_offset == 1
    assert log.append_as_leader(_batch(1, 0, 1)).first_offset == 1  # not a duplicate now


def test_idle_producers_expire(open_log: Callable[..., Log], clock: ManualClock) -> None:
    log = open_log(producer_id_expiration_ms=1000)
    log.append_as_leader(_batch(1, 0, 0, ts=clock.time_ms()))
    clock.advance_ms(500)
    log.maintenance()
    assert log.producer_state.last_entry(1) is not None
    clock.advance_ms(1000)
    log.maintenance()
    assert log.producer_state.last_entry(1) is None
    log.append_as_leader(_batch(1, 0, 17, ts=clock.time_ms()))  # unknown again: any sequence
