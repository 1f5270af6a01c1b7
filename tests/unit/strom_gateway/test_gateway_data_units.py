"""The gateway's data-path pieces that need no cluster: the byte budget, the wire scanners,
the fetch reservation and the record RPCs' batch encoding and decoding."""

from __future__ import annotations

import asyncio
import gc

import pytest

from strom.producer.partitioner import murmur2_partition
from strom.protocol.v1 import gateway_pb2, storage_pb2
from strom.records import decode_batches, encode_batch
from strom_gateway.api.record_rpcs import decode_into, encode
from strom_gateway.routing.byte_budget import ByteBudget, TooLargeError
from strom_gateway.routing.data_path import fetch_reservation
from strom_gateway.routing.wire import LazyFetchResponse, produce_partitions, resolve

# -- ByteBudget -----------------------------------------------------------------------------


def test_budget_waits_and_serves_in_arrival_order() -> None:
    async def run() -> list[str]:
        budget = ByteBudget(100)
        order: list[str] = []
        await budget.acquire(80)

        async def take(name: str, size: int) -> None:
            await budget.acquire(size)
            order.append(name)

        big = asyncio.ensure_future(take("big", 60))
        await asyncio.sleep(0)
        small = asyncio.ensure_future(take("small", 10))  # fits now, but waits behind "big"
        await asyncio.sleep(0)
        assert order == [] and budget.available == 20
        budget.release(80)
        await asyncio.gather(big, small)
        assert budget.available == 30
        return order

    assert asyncio.run(run()) == ["big", "small"]


def test_budget_refuses_only_a_request_larger_than_everything() -> None:
    async def run() -> None:
        budget = ByteBudget(100)
        with pytest.raises(TooLargeError, match="max-inflight-bytes"):
            await budget.acquire(101)
        async with budget.hold(100):
            assert budget.available == 0
        assert budget.available == 100

    asyncio.run(run())


def test_a_cancelled_waiter_gives_its_place_back() -> None:
    async def run() -> None:
        budget = ByteBudget(100)
        await budget.acquire(100)
        waiter = asyncio.ensure_future(budget.acquire(50))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        budget.release(100)
        assert budget.available == 100 and budget.in_use == 0

    asyncio.run(run())


# -- wire scanners ----------------------------------------------------------------------------


def test_produce_partitions_reads_routing_fields_only() -> None:
    request = storage_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=500,
        correlation_id=9,
        client_id="c",
        partitions=[
            storage_pb2.ProducePartitionData(topic="a", partition=3, records=b"x" * 5000),
            storage_pb2.ProducePartitionData(topic="ü", partition=0, records=b""),
            storage_pb2.ProducePartitionData(topic="a", partition=2**31 - 1, records=b"y"),
        ],
    )
    refs = produce_partitions(request.SerializeToString())
    assert [(r.topic, r.partition, r.index) for r in refs] == [
        ("a", 3, 0),
        ("ü", 0, 1),
        ("a", 2**31 - 1, 2),
    ]
    with pytest.raises(ValueError):
        produce_partitions(b"\x1a\xff\xff")  # a length past the end


def test_lazy_fetch_response_reads_error_codes_and_parses_on_demand() -> None:
    response = storage_pb2.FetchResponse(
        correlation_id=4,
        partitions=[
            storage_pb2.FetchPartitionResult(
                topic="t", partition=1, error_code=0, high_watermark=10, records=b"r" * 3000
            ),
            storage_pb2.FetchPartitionResult(topic="t", partition=2, error_code=6),
            storage_pb2.FetchPartitionResult(topic="t", partition=3, error_code=-1),
        ],
    )
    lazy = LazyFetchResponse(response.SerializeToString())
    assert [(p.partition, p.error_code) for p in lazy.partitions] == [(1, 0), (2, 6), (3, -1)]
    assert resolve(lazy.partitions[0]) == response.partitions[0]
    assert resolve("other") == "other"


def test_lazy_fetch_response_is_freed_without_the_cycle_collector() -> None:
    """A reference cycle here kept every fetched byte alive until a rare gen-0 collection:
    the gateway's memory grew by the fetch rate (~140 MB/s) under load."""
    raw = storage_pb2.FetchResponse(
        partitions=[storage_pb2.FetchPartitionResult(topic="t", partition=1, records=b"r" * 100)]
    ).SerializeToString()
    gc.collect()
    gc.disable()
    try:
        lazy = LazyFetchResponse(raw)
        assert resolve(lazy.partitions[0]).records == b"r" * 100
        assert lazy.message().partitions[0].partition == 1
        del lazy
        assert gc.collect() == 0, "a LazyFetchResponse was left in a reference cycle"
    finally:
        gc.enable()


# -- fetch reservation --------------------------------------------------------------------------


def test_fetch_reservation_is_the_most_a_fetch_may_return_capped_by_the_budget() -> None:
    def fetch(max_bytes: int, *partition_max: int) -> storage_pb2.FetchRequest:
        return storage_pb2.FetchRequest(
            max_bytes=max_bytes,
            partitions=[storage_pb2.FetchPartition(partition_max_bytes=m) for m in partition_max],
        )

    assert fetch_reservation(fetch(0, 1000, 2000), 1 << 30) == 3000
    assert fetch_reservation(fetch(1500, 1000, 2000), 1 << 30) == 1500
    assert fetch_reservation(fetch(0, 0), 1 << 30) == 1 << 20  # the partition default
    assert fetch_reservation(fetch(0, 0, 0, 0), 1 << 20) == 1 << 20  # never above the budget


# -- record RPCs ------------------------------------------------------------------------------


def test_encode_builds_one_batch_with_nulls_headers_and_times() -> None:
    request = gateway_pb2.ProduceRecordsRequest(
        topic="t",
        compression=gateway_pb2.COMPRESSION_ZSTD,
        records=[
            gateway_pb2.Record(
                key=b"k",
                value=b"v",
                timestamp_ms=5,
                headers=[
                    gateway_pb2.RecordHeader(key="a", value=b""),
                    gateway_pb2.RecordHeader(key="b"),
                ],
            ),
            gateway_pb2.Record(),  # null key, null value, the gateway's clock
        ],
    )
    (batch,) = decode_batches(encode(request))
    assert batch.compression.name == "ZSTD"
    first, second = batch.records
    assert (first.key, first.value, first.timestamp) == (b"k", b"v", 5)
    assert first.headers == (("a", b""), ("b", None))
    assert (second.key, second.value) == (None, None)
    assert second.timestamp > 1_600_000_000_000


def test_decode_into_starts_at_the_offset_and_stops_at_max_records() -> None:
    first = bytearray(encode_batch([(1, b"k", b"v%d" % i) for i in range(3)]))
    first[0:8] = (10).to_bytes(8, "big")  # base offset 10: offsets 10..12
    second = bytearray(encode_batch([(2, None, b"w%d" % i) for i in range(2)]))
    second[0:8] = (13).to_bytes(8, "big")  # offsets 13..14
    data = bytes(first + second)

    answer = gateway_pb2.FetchRecordsResponse(next_offset=11)
    decode_into(answer, data, 11, 3)
    assert [r.offset for r in answer.records] == [11, 12, 13]
    assert answer.next_offset == 14
    assert answer.records[0].HasField("key") and not answer.records[2].HasField("key")

    everything = gateway_pb2.FetchRecordsResponse(next_offset=11)
    decode_into(everything, data + data[:20], 11, 0)  # a truncated tail is skipped
    assert [r.offset for r in everything.records] == [11, 12, 13, 14]
    assert everything.next_offset == 15


def test_the_record_partitioner_is_the_python_producers() -> None:
    # One place for murmur2: the gateway imports strom.producer's partitioner.
    from strom_gateway.api import record_rpcs

    assert record_rpcs.murmur2_partition is murmur2_partition
