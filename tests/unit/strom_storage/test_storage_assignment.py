"""Applying the controller's metadata: incremental, never starving the event loop, and a partition
that cannot be hosted retried without holding up the others."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from strom_server.runtime.clock import SystemClock
from strom_storage.log import LogConfig
from strom_storage.log.log_manager import LogManager
from strom_storage.membership.assignment import assignments_for
from strom_storage.node import ReplicaManager


def _metadata(partitions: int, leader: int = 1) -> tuple[dict, dict]:
    topics = {"big": {"partitions": {str(p): [1, 2] for p in range(partitions)}, "configs": {}}}
    states = {
        ("big", p): {"leader": leader, "leader_epoch": 1, "isr": [1, 2]} for p in range(partitions)
    }
    return topics, states


def test_assignment_lists_only_this_nodes_partitions_with_roles() -> None:
    topics = {"t": {"partitions": {"0": [1, 2], "1": [2, 3]}, "configs": {"retention.ms": "5"}}}
    states = {("t", 0): {"leader": 2, "leader_epoch": 7, "isr": [2, 1]}}
    hosted = assignments_for(1, topics, states)
    assert list(hosted) == [("t", 0)]
    assert (hosted[("t", 0)].leader, hosted[("t", 0)].leader_epoch) == (2, 7)
    assert hosted[("t", 0)].configs == {"retention.ms": "5"}


def test_apply_is_incremental_and_yields_to_the_loop(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = ReplicaManager(LogManager([tmp_path], clock=SystemClock()), node_id=1)
        topics, states = _metadata(200)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        running = asyncio.ensure_future(ticker())
        base = LogConfig()
        touched = await replicas.hosted.apply_assignments(
            assignments_for(1, topics, states), base, remove_others=True
        )
        assert touched == 200 and len(replicas.hosted.partitions()) == 200
        assert ticks >= 200 // 32  # other tasks (the keep-alive) ran while logs were created

        states[("big", 5)] = {"leader": 2, "leader_epoch": 2, "isr": [2]}
        touched = await replicas.hosted.apply_assignments(
            assignments_for(1, topics, states), base, remove_others=True
        )
        assert touched == 1
        assert not replicas.hosted.get("big", 5).is_leader

        del topics["big"]["partitions"]["7"]
        touched = await replicas.hosted.apply_assignments(
            assignments_for(1, topics, states), base, remove_others=True
        )
        assert touched == 1 and ("big", 7) not in replicas.hosted
        assert not (tmp_path / "big-7").exists()

        # New broker defaults reach every partition.
        touched = await replicas.hosted.apply_assignments(
            assignments_for(1, topics, states),
            dataclasses.replace(base, retention_ms=1000),
            remove_others=True,
        )
        assert touched == 199
        assert replicas.hosted.get("big", 0).log.config.retention_ms == 1000
        running.cancel()
        replicas.close()

    asyncio.run(scenario())


def test_a_partition_that_cannot_be_hosted_waits_while_the_others_are_served(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        replicas = ReplicaManager(LogManager([tmp_path], clock=SystemClock()), node_id=1)
        topics, states = _metadata(3)
        (tmp_path / "big-1").write_bytes(b"")  # a file where its directory must go
        base = LogConfig()
        touched = await replicas.hosted.apply_assignments(
            assignments_for(1, topics, states), base, remove_others=True
        )
        assert touched == 2 and replicas.hosted.unapplied == 1
        assert sorted(replicas.hosted.keys()) == [("big", 0), ("big", 2)]
        # created in a worker thread, led at the controller's epoch
        assert replicas.hosted.get("big", 0).log.latest_epoch == 1

        (tmp_path / "big-1").unlink()
        touched = await replicas.hosted.apply_assignments(
            assignments_for(1, topics, states), base, remove_others=True
        )
        assert touched == 1 and replicas.hosted.unapplied == 0
        assert replicas.hosted.get("big", 1).is_leader
        replicas.close()

    asyncio.run(scenario())
