"""``strom.Producer`` and ``strom.aio.Producer`` against a real local cluster.

Records are read back with raw storage-node Fetch calls and ``strom.records`` (independent of
the Consumer).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

import grpc
import pytest
from cluster_testkit import LocalCluster
from strom_testkit import wait_until

import strom.aio
from strom import NewTopic, Producer, RecordMetadata
from strom.cluster import channel_options
from strom.errors import (
    ConfigurationError,
    MessageTooLargeError,
    StromError,
    StromTimeoutError,
    UnknownTopicOrPartitionError,
)
from strom.producer.partitioner import murmur2_partition
from strom.protocol.v1 import controller_pb2, gateway_pb2_grpc, storage_pb2, storage_pb2_grpc
from strom.records import Record, decode_batches

pytestmark = pytest.mark.integration


def create_topic(
    cluster: LocalCluster,
    name: str,
    partitions: int,
    assignment: dict[int, list[int]] | None = None,
) -> str:
    with cluster.admin() as admin:
        if assignment is not None:
            admin.create_topics([NewTopic(name, replica_assignment=assignment)])
        else:
            admin.create_topics([NewTopic(name, partitions, 1)])
    wait_until(lambda: all(p.leader >= 0 for p in cluster.describe(name).partitions), 30)
    return name


def leaders(cluster: LocalCluster, topic: str) -> dict[int, str]:
    """partition -> leader address."""
    with grpc.insecure_channel(cluster.gateway, options=channel_options()) as channel:
        response = gateway_pb2_grpc.GatewayStub(channel).Metadata(
            controller_pb2.MetadataRequest(topics=[topic]), timeout=10
        )
    nodes = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
    (meta,) = response.topics
    return {p.partition: nodes[p.leader_id] for p in meta.partitions}


def read_partition(cluster: LocalCluster, topic: str, partition: int) -> list[Record]:
    """Every record of one partition, via raw Fetch calls to its leader."""
    address = leaders(cluster, topic)[partition]
    records: list[Record] = []
    offset = 0
    with grpc.insecure_channel(address, options=channel_options()) as channel:
        stub = storage_pb2_grpc.StorageNodeStub(channel)
        while True:
            response = stub.Fetch(
                storage_pb2.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=8 << 20,
                    partitions=[
                        storage_pb2.FetchPartition(
                            topic=topic,
                            partition=partition,
                            fetch_offset=offset,
                            partition_max_bytes=8 << 20,
                        )
                    ],
                ),
                timeout=10,
            )
            (result,) = response.partitions
            assert result.error_code == 0, result.error_message
            got = [
                r
                for b in decode_batches(result.records, allow_truncated_tail=True)
                for r in b.records
                if r.offset >= offset
            ]
            if not got:
                return records
            records.extend(got)
            offset = got[-1].offset + 1


def read_all(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, list[Record]]:
    return {p: read_partition(cluster, topic, p) for p in range(partitions)}


# -- basics ------------------------------------------------------------------------------------


def test_send_and_read_back(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-basic", 3)
    delivered: list[tuple[RecordMetadata | None, BaseException | None]] = []
    threads: set[str] = set()

    def on_delivery(md: RecordMetadata | None, err: BaseException | None) -> None:
        delivered.append((md, err))
        threads.add(threading.current_thread().name)

    with Producer(cluster.gateway, linger_ms=2) as producer:
        futures = [
            producer.send(
                topic,
                f"v{i}".encode(),
                key=f"k{i % 7}".encode(),
                headers=[("h", b"x")],
                on_delivery=on_delivery,
            )
            for i in range(300)
        ]
        first = futures[0].result(timeout=20)
        assert first.topic == topic and first.offset >= 0
        assert first.serialized_key_size == 2 and first.serialized_value_size == 2
        producer.flush(timeout=20)
        assert all(f.done() for f in futures)
    assert len(delivered) == 300 and all(err is None for _, err in delivered)
    assert threading.current_thread().name not in threads  # ran on the background loop
    stored = read_all(cluster, topic, 3)
    assert sum(len(v) for v in stored.values()) == 300
    for future in futures:
        md = future.result(0)
        record = stored[md.partition][md.offset]
        assert record.offset == md.offset and record.timestamp == md.timestamp
        assert record.headers == (("h", b"x"),)
        # Keyed records land where Kafka's murmur2 partitioner puts them.
        assert md.partition == murmur2_partition(record.key, 3)  # type: ignore[arg-type]
    # Per-partition order is send order.
    for partition, records in stored.items():
        sent = [f.result(0) for f in futures if f.result(0).partition == partition]
        assert [r.value for r in records] == [
            f"v{i}".encode() for i, f in enumerate(futures) if f.result(0).partition == partition
        ]
        assert [md.offset for md in sent] == list(range(len(sent)))


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd"])
def test_compression_and_acks(cluster: LocalCluster, compression: str) -> None:
    topic = create_topic(cluster, f"p-codec-{compression}", 2)
    with Producer(
        cluster.gateway, acks=1, enable_idempotence=False, compression_type=compression
    ) as producer:
        futures = [producer.send(topic, b"x" * 100, partition=i % 2) for i in range(500)]
        producer.flush(20)
    assert all(f.exception(0) is None for f in futures)
    stored = read_all(cluster, topic, 2)
    assert [len(stored[p]) for p in (0, 1)] == [250, 250]


def test_keyless_records_stick_to_a_partition_per_batch(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-sticky", 4)
    with Producer(cluster.gateway, linger_ms=1000, batch_size=1000) as producer:
        futures = [producer.send(topic, b"y" * 88) for _ in range(40)]  # 100 B records
        producer.flush(20)
    partitions = [f.result(0).partition for f in futures]
    # Ten records fill a batch; a batch's records share a partition.
    for start in range(0, 40, 10):
        assert len(set(partitions[start : start + 10])) == 1
    assert len(set(partitions)) > 1


def test_send_many(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-many", 3)
    values = [f"m{i}".encode() for i in range(20000)]
    with Producer(cluster.gateway, acks=1, enable_idempotence=False) as producer:
        assert producer.send_many(topic, values).result(30) == 20000
        keys = [f"key{i}".encode() for i in range(3000)]
        assert producer.send_many(topic, values[:3000], keys=keys).result(30) == 3000
        assert producer.send_many(topic, [b"p1"] * 10, partition=1).result(30) == 10
    stored = read_all(cluster, topic, 3)
    assert sum(len(v) for v in stored.values()) == 23010
    keyed = [r for records in stored.values() for r in records if r.key is not None]
    assert len(keyed) == 3000
    for partition, records in stored.items():
        for r in records:
            if r.key is not None:
                assert murmur2_partition(r.key, 3) == partition
    # Keyless values keep their relative order within each partition.
    for records in stored.values():
        plain = [int(r.value[1:]) for r in records if r.key is None and r.value != b"p1"]  # type: ignore[index]
        assert plain == sorted(plain)


def test_send_many_serializes_each_record_once_while_waiting_for_metadata(
    cluster: LocalCluster,
) -> None:
    """A fresh producer knows no partitions yet: send_many waits for metadata and plans again,
    but serializes its records once (they were serialized again at every attempt)."""
    topic = create_topic(cluster, "p-many-once", 3)
    calls = []

    def serialize(value: str) -> bytes:
        calls.append(value)
        return value.encode()

    values = [f"v{i}" for i in range(50)]
    with Producer(cluster.gateway, acks=1, value_serializer=serialize) as producer:
        assert producer.send_many(topic, values).result(30) == 50
    assert calls == values


def test_unknown_topic_and_partition(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-unknown", 2)
    with Producer(cluster.gateway, max_block_ms=5000) as producer:
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send("p-no-such-topic", b"x")
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send(topic, b"x", partition=5)


def test_oversized_records_rejected_before_sending(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-oversized", 1)
    with Producer(cluster.gateway, max_request_size=10_000) as producer:
        with pytest.raises(MessageTooLargeError, match="10000"):
            producer.send(topic, b"x" * 20_000)
        with pytest.raises(MessageTooLargeError):
            producer.send_many(topic, [b"ok", b"x" * 20_000])
        producer.send(topic, b"fits").result(20)
    assert [r.value for r in read_partition(cluster, topic, 0)] == [b"fits"]
    with (
        Producer(cluster.gateway, buffer_memory=5_000) as producer,
        pytest.raises(MessageTooLargeError, match="buffer_memory"),
    ):
        producer.send(topic, b"x" * 6_000)


def test_buffer_exhaustion_blocks_then_raises(cluster: LocalCluster) -> None:
    """With the only storage node of the partition down, buffer_memory fills; send blocks for
    max_block_ms and then raises; after the node returns everything queued is delivered."""
    topic = create_topic(cluster, "p-buffer", 1, {0: [3]})
    producer = Producer(
        cluster.gateway,
        buffer_memory=20_000,
        max_block_ms=1500,
        request_timeout_ms=5000,
        delivery_timeout_ms=120_000,
        retry_backoff_ms=50,
    )
    try:
        producer.send(topic, b"warm").result(20)
        cluster.stop("storage-3")
        futures = []
        with pytest.raises(StromTimeoutError, match="buffer_memory"):
            for _ in range(1000):
                futures.append(producer.send(topic, b"z" * 1000))
        assert 10 <= len(futures) < 25
        started = time.monotonic()
        with pytest.raises(StromTimeoutError):
            producer.send(topic, b"z" * 1000)
        assert time.monotonic() - started >= 1.4
        cluster.restart("storage-3")
        producer.flush(60)
        assert all(f.exception(0) is None for f in futures)
    finally:
        producer.close(10)
    values = [r.value for r in read_partition(cluster, topic, 0)]
    assert values == [b"warm"] + [b"z" * 1000] * len(futures)


def test_option_validation_needs_no_cluster() -> None:
    with pytest.raises(ConfigurationError, match="acks"):
        Producer("127.0.0.1:1", acks=1, enable_idempotence=True)  # needs acks=all
    with pytest.raises(ConfigurationError, match="linger_ms"):
        Producer("127.0.0.1:1", linger_ms=-1)


def producer_ids(cluster: LocalCluster, topic: str, partition: int) -> set[int]:
    """The producer ids of the batches at the start of a partition (one Fetch)."""
    address = leaders(cluster, topic)[partition]
    fetch = storage_pb2.FetchPartition(
        topic=topic, partition=partition, fetch_offset=0, partition_max_bytes=8 << 20
    )
    with grpc.insecure_channel(address, options=channel_options()) as channel:
        response = storage_pb2_grpc.StorageNodeStub(channel).Fetch(
            storage_pb2.FetchRequest(replica_id=-1, max_bytes=8 << 20, partitions=[fetch]),
            timeout=10,
        )
    (result,) = response.partitions
    assert result.error_code == 0, result.error_message
    batches = decode_batches(result.records, allow_truncated_tail=True)
    return {b.header.producer_id for b in batches}


def test_acks_1_with_default_idempotence(cluster: LocalCluster) -> None:
    """acks=1 without enable_idempotence: a plain producer (no producer id) rather than a
    ConfigurationError, sync and asyncio; with idempotence left on (acks=all) batches carry
    a producer id."""
    topic = create_topic(cluster, "p-acks1-default", 3)
    with Producer(cluster.gateway, acks=1) as producer:
        assert producer.config.enable_idempotence is False
        assert producer.send_many(topic, [b"s"] * 100, partition=0).result(30) == 100

    async def main() -> None:
        async with strom.aio.Producer(cluster.gateway, acks="1") as producer:
            assert producer.config.enable_idempotence is False
            futures = [await producer.send(topic, b"a", partition=1) for _ in range(100)]
            await producer.flush()
            assert [(await f).offset for f in futures] == list(range(100))

    asyncio.run(main())
    with Producer(cluster.gateway) as producer:
        assert producer.config.enable_idempotence is True
        assert producer.send_many(topic, [b"i"] * 100, partition=2).result(30) == 100
    stored = read_all(cluster, topic, 3)
    assert [[r.value for r in stored[p]] for p in range(3)] == [
        [b"s"] * 100,
        [b"a"] * 100,
        [b"i"] * 100,
    ]
    assert producer_ids(cluster, topic, 0) == producer_ids(cluster, topic, 1) == {-1}
    (idempotent,) = producer_ids(cluster, topic, 2)
    assert idempotent >= 0


# -- asyncio -----------------------------------------------------------------------------------


def test_aio_producer(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-aio", 2)

    async def main() -> list[RecordMetadata]:
        async with strom.aio.Producer(cluster.gateway) as producer:
            futures = [await producer.send(topic, f"a{i}".encode(), key=b"k") for i in range(50)]
            bulk = await producer.send_many(topic, [b"b"] * 100, partition=0)
            metadata = [await f for f in futures]
            assert await bulk == 100
            await producer.flush()
            return metadata

    metadata = asyncio.run(main())
    partition = murmur2_partition(b"k", 2)
    assert {md.partition for md in metadata} == {partition}
    assert [md.offset for md in metadata] == sorted(md.offset for md in metadata)
    stored = read_partition(cluster, topic, partition)
    assert [r.value for r in stored if r.key == b"k"] == [f"a{i}".encode() for i in range(50)]


# -- failures ----------------------------------------------------------------------------------


def _numbered(records: list[Record]) -> list[int]:
    return [int(r.value) for r in records]  # type: ignore[arg-type]


def test_leader_killed_mid_stream_no_duplicates_no_reordering(cluster: LocalCluster) -> None:
    """Idempotence under injected retries: the only replica of a partition is stopped and
    restarted while 5 requests are in flight; what is stored has no duplicate and no gap
    out of order, and every acknowledged record is there exactly once."""
    topic = create_topic(cluster, "p-kill", 1, {0: [2]})
    acked: list[int] = []
    failed: list[BaseException] = []
    lock = threading.Lock()

    def on_delivery(md: RecordMetadata | None, err: BaseException | None) -> None:
        with lock:
            if err is not None:
                failed.append(err)

    with Producer(
        cluster.gateway,
        linger_ms=1,
        batch_size=2000,
        request_timeout_ms=5000,
        retry_backoff_ms=50,
        delivery_timeout_ms=120_000,
    ) as producer:
        stop = threading.Event()

        def killer() -> None:
            time.sleep(0.3)
            cluster.stop("storage-2")
            time.sleep(1.0)
            cluster.restart("storage-2")
            stop.set()

        thread = threading.Thread(target=killer)
        thread.start()
        futures = []
        i = 0
        while not stop.is_set() or i < 3000:
            futures.append((i, producer.send(topic, str(i).encode(), on_delivery=on_delivery)))
            i += 1
            if i % 200 == 0:
                time.sleep(0.01)
        thread.join()
        producer.flush(60)
        for n, future in futures:
            if future.exception(0) is None:
                acked.append(n)
    assert not failed, failed[:3]
    stored = _numbered(read_partition(cluster, topic, 0))
    assert len(stored) == len(set(stored)), "duplicates"
    assert stored == sorted(stored), "reordered"
    assert acked == stored


def test_non_retriable_error_fails_at_once(cluster: LocalCluster) -> None:
    """The node refuses a batch over the topic's max.message.bytes: no retry, the records
    fail with the node's error; the partition keeps working for smaller records."""
    topic = "p-nonretriable"
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": "2000"})])
    wait_until(lambda: all(p.leader >= 0 for p in cluster.describe(topic).partitions), 30)
    # A retry would first wait out at least half the 20 s backoff: an answer within 8 s means
    # none was made. (A bound of 1 s with a 1 s backoff failed at 1.03 s on a loaded machine:
    # the producer's first look at a new topic's leader can take a backoff, hence the first
    # small record.)
    with Producer(cluster.gateway, retry_backoff_ms=20_000) as producer:
        assert producer.send(topic, b"first").result(60).offset == 0
        big = producer.send(topic, os.urandom(5000))  # incompressible
        error = big.exception(timeout=8)
        assert isinstance(error, MessageTooLargeError) and not error.retriable
        assert producer.send(topic, b"small").result(20).offset == 1


def test_many_threads_share_one_producer(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-threads", 3)
    with Producer(cluster.gateway) as producer:

        def worker(n: int) -> None:
            for i in range(2000):
                producer.send(topic, f"{n}:{i}".encode(), key=f"worker-{n}".encode())

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producer.flush(30)
    stored = read_all(cluster, topic, 3)
    for n in range(4):
        partition = murmur2_partition(f"worker-{n}".encode(), 3)
        mine = [r.value for r in stored[partition] if r.key == f"worker-{n}".encode()]
        assert mine == [f"{n}:{i}".encode() for i in range(2000)]


def test_delivery_timeout_then_recovery_with_a_new_producer_id(cluster: LocalCluster) -> None:
    """Records that cannot be delivered within delivery_timeout_ms fail with
    StromTimeoutError; the idempotent producer then continues under a new producer id."""
    topic = create_topic(cluster, "p-expire", 1, {0: [1]})
    with Producer(
        cluster.gateway, request_timeout_ms=1000, delivery_timeout_ms=2000, retry_backoff_ms=50
    ) as producer:
        assert producer.send(topic, b"before").result(20).offset == 0
        first_id = producer.aio._sender.pid.producer_id
        cluster.stop("storage-1")
        try:
            lost = [producer.send(topic, b"lost") for _ in range(3)]
            for future in lost:
                assert isinstance(future.exception(timeout=20), StromTimeoutError)
        finally:
            cluster.restart("storage-1")
        after = producer.send(topic, b"after").result(30)
        assert producer.aio._sender.pid.producer_id != first_id
    values = [r.value for r in read_partition(cluster, topic, 0)]
    assert values[0] == b"before" and values[-1] == b"after"
    assert after.offset == len(values) - 1


def test_acks_zero_completes_when_sent(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-acks0", 1)
    # acks=0 is fire and forget, as in Kafka: a batch sent before the leader hosts the
    # just-created partition is refused and nobody learns of it (a full CI run lost some).
    cluster.wait_hosted(topic, 0)
    with Producer(cluster.gateway, acks=0, enable_idempotence=False) as producer:
        futures = [producer.send(topic, str(i).encode()) for i in range(100)]
        producer.flush(20)
        assert all(f.result(0).offset == -1 for f in futures)
    wait_until(lambda: len(read_partition(cluster, topic, 0)) == 100, 20)
    assert _numbered(read_partition(cluster, topic, 0)) == list(range(100))


def test_blocking_calls_from_a_callback_raise_instead_of_deadlocking(
    cluster: LocalCluster,
) -> None:
    topic = create_topic(cluster, "p-callback", 1)
    seen: list[str] = []
    with Producer(cluster.gateway) as producer:
        pending = producer.send(topic, b"later", partition=0)

        def on_delivery(md: RecordMetadata | None, err: BaseException | None) -> None:
            for call in (producer.flush, producer.close, pending.result):
                try:
                    call()
                except StromError as exc:
                    seen.append(type(exc).__name__)
            seen.append(f"sent {producer.send(topic, b'from-callback').done()}")

        producer.send(topic, b"first", on_delivery=on_delivery).result(20)
        producer.flush(20)
    assert seen[-1] == "sent False" and seen.count("StromError") >= 2
    values = [r.value for r in read_partition(cluster, topic, 0)]
    assert sorted(values) == [b"first", b"from-callback", b"later"]


def test_an_unclosed_producer_is_flushed_at_exit(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "p-atexit", 1)
    script = (
        "import sys\n"
        "from strom import Producer\n"
        "p = Producer(sys.argv[1], linger_ms=60000)\n"
        "for i in range(1000):\n"
        "    p.send(sys.argv[2], str(i).encode())\n"
    )
    subprocess.run([sys.executable, "-c", script, cluster.gateway, topic], check=True, timeout=60)
    assert _numbered(read_partition(cluster, topic, 0)) == list(range(1000))
