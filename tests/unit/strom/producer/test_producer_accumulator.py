"""The record accumulator: batching by size and linger, the buffer-memory bound, retries."""

from __future__ import annotations

import asyncio
import threading
import time

from strom.producer._accumulator import RECORD_OVERHEAD, Accumulator, record_size
from strom.records import Compression, decode_batch


def make(
    batch_size: int = 1000, buffer_memory: int = 1 << 20, linger_ms: float = 50
) -> Accumulator:
    return Accumulator(
        batch_size=batch_size,
        buffer_memory=buffer_memory,
        linger_ms=linger_ms,
        compression=Compression.NONE,
    )


def value(n: int) -> bytes:
    return b"v" * (n - RECORD_OVERHEAD)  # a record of n estimated bytes


def test_batches_close_at_batch_size() -> None:
    acc = make(batch_size=1000)
    wakes = []
    acc.wakeup = lambda: wakes.append(1)
    placed = [acc.append("t", 0, 1, None, value(100), None, 100) for _ in range(25)]
    batches = []
    for got in placed:
        assert got is not None
        if got[0] not in batches:
            batches.append(got[0])
    assert [b.count for b in batches] == [10, 10, 5]
    assert [b.closed for b in batches] == [True, True, False]
    assert [index for _, index in placed[:12]] == [*range(10), 0, 1]
    assert len(wakes) >= 3  # every new batch and every full one wakes the sender
    ready, _ = acc.ready(time.monotonic())
    assert ready == [("t", 0)]
    first = acc.pop(("t", 0), time.monotonic())
    assert first is batches[0]
    decoded = decode_batch(first.build())
    assert len(decoded.records) == 10 and decoded.records[3].value == value(100)


def test_an_oversized_record_gets_a_batch_of_its_own() -> None:
    acc = make(batch_size=1000)
    small = acc.append("t", 0, 1, None, value(100), None, 100)
    big = acc.append("t", 0, 1, None, value(3000), None, 3000)
    assert small is not None and big is not None
    assert small[0] is not big[0] and big[1] == 0 and big[0].closed


def test_linger_makes_a_partial_batch_ready() -> None:
    acc = make(linger_ms=50)
    acc.append("t", 1, 1, b"k", b"v", None, 20)
    now = time.monotonic()
    ready, next_at = acc.ready(now)
    assert ready == [] and next_at is not None and 0 < next_at - now <= 0.05
    assert acc.pop(("t", 1), now) is None
    ready, _ = acc.ready(now + 0.06)
    assert ready == [("t", 1)]
    acc.flushing += 1
    acc.append("t", 2, 1, b"k", b"v", None, 20)
    ready, _ = acc.ready(now)
    assert sorted(ready) == [("t", 1), ("t", 2)]


def test_buffer_memory_is_a_hard_bound() -> None:
    acc = make(batch_size=1000, buffer_memory=1000)
    placed = [acc.append("t", 0, 1, None, value(100), None, 100) for _ in range(10)]
    assert all(p is not None for p in placed)
    assert acc.used == 1000
    assert acc.append("t", 0, 1, None, value(100), None, 100) is None
    started = time.monotonic()
    assert not acc.wait_for_room(100, 0.1)
    assert time.monotonic() - started >= 0.09
    batch = acc.pop(("t", 0), time.monotonic())
    assert batch is not None

    def release_later() -> None:
        time.sleep(0.05)
        acc.release(batch)

    threading.Thread(target=release_later).start()
    assert acc.wait_for_room(100, 5)
    assert acc.used == 0 and acc.append("t", 0, 1, None, value(100), None, 100) is not None


def test_async_wait_for_room() -> None:
    acc = make(batch_size=100, buffer_memory=100)
    got = acc.append("t", 0, 1, None, value(100), None, 100)
    assert got is not None

    async def main() -> tuple[bool, bool]:
        timed_out = await acc.wait_for_room_async(50, 0.05)
        asyncio.get_running_loop().call_later(0.02, acc.release, got[0])
        return timed_out, await acc.wait_for_room_async(50, 5)

    assert asyncio.run(main()) == (False, True)


def test_bad_record_adds_nothing() -> None:
    acc = make()
    try:
        acc.append("t", 0, 1, None, "not bytes", None, 20)  # type: ignore[arg-type]
    except TypeError:
        pass
    else:
        raise AssertionError("expected TypeError")
    assert acc.used == 0 and acc.queued() == 0 and not acc.incomplete


def test_retries_go_back_in_order_ahead_of_new_batches() -> None:
    acc = make(batch_size=100, linger_ms=0)
    for _ in range(3):
        acc.append("t", 0, 1, None, value(100), None, 100)
    now = time.monotonic()
    a, b, c = (acc.pop(("t", 0), now) for _ in range(3))
    assert a and b and c
    for seq, batch in enumerate((a, b, c)):
        batch.base_sequence = seq * 10
        batch.attempts = 1
        batch.retry_at = now + 0.05
    acc.append("t", 0, 1, None, value(100), None, 100)  # a new batch behind them
    acc.reenqueue(c)
    acc.reenqueue(a)
    acc.reenqueue(b)
    assert acc.pop(("t", 0), now) is None  # backoff not over
    later = now + 0.06
    popped = [acc.pop(("t", 0), later) for _ in range(4)]
    assert popped[:3] == [a, b, c] and popped[3] is not None and popped[3].attempts == 0


def test_expired_batches_are_taken_out() -> None:
    acc = make()
    acc.append("t", 0, 1, None, b"x", None, 20)
    now = time.monotonic()
    assert acc.take_expired(now, 10) == []
    expired = acc.take_expired(now + 11, 10)
    assert len(expired) == 1 and acc.queued() == 0


def test_append_many_and_record_size() -> None:
    acc = make(batch_size=1000)
    batch = acc.append_many("t", 0, [1, 2], [None, b"k"], [b"a", b"b"], None, 50)
    assert batch is not None and batch.count == 2
    assert record_size(b"k", b"vv", [("h", b"x")]) == RECORD_OVERHEAD + 3 + 1 + 1 + 4
    records = decode_batch(batch.build()).records
    assert [(r.key, r.value, r.timestamp) for r in records] == [(None, b"a", 1), (b"k", b"b", 2)]
