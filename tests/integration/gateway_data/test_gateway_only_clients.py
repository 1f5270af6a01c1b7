"""The Python clients with ``gateway_only=True``: every call goes to the gateway (produce,
fetch, offsets, delete records, the group protocol), and the records are right."""

from __future__ import annotations

import asyncio

from cluster_testkit import LocalCluster
from strom_testkit import wait_until

from strom import Admin, Consumer, NewTopic, Producer, aio
from strom.types import TopicPartition

TOPIC = "gw-only"


def test_sync_producer_consumer_admin_through_the_gateway_only(cluster: LocalCluster) -> None:
    with Admin(cluster.gateway, gateway_only=True) as admin:
        admin.create_topics([NewTopic(TOPIC, 3, 2)])
    wait_until(lambda: all(p.leader >= 0 for p in cluster.describe(TOPIC).partitions))

    with Producer(cluster.gateway, gateway_only=True, linger_ms=20) as producer:
        assert producer._aio._cluster.storage(1) is producer._aio._cluster.gateway
        futures = [producer.send(TOPIC, value=b"v%d" % i, key=b"k%d" % (i % 7)) for i in range(300)]
        producer.flush()
        metadata = [f.result(timeout=30) for f in futures]
    assert {m.partition for m in metadata} == {0, 1, 2}

    with Consumer(
        bootstrap_servers=cluster.gateway,
        gateway_only=True,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    ) as consumer:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(3)])
        values = set()
        for record in consumer:
            values.add(record.value)
            if len(values) == 300:
                break
    assert values == {b"v%d" % i for i in range(300)}

    with Admin(cluster.gateway, gateway_only=True) as admin:
        tp = TopicPartition(TOPIC, 0)
        end = admin.list_offsets({tp: "latest"})[tp].offset
        assert end == sum(1 for m in metadata if m.partition == 0)
        admin.delete_records({tp: 1})
        assert admin.list_offsets({tp: "earliest"})[tp].offset == 1


def test_group_consumer_through_the_gateway_only(cluster: LocalCluster) -> None:
    topic = "gw-only-group"

    async def run() -> list[bytes]:
        async with aio.Admin(cluster.gateway, gateway_only=True) as admin:
            await admin.create_topics([NewTopic(topic, 2, 1)])
        async with aio.Producer(cluster.gateway, gateway_only=True) as producer:
            for i in range(20):
                await producer.send(topic, value=b"g%d" % i)
            await producer.flush()
        consumer = aio.Consumer(
            topic,
            bootstrap_servers=cluster.gateway,
            gateway_only=True,
            group_id="gw-only-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        got: list[bytes] = []
        try:
            while len(got) < 20:
                batch = await consumer.getmany(timeout_ms=1000)
                got += [r.value for records in batch.values() for r in records]
            await consumer.commit()
            committed = await consumer.committed(TopicPartition(topic, 0))
            assert committed is not None
        finally:
            await consumer.close()
        return got

    got = asyncio.run(run())
    assert sorted(got) == sorted(b"g%d" % i for i in range(20))


def test_gateway_only_producer_rides_out_a_leader_failover(cluster: LocalCluster) -> None:
    """Pipelined ProduceStream through the gateway while the partition's leader stops: the
    gateway's upstream stream breaks, it finds the new leader, and every record lands once
    (idempotent producer)."""
    topic = "gw-only-failover"
    with Admin(cluster.gateway, gateway_only=True) as admin:
        admin.create_topics([NewTopic(topic, 1, 3)])
    wait_until(lambda: cluster.describe(topic).partitions[0].leader >= 0)
    leader = cluster.describe(topic).partitions[0].leader
    with Producer(cluster.gateway, gateway_only=True, linger_ms=5) as producer:
        futures = [producer.send(topic, value=b"a%d" % i) for i in range(200)]
        producer.flush()
        cluster.stop(f"storage-{leader}")
        try:
            futures += [producer.send(topic, value=b"b%d" % i) for i in range(200)]
            producer.flush()
            for future in futures:
                future.result(timeout=60)
        finally:
            cluster.restart(f"storage-{leader}")
            cluster.wait_for_brokers()
    with Consumer(
        bootstrap_servers=cluster.gateway,
        gateway_only=True,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        values = [record.value for record in consumer]
    expected = [b"a%d" % i for i in range(200)] + [b"b%d" % i for i in range(200)]
    assert values == expected
