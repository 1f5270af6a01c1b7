"""``strom.cluster.ClusterClient`` against a real local cluster."""

from __future__ import annotations

import asyncio

import pytest
from cluster_testkit import LocalCluster

from strom import NewTopic
from strom.cluster import ClusterClient
from strom.errors import NetworkExceptionError, UnknownTopicOrPartitionError
from strom.protocol.v1 import common_pb2, storage_pb2
from strom.types import TopicPartition

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("cc-topic", 4, 1)])
    return "cc-topic"


def test_partitions_and_leaders(cluster: LocalCluster, topic: str) -> None:
    async def main() -> None:
        client = ClusterClient(cluster.gateway, request_timeout_ms=10000)
        try:
            parts = await client.partitions(topic)
            assert [p.partition for p in parts] == [0, 1, 2, 3]
            assert all(p.leader in (1, 2, 3) and p.replicas == (p.leader,) for p in parts)
            leader = await client.leader(TopicPartition(topic, 2))
            assert leader == parts[2] == client.cached(TopicPartition(topic, 2))
            assert client.cached(TopicPartition(topic, 9)) is None
            assert topic in await client.topics()
            # The leader's storage node answers for the partition.
            stub = client.storage(leader.leader)
            request = storage_pb2.ListOffsetsRequest(
                replica_id=-1,
                partitions=[
                    storage_pb2.ListOffsetsPartition(
                        topic=topic, partition=2, spec=common_pb2.LATEST
                    )
                ],
            )
            # The node learns its new partitions through etcd a moment after the controller
            # names it leader: until then it answers UNKNOWN_TOPIC_OR_PARTITION (retriable).
            deadline = asyncio.get_running_loop().time() + 15
            while True:
                response = await stub.ListOffsets(request, timeout=10)
                unknown = response.partitions[0].error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
                if not unknown or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert response.partitions[0].error_code == 0
            assert response.partitions[0].offset == 0
            assert client.storage(leader.leader) is stub  # one channel per node
        finally:
            await client.close()

    asyncio.run(main())


def test_unknown_topic_and_partition(cluster: LocalCluster, topic: str) -> None:
    async def main() -> None:
        client = ClusterClient([cluster.gateway])
        try:
            with pytest.raises(UnknownTopicOrPartitionError):
                await client.partitions("no-such-topic")
            with pytest.raises(UnknownTopicOrPartitionError):
                await client.leader(TopicPartition(topic, 17))
        finally:
            await client.close()

    asyncio.run(main())


def test_concurrent_refreshes_share_one_call(cluster: LocalCluster, topic: str) -> None:
    async def main() -> int:
        client = ClusterClient(cluster.gateway)
        calls = 0
        original = client._metadata

        async def counting(topics: list[str]) -> object:
            nonlocal calls
            calls += 1
            return await original(topics)

        client._metadata = counting  # type: ignore[method-assign]
        try:
            await asyncio.gather(*(client.refresh() for _ in range(10)))
            client.mark_stale(topic)
            await asyncio.gather(*(client.partitions(topic) for _ in range(10)))
        finally:
            await client.close()
        return calls

    assert asyncio.run(main()) == 2


def test_unreachable_bootstrap_server_falls_through(cluster: LocalCluster, topic: str) -> None:
    async def main() -> None:
        client = ClusterClient(f"127.0.0.1:1,{cluster.gateway}", request_timeout_ms=5000)
        try:
            assert len(await client.partitions(topic)) == 4
        finally:
            await client.close()
        alone = ClusterClient("127.0.0.1:1", request_timeout_ms=2000)
        try:
            with pytest.raises(NetworkExceptionError):
                await alone.refresh()
        finally:
            await alone.close()

    asyncio.run(main())
