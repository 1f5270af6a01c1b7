"""The coordinator's writer and loader against a real cluster: group commit never splits a
caller's records, a bumped producer epoch fences the previous writer, a write that times out
fails retriably and the next one re-initialises the producer epoch, and the loader replays
every record; the controller's transactional ids keep one producer id per id."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from cluster_testkit import LocalCluster

from strom import NewTopic
from strom.aio import Admin
from strom.cluster import ClusterClient
from strom.errors import NotCoordinatorError, StromError
from strom.protocol.v1 import controller_pb2, storage_pb2
from strom.records import decode_batches
from strom.types import TopicPartition
from strom_coordinator.runtime.loader import read_partition
from strom_coordinator.runtime.writer import InternalTopicWriter

pytestmark = pytest.mark.integration

T = TypeVar("T")


def run(cluster: LocalCluster, scenario: Callable[[ClusterClient], Awaitable[T]]) -> T:
    async def main() -> T:
        client = ClusterClient(cluster.gateway, request_timeout_ms=20000)
        try:
            return await scenario(client)
        finally:
            await client.close()

    return asyncio.run(main())


def create_topic(cluster: LocalCluster, name: str, replication: int, min_isr: int) -> None:
    configs = {"cleanup.policy": "compact", "min.insync.replicas": str(min_isr)}
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, 1, replication, topic_configs=configs)])


async def init_producer(client: ClusterClient, transactional_id: str) -> tuple[int, int]:
    """InitProducerId of a reserved ("__strom_") id: answered by the controller, as the
    coordinators' fencing ids are (other ids go to the transaction coordinator)."""
    request = controller_pb2.InitProducerIdRequest(
        transactional_id=transactional_id, producer_id=-1, producer_epoch=-1
    )
    response = await client.gateway.InitProducerId(request, timeout=20)
    assert response.error_code == 0, response.error_message
    return response.producer_id, response.producer_epoch


async def batches(client: ClusterClient, topic: str) -> list[list[bytes]]:
    """The keys of every batch of partition 0, batch by batch."""
    tp = TopicPartition(topic, 0)
    leader = await client.leader(tp)
    request = storage_pb2.FetchRequest(
        replica_id=-1,
        max_bytes=1 << 22,
        partitions=[
            storage_pb2.FetchPartition(
                topic=topic, partition=0, fetch_offset=0, partition_max_bytes=1 << 22
            )
        ],
    )
    response = await client.storage(leader.leader).Fetch(request, timeout=20)
    (result,) = response.partitions
    return [[r.key for r in b.records] for b in decode_batches(result.records)]


def test_transactional_ids_keep_one_producer_id_and_bump_the_epoch(cluster: LocalCluster) -> None:
    async def scenario(client: ClusterClient) -> list[tuple[int, int]]:
        return [await init_producer(client, "__strom_test-tid-stable") for _ in range(3)] + [
            await init_producer(client, "__strom_test-tid-other")
        ]

    (a0, e0), (a1, e1), (a2, e2), (other, other_epoch) = run(cluster, scenario)
    assert a0 == a1 == a2 and (e0, e1, e2) == (0, 1, 2)
    assert other != a0 and other_epoch == 0


def test_group_commit_keeps_each_callers_records_in_one_batch(cluster: LocalCluster) -> None:
    create_topic(cluster, "log-batches", 3, 2)

    async def scenario(client: ClusterClient) -> tuple[list[list[bytes]], list[bytes]]:
        producer = await init_producer(client, "__strom_test-tid-batches")

        async def no_reinit(partition: int) -> tuple[int, int]:
            raise AssertionError("no write failed")

        log = InternalTopicWriter(client, timeout_s=20, reinit=no_reinit, topic="log-batches")
        log.open(0, *producer)
        await log.append(0, [(b"first", b"v")])
        callers = [[(f"c{i}-{j}".encode(), b"v") for j in range(i % 3 + 1)] for i in range(20)]
        await asyncio.gather(*(log.append(0, records) for records in callers))
        await log.append(0, [(b"tomb", None)])
        replayed: list[bytes] = []
        count = await read_partition(
            client,
            TopicPartition("log-batches", 0),
            lambda k, v, ts: replayed.append(k),
            timeout_s=20,
        )
        assert count == len(replayed)
        return await batches(client, "log-batches"), replayed

    found, replayed = run(cluster, scenario)
    keys = [k for batch in found for k in batch]
    expected = [b"first", *(f"c{i}-{j}".encode() for i in range(20) for j in range(i % 3 + 1))]
    assert keys == [*expected, b"tomb"] and replayed == keys
    for i in range(20):  # every caller's records sit in one batch
        holders = [
            n for n, batch in enumerate(found) if any(k.startswith(b"c%d-" % i) for k in batch)
        ]
        assert len(holders) == 1, (i, found)
    # Callers that queued while a write was in flight went out together.
    assert len(found) < 20


def test_a_bumped_epoch_fences_the_previous_writer(cluster: LocalCluster) -> None:
    create_topic(cluster, "log-fence", 3, 2)

    async def scenario(client: ClusterClient) -> tuple[list[int], bool]:
        fenced: list[int] = []

        async def no_reinit(partition: int) -> tuple[int, int]:
            raise AssertionError("no reinit expected")

        old = InternalTopicWriter(client, timeout_s=20, reinit=no_reinit, on_fenced=fenced.append,
                                  topic="log-fence")  # fmt: skip
        old.open(0, *await init_producer(client, "__strom_test-tid-fence"))
        await old.append(0, [(b"old-1", b"v")])
        new = InternalTopicWriter(client, timeout_s=20, reinit=no_reinit, topic="log-fence")
        new.open(0, *await init_producer(client, "__strom_test-tid-fence"))  # bumps the epoch
        await new.append(0, [(b"new-1", b"v")])
        with pytest.raises(NotCoordinatorError):
            await old.append(0, [(b"old-2", b"v")])
        with pytest.raises(NotCoordinatorError):  # closed: refused at once
            await old.append(0, [(b"old-3", b"v")])
        await new.append(0, [(b"new-2", b"v")])
        keys = [k for batch in await batches(client, "log-fence") for k in batch]
        assert keys == [b"old-1", b"new-1", b"new-2"]
        return fenced, old.is_open(0)

    fenced, still_open = run(cluster, scenario)
    assert fenced == [0] and not still_open


def test_a_timed_out_write_fails_retriably_and_the_next_bumps_the_epoch(
    cluster: LocalCluster,
) -> None:
    # min.insync.replicas above the replication factor: acks=all can never be satisfied.
    create_topic(cluster, "log-timeout", 1, 2)

    async def scenario(client: ClusterClient) -> list[tuple[int, int]]:
        reinits: list[tuple[int, int]] = []

        async def reinit(partition: int) -> tuple[int, int]:
            reinits.append(await init_producer(client, "__strom_test-tid-timeout"))
            return reinits[-1]

        log = InternalTopicWriter(client, timeout_s=1.0, reinit=reinit, topic="log-timeout")
        first = await init_producer(client, "__strom_test-tid-timeout")
        log.open(0, *first)
        with pytest.raises(StromError) as failed:
            await log.append(0, [(b"lost", b"v")])
        assert failed.value.retriable
        async with Admin(cluster.gateway) as admin:
            await admin.alter_configs("log-timeout", set_configs={"min.insync.replicas": "1"})
        for _ in range(50):  # the storage node applies the config change shortly
            try:
                await log.append(0, [(b"kept", b"v")])
                break
            except StromError:
                await asyncio.sleep(0.2)
        assert log.producer(0) == reinits[-1]
        assert reinits[0][0] == first[0] and reinits[0][1] == first[1] + 1
        return reinits

    assert run(cluster, scenario)
