"""The consumer's pieces that need no cluster: decoding fetched chunks against a position,
per-partition state, draining buffered data in ``poll``, and option validation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from strom.aio import Consumer as AioConsumer
from strom.consumer._fetcher import decode_records, next_fetch_offset
from strom.consumer._subscription import SubscriptionState
from strom.errors import ConfigurationError, InvalidGroupIdError
from strom.records import BatchBuilder, encode_batch
from strom.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

TP = TopicPartition("t", 0)


def batch(base: int, count: int, **options: Any) -> bytes:
    return encode_batch(
        [(1000 + i, f"k{base + i}".encode(), f"v{base + i}".encode()) for i in range(count)],
        base_offset=base,
        **options,
    )


# -- decode_records ------------------------------------------------------------------------------


def test_decode_whole_batches_from_position() -> None:
    raw = batch(0, 10) + batch(10, 10, compression="lz4")
    records, next_offset = decode_records(raw, TP, 0)
    assert [r.offset for r in records] == list(range(20))
    assert next_offset == 20
    first = records[0]
    assert isinstance(first, ConsumerRecord)
    assert (first.topic, first.partition, first.key, first.value) == ("t", 0, b"k0", b"v0")
    assert first.timestamp == 1000 and first.timestamp_type == 0
    assert first.serialized_key_size == 2 and first.serialized_value_size == 2
    assert first.headers == () and first.leader_epoch == -1


def test_records_below_the_position_are_skipped() -> None:
    """A fetch returns whole batches: a position inside one skips its first records."""
    raw = batch(0, 10) + batch(10, 10)
    records, next_offset = decode_records(raw, TP, 13)
    assert [r.offset for r in records] == list(range(13, 20))
    assert next_offset == 20
    assert decode_records(raw, TP, 20) == ([], 20)


def test_gaps_and_control_batches_advance_the_next_offset() -> None:
    control = encode_batch([(0, b"\x00\x00\x00\x00", b"")], base_offset=25, is_control=True)
    raw = batch(0, 5) + batch(20, 5) + control
    records, next_offset = decode_records(raw, TP, 0)
    assert [r.offset for r in records] == [0, 1, 2, 3, 4, 20, 21, 22, 23, 24]
    assert next_offset == 26  # past the control batch, which is not delivered


def test_truncated_tail_is_ignored() -> None:
    raw = batch(0, 5) + batch(5, 5)[:-3]
    records, next_offset = decode_records(raw, TP, 0)
    assert [r.offset for r in records] == list(range(5))
    assert next_offset == 5
    assert next_fetch_offset(raw) == 5
    assert next_fetch_offset(batch(0, 5)[:20]) is None
    assert next_fetch_offset(b"") is None


def test_nulls_deserializers_epoch_and_log_append_time() -> None:
    builder = BatchBuilder(base_offset=7, partition_leader_epoch=4, log_append_time=True)
    builder.append(5, None, b"x", [("h", b"1")])
    builder.append(6, b"key", None)
    records, _ = decode_records(builder.build(), TP, 0, bytes.decode, bytes.decode)
    assert [(r.key, r.value) for r in records] == [(None, "x"), ("key", None)]
    assert [(r.serialized_key_size, r.serialized_value_size) for r in records] == [(-1, 1), (3, -1)]
    assert records[0].headers == (("h", b"1"),)
    assert all(r.leader_epoch == 4 and r.timestamp_type == 1 for r in records)


# -- SubscriptionState ---------------------------------------------------------------------------


def test_assign_and_subscribe_exclude_each_other() -> None:
    subs = SubscriptionState("latest")
    subs.assign([TP])
    with pytest.raises(ConfigurationError, match="unsubscribe"):
        subs.subscribe(["t"], None, None)
    subs.unsubscribe()
    subs.subscribe(None, r"t.*", None)
    assert subs.matches("tx") and not subs.matches("x")
    with pytest.raises(ConfigurationError, match="unsubscribe"):
        subs.assign([TP])
    with pytest.raises(ConfigurationError, match="either"):
        SubscriptionState("latest").subscribe(["a"], "b", None)
    with pytest.raises(TypeError):
        SubscriptionState("latest").assign([("t", 0)])  # type: ignore[list-item]


def test_new_partitions_reset_by_strategy_and_seek_bumps_generation() -> None:
    subs = SubscriptionState("earliest")
    subs.assign([TP])
    st = subs.state(TP)
    assert st.reset == "earliest" and not st.has_valid_position
    assert subs.fetchable(0.0, 100) == []  # no position yet
    st.seek(42)
    assert st.position == st.fetch_offset == 42 and st.generation == 1
    assert subs.fetchable(0.0, 100) == [TP]
    st.raw.append(b"x" * 200)
    st.raw_bytes = 200
    assert subs.fetchable(0.0, 100) == []  # enough buffered
    st.seek(7)
    assert not st.raw and st.raw_bytes == 0 and st.generation == 2
    st.request_reset("latest")
    assert st.position is None and st.reset == "latest" and st.generation == 3
    none = SubscriptionState("none")
    none.assign([TP])
    assert none.state(TP).reset is None and none.state(TP).position is None
    with pytest.raises(ConfigurationError, match="auto_offset_reset"):
        SubscriptionState("smallest")
    with pytest.raises(ConfigurationError, match="not assigned"):
        subs.state(TopicPartition("other", 0))


def test_paused_backing_off_and_in_flight_partitions_are_not_fetched() -> None:
    subs = SubscriptionState("latest")
    tps = [TopicPartition("t", p) for p in range(4)]
    subs.assign(tps)
    for tp in tps:
        subs.state(tp).seek(0)
    subs.state(tps[0]).paused = True
    subs.state(tps[1]).inflight = True
    subs.state(tps[2]).backoff_until = 10.0
    assert subs.fetchable(5.0, 100) == [tps[3]]
    assert subs.fetchable(10.0, 100) == [tps[2], tps[3]]


# -- the consumer without a cluster --------------------------------------------------------------


def run(coro_fn: Callable[[AioConsumer], Any], **options: Any) -> Any:
    async def main() -> Any:
        # Nothing listens there: these tests never need the network.
        consumer = AioConsumer(bootstrap_servers="127.0.0.1:1", **options)
        try:
            return await coro_fn(consumer)
        finally:
            await consumer.close()

    return asyncio.run(main())


def test_poll_drains_buffered_chunks_with_exact_positions() -> None:
    async def scenario(c: AioConsumer) -> None:
        c.assign([TP])
        st = c._subs.state(TP)
        st.seek(3)
        for raw in (batch(0, 10), batch(10, 10)):
            st.raw.append(raw)
            st.raw_bytes += len(raw)
        got = await c.poll(max_records=4)
        assert [r.offset for r in got[TP]] == [3, 4, 5, 6]
        assert await c.position(TP) == 7
        got = await c.poll(max_records=100)
        assert [r.offset for r in got[TP]] == list(range(7, 20))
        assert await c.position(TP) == 20
        assert await c.poll() == {}
        c.seek(TP, 15)  # prefetched data is dropped
        assert not st.buffered() and await c.position(TP) == 15
        c.pause(TP)
        st.raw.append(batch(15, 5))
        assert await c.poll() == {} and c.paused() == {TP}
        c.resume(TP)
        assert [r.offset for r in (await c.poll())[TP]] == list(range(15, 20))

    run(scenario, max_poll_records=500)


def test_poll_is_fair_across_partitions() -> None:
    async def scenario(c: AioConsumer) -> None:
        tps = [TopicPartition("t", p) for p in range(3)]
        c.assign(tps)
        for tp in tps:
            st = c._subs.state(tp)
            st.seek(0)
            st.raw.append(batch(0, 10))
        seen = []
        for _ in range(3):
            seen.append(next(iter(await c.poll(max_records=10))))
        assert sorted(seen) == tps

    run(scenario)


def test_commit_needs_a_group() -> None:
    async def no_group(c: AioConsumer) -> None:
        with pytest.raises(InvalidGroupIdError, match="group_id"):
            await c.commit()
        with pytest.raises(InvalidGroupIdError):
            await c.committed(TP)
        c.assign([TP])
        c._subs.state(TP).seek(5)
        seen: list[Any] = []
        future = c.commit_async(callback=lambda offsets, exc: seen.append((offsets, exc)))
        with pytest.raises(InvalidGroupIdError):
            await future
        assert seen[0][0] == {TP: OffsetAndMetadata(5)}

    run(no_group)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"auto_offset_reset": "smallest"}, "auto_offset_reset"),
        ({"isolation_level": "dirty"}, "isolation_level"),
        ({"max_poll_records": 0}, "max_poll_records"),
        ({"fetch_max_bytes": -1}, "fetch_max_bytes"),
        ({"max_partition_fetch_bytes": 0}, "max_partition_fetch_bytes"),
        ({"group_id": ""}, "group_id"),
        ({"value_deserializer": "utf-8"}, "value_deserializer"),
        ({"bootstrap_servers": ""}, "bootstrap_servers"),
        ({"request_timeout_ms": 0}, "request_timeout_ms"),
    ],
)
def test_invalid_options_name_the_option(options: dict[str, Any], fragment: str) -> None:
    options.setdefault("bootstrap_servers", "127.0.0.1:1")
    with pytest.raises(ConfigurationError, match=fragment):
        AioConsumer(**options)


def test_poll_without_assignment_and_after_close() -> None:
    async def scenario(c: AioConsumer) -> None:
        with pytest.raises(Exception, match="neither an assignment nor a subscription"):
            await c.poll()
        await c.close()
        with pytest.raises(Exception, match="closed"):
            c.assign([TP])

    run(scenario)


def test_out_of_range_after_prefetch_delivers_the_buffer_first() -> None:
    async def scenario(c: AioConsumer) -> None:
        c.assign([TP])
        st = c._subs.state(TP)
        st.seek(0)
        st.raw.append(batch(0, 5))
        st.fetch_offset = 5
        st.reset_after_buffer = "earliest"  # what an OFFSET_OUT_OF_RANGE at 5 leaves
        assert c._subs.fetchable(0.0, 1 << 20) == []
        assert [r.offset for r in (await c.poll())[TP]] == [0, 1, 2, 3, 4]
        assert await c.poll() == {}
        assert st.reset == "earliest" and st.position is None  # then the reset runs

    run(scenario)


def test_cancelling_a_poll_woken_at_the_same_moment_is_not_lost() -> None:
    """A task cancelled while ``poll`` is being woken must end with CancelledError. (Python
    3.11's ``asyncio.wait_for`` returns the inner result instead when both happen in one loop
    iteration: a consumer task could not be cancelled; the waits use ``asyncio.timeout``.)"""

    async def scenario(c: AioConsumer) -> None:
        c.assign([TP])
        for _ in range(20):
            task = asyncio.create_task(c.poll(timeout_ms=10_000))
            for _ in range(3):
                await asyncio.sleep(0)  # poll is now waiting for data
            c._fetcher.data_ready.set()  # woken ...
            task.cancel()  # ... and cancelled in the same iteration
            with pytest.raises(asyncio.CancelledError):
                await task

    run(scenario)
