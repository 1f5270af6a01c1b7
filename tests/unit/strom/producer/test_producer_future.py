"""RecordFuture, ProducerBatch completion and the send_many tracker (no network)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from strom.errors import NotLeaderOrFollowerError, StromError, StromTimeoutError
from strom.producer._batch import ProducerBatch, RecordFuture, RecordMetadata
from strom.producer._bulk import BulkTracker
from strom.producer._idempotence import ProducerIdState, restamp
from strom.records import BatchBuilder, read_header, validate_batch


def batch_with(count: int) -> tuple[ProducerBatch, list[RecordFuture]]:
    batch = ProducerBatch("t", 2, BatchBuilder(), time.monotonic())
    futures = []
    for i in range(count):
        index = batch.append(1000 + i, b"k", b"value", None)
        batch.count = index + 1
        futures.append(RecordFuture(batch, index, 1000 + i, 1, 5))
    return batch, futures


def test_one_completion_settles_every_record() -> None:
    batch, futures = batch_with(3)
    assert not any(f.done() for f in futures)
    with pytest.raises(StromTimeoutError):
        futures[0].result(timeout=0.01)
    seen: list[RecordFuture] = []
    futures[1].add_done_callback(seen.append)
    batch.complete(40, -1, None)
    assert all(f.done() for f in futures) and seen == [futures[1]]
    assert futures[2].result() == RecordMetadata("t", 2, 42, 1002, 1, 5)
    assert futures[0].exception() is None
    late: list[RecordFuture] = []
    futures[0].add_done_callback(late.append)  # already done: runs at once
    assert late == [futures[0]]
    batch.complete(99, -1, NotLeaderOrFollowerError())  # a second completion is ignored
    assert futures[0].result().offset == 40


def test_failure_and_log_append_time() -> None:
    batch, futures = batch_with(2)
    error = NotLeaderOrFollowerError("t-2: moved")
    batch.complete(-1, -1, error)
    with pytest.raises(NotLeaderOrFollowerError):
        futures[0].result()
    assert futures[1].exception() is error
    other, more = batch_with(1)
    other.complete(7, 555, None)
    assert more[0].result().timestamp == 555


def test_blocking_waiters_wake_from_another_thread() -> None:
    batch, futures = batch_with(1)
    threading.Timer(0.05, batch.complete, (0, -1, None)).start()
    assert futures[0].result(timeout=5).offset == 0


def test_a_failing_callback_does_not_stop_the_others() -> None:
    batch, futures = batch_with(2)
    calls: list[int] = []

    def bad(_f: RecordFuture) -> None:
        raise RuntimeError("user bug")

    futures[0].add_done_callback(bad)
    futures[1].add_done_callback(lambda f: calls.append(1))
    batch.complete(0, -1, None)
    assert calls == [1]


def test_await_record_future() -> None:
    async def main() -> RecordMetadata:
        batch, futures = batch_with(1)
        asyncio.get_running_loop().call_later(0.01, batch.complete, 5, -1, None)
        return await futures[0]

    assert asyncio.run(main()).offset == 5

    async def from_thread() -> RecordMetadata:
        batch, futures = batch_with(1)
        threading.Timer(0.02, batch.complete, (6, -1, None)).start()
        return await futures[0]

    assert asyncio.run(from_thread()).offset == 6


def test_blocking_the_producers_loop_thread_is_refused() -> None:
    async def main() -> str:
        batch, futures = batch_with(1)
        with pytest.raises(StromTimeoutError):
            futures[0].result(timeout=0.01)  # not the producer's loop: waits
        batch.loop = asyncio.get_running_loop()
        with pytest.raises(StromTimeoutError):
            futures[0].result(timeout=0)
        try:
            futures[0].result()
        except StromError as exc:
            return str(exc)
        return "no error"

    assert "event-loop thread" in asyncio.run(main())


def test_bulk_tracker_counts_chunks() -> None:
    outcomes: list[tuple[int, BaseException | None]] = []
    tracker = BulkTracker(lambda n, e: outcomes.append((n, e)))
    a, _ = batch_with(2)
    b, _ = batch_with(3)
    tracker.track(a, 2)
    tracker.track(b, 3)
    tracker.seal()
    a.complete(0, -1, None)
    assert outcomes == []
    b.complete(0, -1, None)
    assert outcomes == [(5, None)]
    failed: list[tuple[int, BaseException | None]] = []
    tracker = BulkTracker(lambda n, e: failed.append((n, e)))
    c, _ = batch_with(1)
    tracker.track(c, 1)
    c.complete(-1, -1, NotLeaderOrFollowerError())
    tracker.seal()
    assert isinstance(failed[0][1], NotLeaderOrFollowerError)


def test_restamp_sets_producer_fields_and_a_valid_crc() -> None:
    builder = BatchBuilder()
    builder.append(1, None, b"x")
    builder.append(2, None, b"y")
    stamped = restamp(builder.build(), 4711, 3, 99)
    header = read_header(stamped)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4711, 3, 99)
    validate_batch(stamped)


def test_sequences_per_partition() -> None:
    state = ProducerIdState()
    state.set_id(9, 0)
    assert state.assign(("t", 0), 5) == 0
    assert state.assign(("t", 0), 3) == 5
    assert state.assign(("t", 1), 1) == 0
    assert state.is_next(("t", 0), 0) and not state.is_next(("t", 0), 5)
    state.acknowledge(("t", 0), 0, 5)
    assert state.is_next(("t", 0), 5)
    state.sequences[("t", 2)] = 2**31 - 2
    assert state.assign(("t", 2), 4) == 2**31 - 2 and state.sequences[("t", 2)] == 2
    state.reset()
    assert not state.has_id and state.assign(("t", 0), 1) == 0
