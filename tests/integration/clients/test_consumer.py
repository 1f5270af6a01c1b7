"""``strom.Consumer`` / ``strom.aio.Consumer`` against a real local cluster.

Records are written with raw storage-node Produce calls of ``strom.records`` batches, so these
tests do not depend on the Producer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import grpc
import pytest
from cluster_testkit import LocalCluster
from strom_testkit import wait_until

from strom import Consumer, NewTopic, TopicPartition
from strom.aio import Admin as AioAdmin
from strom.aio import Consumer as AioConsumer
from strom.errors import (
    ConfigurationError,
    InvalidGroupIdError,
    OffsetOutOfRangeError,
)
from strom.protocol.v1 import storage_pb2, storage_pb2_grpc
from strom.protocol.v1.common_pb2 import ErrorCode
from strom.records import encode_batch
from strom.types import ConsumerRecord

pytestmark = pytest.mark.integration

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def leader_address(cluster: LocalCluster, topic: str, partition: int) -> str:
    with cluster.admin() as admin:
        brokers = {b.node_id: b.address for b in admin.describe_cluster().brokers}
        (description,) = admin.describe_topics([topic])
    return brokers[description.partitions[partition].leader]


def produce(
    cluster: LocalCluster,
    topic: str,
    partition: int,
    records: Sequence[Record],
    *,
    batch_size: int = 100,
    compression: str = "none",
    timestamp_ms: int | None = None,
) -> int:
    """Append ``records`` in batches of ``batch_size``; returns the first offset."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    first = -1
    for start in range(0, len(records), batch_size):
        chunk = records[start : start + batch_size]
        data = encode_batch(
            [(ts, key, value, headers) for key, value, headers in chunk], compression=compression
        )
        # A leader the controller just chose may not know it yet: retry until it does.
        result = wait_until(
            lambda data=data: _produce_once(cluster, topic, partition, data), 30, "produce"
        )
        if first < 0:
            first = result.base_offset
    return first


def _produce_once(
    cluster: LocalCluster, topic: str, partition: int, data: bytes
) -> storage_pb2.ProducePartitionResult | None:
    with grpc.insecure_channel(leader_address(cluster, topic, partition)) as channel:
        response = storage_pb2_grpc.StorageNodeStub(channel).Produce(
            storage_pb2.ProduceRequest(
                acks=1,
                timeout_ms=10000,
                partitions=[
                    storage_pb2.ProducePartitionData(topic=topic, partition=partition, records=data)
                ],
            ),
            timeout=20,
        )
    (result,) = response.partitions
    # UNKNOWN_TOPIC_OR_PARTITION too: a leader just chosen hosts the partition only once it has
    # read the assignment from etcd ("node N does not host ...").
    not_yet = (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    if result.error_code in not_yet:
        return None
    assert result.error_code == 0, result
    return result


def values(n: int, prefix: str) -> list[Record]:
    return [
        (f"k{i}".encode(), f"{prefix}-{i}".encode(), [("i", str(i).encode())]) for i in range(n)
    ]


def create(cluster: LocalCluster, name: str, partitions: int, replicas: int = 1) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, partitions, replicas)])
    wait_until(
        lambda: all(p.leader > 0 for p in cluster.describe(name).partitions),
        20,
        f"leaders for {name}",
    )


def drain(consumer: Consumer, expected: int, timeout_s: float = 30.0) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    return got


def consumer(cluster: LocalCluster, **options: object) -> Consumer:
    options.setdefault("auto_offset_reset", "earliest")
    options.setdefault("request_timeout_ms", 10000)
    return Consumer(bootstrap_servers=cluster.gateway, **options)


@pytest.fixture(scope="module")
def data(cluster: LocalCluster) -> str:
    """A 3-partition topic with 1,000 records per partition (partition 1 compressed)."""
    create(cluster, "cons-data", 3)
    for p in range(3):
        produce(
            cluster, "cons-data", p, values(1000, f"p{p}"), compression="lz4" if p == 1 else "none"
        )
    return "cons-data"


def test_assign_reads_everything_in_order(cluster: LocalCluster, data: str) -> None:
    tps = [TopicPartition(data, p) for p in range(3)]
    with consumer(cluster, max_poll_records=333) as c:
        c.assign(tps)
        assert c.assignment() == set(tps)
        got = drain(c, 3000)
        assert len(got) == 3000
        assert c.poll(timeout_ms=300) == {}  # nothing twice
        for p in range(3):
            mine = [r for r in got if r.partition == p]
            assert [r.offset for r in mine] == list(range(1000))
            assert [r.value for r in mine] == [f"p{p}-{i}".encode() for i in range(1000)]
            first = mine[0]
            assert first.key == b"k0" and first.headers == (("i", b"0"),)
            assert first.serialized_key_size == 2 and first.serialized_value_size == len(
                first.value
            )
            assert first.topic == data and first.timestamp_type == 0 and first.timestamp > 0
            assert c.position(TopicPartition(data, p)) == 1000
            assert c.highwater(TopicPartition(data, p)) == 1000


def test_iteration_and_deserializers(cluster: LocalCluster, data: str) -> None:
    with consumer(
        cluster,
        value_deserializer=bytes.decode,
        key_deserializer=bytes.decode,
        consumer_timeout_ms=1000,
    ) as c:
        c.assign([TopicPartition(data, 0)])
        got = list(c)
    assert [r.value for r in got] == [f"p0-{i}" for i in range(1000)]
    assert got[5].key == "k5"


def test_seek_inside_a_batch_and_offsets(cluster: LocalCluster, data: str) -> None:
    tp = TopicPartition(data, 2)
    with consumer(cluster, max_poll_records=50) as c:
        c.assign([tp])
        c.seek(tp, 555)  # mid-batch: the first 55 records of the fetched batch are skipped
        assert c.position(tp) == 555
        got = drain(c, 445)
        assert [r.offset for r in got] == list(range(555, 1000))
        c.seek(tp, 10)
        first = c.poll(timeout_ms=5000, max_records=3)[tp]
        assert [r.offset for r in first] == [10, 11, 12]
        c.seek(tp, 990)  # prefetched data of the partition is dropped
        assert [r.offset for r in drain(c, 10)] == list(range(990, 1000))
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        c.seek_to_end()
        assert c.position(tp) == 1000
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([TopicPartition(data, p) for p in range(3)]) == {
            TopicPartition(data, p): 1000 for p in range(3)
        }
        assert c.partitions_for_topic(data) == {0, 1, 2}


def test_offsets_for_times(cluster: LocalCluster) -> None:
    create(cluster, "cons-times", 1)
    tp = TopicPartition("cons-times", 0)
    produce(cluster, tp.topic, 0, values(10, "old"), timestamp_ms=1_000_000)
    produce(cluster, tp.topic, 0, values(10, "new"), timestamp_ms=2_000_000)
    with consumer(cluster) as c:
        c.assign([tp])
        found = c.offsets_for_times({tp: 1_500_000})
        assert found[tp] is not None and found[tp].offset == 10
        assert found[tp].timestamp == 2_000_000
        assert c.offsets_for_times({tp: 3_000_000}) == {tp: None}
        c.seek(tp, found[tp].offset)
        assert [r.value for r in drain(c, 10)] == [f"new-{i}".encode() for i in range(10)]


def test_latest_reads_only_new_records_and_pause_resume(cluster: LocalCluster) -> None:
    create(cluster, "cons-live", 2)
    tps = [TopicPartition("cons-live", p) for p in range(2)]
    produce(cluster, "cons-live", 0, values(5, "before"))
    with consumer(cluster, auto_offset_reset="latest", fetch_max_wait_ms=100) as c:
        c.assign(tps)
        assert c.position(tps[0]) == 5
        # Both resets resolved before producing: the partitions may have different leaders,
        # and a reset to "latest" resolved after the produce below would skip its records.
        assert c.position(tps[1]) == 0
        c.pause(tps[1])
        assert c.paused() == {tps[1]}
        produce(cluster, "cons-live", 0, values(3, "after"))
        produce(cluster, "cons-live", 1, values(4, "paused"))
        got = drain(c, 3)
        assert [r.value for r in got] == [f"after-{i}".encode() for i in range(3)]
        assert c.poll(timeout_ms=500) == {}  # paused: nothing from partition 1
        c.resume(tps[1])
        assert c.paused() == set()
        got = drain(c, 4)
        assert [(r.partition, r.offset) for r in got] == [(1, i) for i in range(4)]


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_offset_out_of_range(cluster: LocalCluster, data: str, reset: str) -> None:
    tp = TopicPartition(data, 0)
    with consumer(cluster, auto_offset_reset=reset) as c:
        c.assign([tp])
        c.seek(tp, 50_000)
        if reset == "none":
            with pytest.raises(OffsetOutOfRangeError):
                wait_until(lambda: c.poll(timeout_ms=200) or None, 10, "the error")
            c.seek(tp, 998)
            assert [r.offset for r in drain(c, 2)] == [998, 999]
        elif reset == "earliest":
            got = drain(c, 1000)
            assert [r.offset for r in got] == list(range(1000))
        else:
            wait_until(lambda: c.position(tp) == 1000, 10, "reset to the end")
            assert c.poll(timeout_ms=300) == {}


def test_no_position_with_reset_none(cluster: LocalCluster, data: str) -> None:
    tp = TopicPartition(data, 0)
    with consumer(cluster, auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(OffsetOutOfRangeError, match="no position"):
            c.poll(timeout_ms=100)
        c.seek(tp, 999)
        assert [r.offset for r in drain(c, 1)] == [999]


def test_subscribe_without_group_reads_all_partitions(cluster: LocalCluster, data: str) -> None:
    class Listener:
        assigned: set[TopicPartition] = set()

        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            Listener.assigned = partitions

    with consumer(cluster) as c:
        c.subscribe([data], listener=Listener())
        got = drain(c, 3000)
        assert len(got) == 3000
        assert len({(r.partition, r.offset) for r in got}) == 3000
        assert Listener.assigned == {TopicPartition(data, p) for p in range(3)}
        assert c.assignment() == Listener.assigned
    with consumer(cluster) as c:
        c.subscribe(pattern=r"cons-d.*")
        assert len(drain(c, 3000)) == 3000


def test_commits_need_a_group(cluster: LocalCluster, data: str) -> None:
    with consumer(cluster) as c:
        c.assign([TopicPartition(data, 0)])
        with pytest.raises(InvalidGroupIdError):
            c.commit()
        errors: list[Exception | None] = []
        future = c.commit_async(callback=lambda offsets, exc: errors.append(exc))
        with pytest.raises(InvalidGroupIdError):
            future.result(5)
        assert isinstance(errors[0], InvalidGroupIdError)


def test_aio_consumer(cluster: LocalCluster, data: str) -> None:
    async def main() -> list[int]:
        offsets = []
        async with AioConsumer(
            bootstrap_servers=cluster.gateway,
            auto_offset_reset="earliest",
            consumer_timeout_ms=1000,
        ) as c:
            c.assign([TopicPartition(data, 1)])
            async for record in c:
                offsets.append(record.offset)
        return offsets

    assert asyncio.run(main()) == list(range(1000))


def test_leader_restart(cluster: LocalCluster) -> None:
    """The leader of an rf=1 partition stops and comes back: the consumer resumes exactly."""
    create(cluster, "cons-move", 1)
    tp = TopicPartition("cons-move", 0)
    produce(cluster, tp.topic, 0, values(100, "a"))
    leader = cluster.describe(tp.topic).partitions[0].leader
    with consumer(cluster, fetch_max_wait_ms=100, retry_backoff_ms=50) as c:
        c.assign([tp])
        assert [r.offset for r in drain(c, 100)] == list(range(100))
        cluster.stop(f"storage-{leader}")
        assert c.poll(timeout_ms=500) == {}
        cluster.restart(f"storage-{leader}")
        wait_until(lambda: cluster.describe(tp.topic).partitions[0].leader > 0, 30, "a leader")
        produce(cluster, tp.topic, 0, values(50, "b"))
        got = drain(c, 50, timeout_s=40)
        assert [r.offset for r in got] == list(range(100, 150))
        assert [r.value for r in got] == [f"b-{i}".encode() for i in range(50)]


def test_admin_offsets_and_reset_after_delete_records(cluster: LocalCluster) -> None:
    create(cluster, "cons-trim", 1)
    tp = TopicPartition("cons-trim", 0)
    produce(cluster, tp.topic, 0, values(30, "t"), batch_size=10, timestamp_ms=5_000)
    with cluster.admin() as admin:
        assert admin.delete_records({tp: 10}) == {tp: 10}
        found = admin.list_offsets({tp: "earliest"})
        assert found[tp].offset == 10
        assert admin.list_offsets({tp: "latest"})[tp].offset == 30
        assert admin.list_offsets({tp: 5_000})[tp].offset == 10
        with pytest.raises(ConfigurationError):
            admin.list_offsets({tp: "first"})

    async def aio_admin() -> int:
        async with AioAdmin(cluster.gateway) as admin:
            assert tp.topic in await admin.list_topics()
            return (await admin.list_offsets({tp: "latest"}))[tp].offset

    assert asyncio.run(aio_admin()) == 30
    with consumer(cluster, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 2)  # below the log start now: reset to earliest
        assert [r.offset for r in drain(c, 20)] == list(range(10, 30))
        assert c.beginning_offsets([tp]) == {tp: 10}


def test_read_committed_reads_non_transactional_records(cluster: LocalCluster, data: str) -> None:
    tp = TopicPartition(data, 1)
    with consumer(cluster, isolation_level="read_committed") as c:
        c.assign([tp])
        assert [r.offset for r in drain(c, 1000)] == list(range(1000))
