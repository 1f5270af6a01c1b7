"""Coordinator placement keeps going when etcd refuses a claim (a real etcd).

A claim that waited out a network partition reaches etcd on a lease that expired meanwhile,
and etcd answers NOT_FOUND. The placement loop used to die of it, so the partitions of that
internal topic were never claimed again (found by the fault harness's partition nemesis:
every transactional producer then timed out in FindCoordinator). Here the registration's lease
is replaced by one etcd does not know before a claim: the claim must be refused, logged, and
made again on the new lease once the keep-alive has registered anew."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from strom.cluster import ClusterClient
from strom.errors import CoordinatorLoadInProgressError
from strom_coordinator.group import records as group_records
from strom_coordinator.partitions.hosting import HostedPartitions
from strom_coordinator.runtime.ownership import PartitionOwnership, offsets_ownership
from strom_coordinator.runtime.registration import CoordinatorRegistration
from strom_coordinator.runtime.writer import InternalTopicWriter
from strom_server.etcd.keys import ClusterKeys, encode_value
from strom_server.etcd.process import EtcdProcess
from strom_server.etcd.store import EtcdStore


class NoState:
    """The groups' in-memory state: not what this test is about (nothing loads here)."""

    def drop_partition(self, partition: int) -> None:
        pass

    def replay(self, partition: int, key: bytes | None, value: bytes | None, ts: int) -> None:
        pass

    def partition_loaded(self, partition: int) -> None:
        pass


async def _eventually(
    wanted: Callable[[int | None], bool], store: EtcdStore, key: str
) -> int | None:
    """The lease of ``key`` (None: absent) once ``wanted`` accepts it, within 30 s."""
    lease: int | None = None
    for _ in range(600):
        found = await store.get(key)
        lease = None if found is None else found.lease
        if wanted(lease):
            return lease
        await asyncio.sleep(0.05)
    return lease


async def _scenario(endpoint: str) -> None:
    store = EtcdStore([endpoint])
    keys = ClusterKeys("/placement")
    registration = CoordinatorRegistration(store, keys, coordinator_id=1, ttl_s=1)
    spec = offsets_ownership(keys, group_records.ownership_marker)
    host = HostedPartitions(NoState(), topic=spec.topic, key_kind="group")
    cluster = ClusterClient("127.0.0.1:1", request_timeout_ms=500)  # no gateway: nothing loads

    async def reinit(partition: int) -> tuple[int, int]:
        raise CoordinatorLoadInProgressError("no gateway in this test")

    writer = InternalTopicWriter(cluster, timeout_s=1, reinit=reinit, topic=spec.topic)
    ownership = PartitionOwnership(
        registration, spec, host, writer, cluster, request_timeout_s=0.5
    )  # fmt: skip
    await registration.start("127.0.0.1", 1)
    ownership.start()
    try:
        topic = {"partitions": {"0": [1]}, "configs": {}}
        await store.put(keys.topic(spec.topic), encode_value(topic))
        owner_key = spec.owner_key(0)
        first = registration.lease
        assert await _eventually(lambda lease: lease == first, store, owner_key)
        # The lease the next claim uses expired behind its back (etcd no longer knows it),
        # and the partition is up for a claim again.
        registration.lease = first + 1_000_003
        await store.delete(owner_key)
        lease = await _eventually(lambda lease: lease not in (None, first), store, owner_key)
        assert lease == registration.lease != first, "placement stopped claiming"
        assert ownership._task is not None and not ownership._task.done()
    finally:
        await ownership.close()
        await registration.stop_following()
        await registration.revoke()
        await store.close()


def test_placement_claims_again_after_etcd_refused_a_claim(tmp_path: Path) -> None:
    with EtcdProcess(tmp_path / "etcd") as etcd:
        asyncio.run(_scenario(f"{etcd.host}:{etcd.port}"))
