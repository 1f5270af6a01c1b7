"""The producer's C send path (strom.producer._native) against the pure-Python one.

Both producers here are never started (no network): their topic metadata is planted in the
cluster client's cache, and the batches stay in the accumulator, where the test builds them
and compares the bytes.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.errors import StromError
from strom.producer import _native, fast_path
from strom.producer._batch import ProducerBatch, RecordFuture, RecordMetadata
from strom.producer._waits import NeedMetadata, NeedRoom
from strom.producer.aio import Producer
from strom.producer.partitioner import (
    murmur2,
    murmur2_partition,
    murmur2_partition_py,
    murmur2_py,
)
from strom.records import kernel

cproducer = _native.cproducer
needs_c = pytest.mark.skipif(cproducer is None, reason=f"no C fast path: {_native.reason}")

TOPICS = {"a": 3, "b": 1, "c": 6}


def producer(**options: Any) -> Producer:
    """A producer that is never started, with the metadata of ``TOPICS`` cached."""
    options.setdefault("batch_size", 600)
    options.setdefault("buffer_memory", 1 << 24)
    p = Producer("127.0.0.1:1", **options)
    for topic, count in TOPICS.items():
        p._cluster._topics[topic] = tuple(range(count))  # type: ignore[assignment]
    return p


def python_send(p: Producer) -> Any:
    """The pure-Python send of ``p`` (what FastSend falls back to)."""

    def send(  # noqa: PLR0917 - send()'s signature
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: Any = None,
    ) -> RecordFuture:
        return p._try_send(topic, value, key, headers, partition, timestamp_ms, on_delivery)

    return send


def batches(p: Producer) -> dict[tuple[str, int], list[tuple[bytes, int, int, bool]]]:
    """Every queued batch, built: (bytes, count, size, closed) per partition."""
    return {
        pk: [(b.build(), b.count, b.size, b.closed) for b in queue]
        for pk, queue in sorted(p._acc._queues.items())
    }


header = st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=12)))
record = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(sorted(TOPICS)),
        "value": st.one_of(st.none(), st.binary(max_size=120)),
        "key": st.one_of(st.none(), st.binary(max_size=16)),
        "headers": st.one_of(st.none(), st.lists(header, max_size=3)),
        "partition": st.one_of(st.none(), st.none(), st.integers(0, 6)),
        "timestamp_ms": st.integers(-1, 2**45),
        "on_delivery": st.booleans(),
    }
)


def replay(send: Any, records: list[dict[str, Any]], seed: int) -> list[Any]:
    """Send every record, returning each future's fields (or the error's type)."""
    random.seed(seed)  # the sticky partitioner's choices
    out: list[Any] = []
    for r in records:
        args = dict(r, on_delivery=(lambda md, err: None) if r["on_delivery"] else None)
        try:
            f = send(**args)
        except Exception as exc:  # compared between the two paths
            out.append(type(exc).__name__)
            continue
        b = f._batch
        out.append((b.topic, b.partition, f._index, f._timestamp, f._key_size, f._value_size))
    return out


@needs_c
@settings(max_examples=150, deadline=None)
@given(st.lists(record, max_size=40), st.integers(0, 1000), st.booleans())
def test_fast_send_writes_the_same_batches_as_python(
    records: list[dict[str, Any]], seed: int, lists_of_headers: bool
) -> None:
    fast_p, slow_p = producer(), producer()
    fallbacks = [0]
    reference = python_send(fast_p)

    def fallback(*args: Any, **kwargs: Any) -> Any:
        fallbacks[0] += 1
        return reference(*args, **kwargs)

    fast = fast_p._fast_send(fallback, awaitable=False)
    assert isinstance(fast, cproducer.FastSend)  # type: ignore[union-attr]
    if not lists_of_headers:  # tuples of headers take the same path
        records = [dict(r, headers=tuple(r["headers"] or ())) for r in records]
    got_fast = replay(fast, records, seed)
    got_slow = replay(python_send(slow_p), records, seed)
    assert got_fast == got_slow
    # Only errors and each topic's first keyless record (the sticky choice) leave C.
    errors = sum(isinstance(x, str) for x in got_fast)
    assert fallbacks[0] <= errors + len(TOPICS)
    assert batches(fast_p) == batches(slow_p)
    assert fast_p._acc.used == slow_p._acc.used
    deliveries = [
        [len(b.deliveries or ()) for b in q] for _, q in sorted(fast_p._acc._queues.items())
    ]
    expected = [
        [len(b.deliveries or ()) for b in q] for _, q in sorted(slow_p._acc._queues.items())
    ]
    assert deliveries == expected


@needs_c
@given(st.binary(max_size=64), st.integers(1, 1000))
def test_murmur2_matches_the_reference(data: bytes, n: int) -> None:
    assert murmur2(data) == murmur2_py(data)
    assert murmur2_partition(data, n) == murmur2_partition_py(data, n)


@needs_c
def test_unusual_calls_go_to_the_python_path() -> None:
    p = producer(buffer_memory=1000, batch_size=1000)
    calls: list[tuple[Any, ...]] = []
    slow = python_send(p)

    def fallback(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return slow(*args, **kwargs)

    fast = p._fast_send(fallback, awaitable=False)
    fast("a", b"x" * 490, partition=1, timestamp_ms=5)
    assert calls == []  # the fast path took it
    with pytest.raises(NeedMetadata):
        fast("unknown", b"v")
    with pytest.raises(TypeError):
        fast("a", "not bytes", partition=0)
    with pytest.raises(StromError):  # UnknownTopicOrPartitionError
        fast("a", b"v", partition=7)
    with pytest.raises(NeedRoom):
        fast("a", b"x" * 490, partition=0)  # buffer_memory is full
    with pytest.raises(TypeError):
        fast("a", b"v", colour="red")
    assert len(calls) == 5
    p._sender.fatal = StromError("closed")
    with pytest.raises(StromError, match="closed"):
        fast("a", b"v", partition=0)
    # Nothing but the first record was appended.
    assert [b.count for q in p._acc._queues.values() for b in q] == [1]


@needs_c
def test_wall_clock_timestamp_and_metadata() -> None:
    p = producer()
    fast = p._fast_send(python_send(p), awaitable=False)
    before = int(time.time() * 1000)
    f = fast("c", b"value", b"key")
    after = int(time.time() * 1000)
    assert before <= f._timestamp <= after
    assert f._batch.partition == murmur2_partition_py(b"key", 6)
    f._batch.complete(100, -1, None)
    assert f.result(0) == RecordMetadata("c", f._batch.partition, 100, f._timestamp, 3, 5)


@needs_c
def test_on_delivery_and_done_callbacks_run_in_order() -> None:
    p = producer()
    fast = p._fast_send(python_send(p), awaitable=False)
    seen: list[Any] = []
    f0 = fast("a", b"0", partition=0, on_delivery=lambda md, err: seen.append(("d", md.offset)))
    f0.add_done_callback(lambda f: seen.append(("done", f._index)))
    fast("a", b"1", partition=0, on_delivery=lambda md, err: seen.append(("d", md.offset)))
    f0._batch.complete(10, -1, None)
    assert seen == [("d", 10), ("done", 0), ("d", 11)]
    late: list[Any] = []
    f0.add_done_callback(late.append)  # already complete: at once
    assert late == [f0]


@needs_c
def test_async_fast_send_is_awaitable_and_a_coroutine() -> None:
    async def main() -> None:
        p = producer()
        fast = p._fast_send(Producer.send.__get__(p), awaitable=True)
        ready = fast("a", b"v", partition=2)
        assert asyncio.iscoroutine(ready)
        assert isinstance(await ready, RecordFuture)
        task = asyncio.create_task(fast("a", (1, 2), partition=2))  # falls back, then fails
        with pytest.raises(TypeError):
            await task
        via_task = await asyncio.create_task(fast("a", b"w", partition=2))
        assert via_task._index == 1
        unawaited = fast("a", b"x", partition=2)
        unawaited.close()  # the record is queued all the same
        assert p._acc._queues[("a", 2)][-1].count == 3

    asyncio.run(main())


@needs_c
def test_lock_has_threading_locks_interface() -> None:
    lock = cproducer.Lock()  # type: ignore[union-attr]
    assert lock.acquire() and lock.locked()
    assert not lock.acquire(False)
    assert not lock.acquire(timeout=0.01)
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()
    cond = threading.Condition(lock)
    flag: list[int] = []

    def later() -> None:
        with cond:
            flag.append(1)
            cond.notify_all()

    with cond:
        threading.Timer(0.02, later).start()
        assert cond.wait_for(lambda: flag, timeout=10)
    assert not lock.locked()


@needs_c
def test_fast_send_from_many_threads_keeps_every_record() -> None:
    p = producer(batch_size=2000)
    fast = p._fast_send(python_send(p), awaitable=False)
    per_thread = 2000

    def run(n: int) -> None:
        for i in range(per_thread):
            fast("c", b"%d-%d" % (n, i), partition=i % 6, timestamp_ms=1)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queued = [b for q in p._acc._queues.values() for b in q]
    assert sum(b.count for b in queued) == 4 * per_thread
    assert p._acc.used == sum(b.size for b in queued)
    assert all(b.build() for b in queued)


PURE_PATH = """
import time
import strom.producer._native as native
import strom.producer.fast_path as fp
from strom.producer._batch import ProducerBatch, RecordFuture
from strom.producer.aio import Producer
from strom.records import BatchBuilder
print(native.cproducer is None, fp.IMPLEMENTATION, RecordFuture.__mro__[1].__name__,
      Producer("127.0.0.1:1")._fast_send(None, awaitable=False))
b = ProducerBatch("t", 0, BatchBuilder(), time.monotonic())
seen, fs = [], []
for i in range(3):
    idx = b.append(1000 + i, None, b"v", None)
    b.count = idx + 1
    f = RecordFuture(b, idx, 1000 + i, -1, 1)
    b.add_delivery(f, lambda md, err: seen.append(md.offset))
    fs.append(f)
b.complete(7, -1, None)
print(seen, fs[2].result().offset, type(b).__mro__[1].__name__)
"""


def test_env_switch_forces_the_python_path() -> None:
    """STROM_PRODUCER_FAST_PATH=0: no FastSend, and ProducerBatch and RecordFuture on the
    pure-Python bases append, complete and call back as on the C ones."""
    env = dict(os.environ, STROM_PRODUCER_FAST_PATH="0")
    out = subprocess.run(
        [sys.executable, "-c", PURE_PATH], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["True python _PyFutureBase None", "[7, 8, 9] 9 _PyBatchBase"]


def test_fast_path_is_built_wherever_the_codecs_c_twin_is() -> None:
    """A build that silently lost the extension would skip every C test here and leave
    every producer on the slow path: the extension must load unless switched off."""
    if kernel.C is None or os.environ.get("STROM_PRODUCER_FAST_PATH") == "0":
        pytest.skip(f"fast path off on purpose: {_native.reason}")
    assert cproducer is not None, _native.reason


@needs_c
def test_fast_path_is_reported() -> None:
    assert fast_path.IMPLEMENTATION == "c" and fast_path.REASON == ""
    buf = bytearray(b"ab")
    assert fast_path.append_floor is not None
    assert fast_path.append_floor(buf, "t", b"cd") == 2 and buf == b"abcd"


def test_batches_are_producer_batches() -> None:
    p = producer()
    send = p._fast_send(python_send(p), awaitable=False) or python_send(p)
    f = send("a", b"v", partition=0)
    assert isinstance(f._batch, ProducerBatch) and isinstance(f, RecordFuture)
