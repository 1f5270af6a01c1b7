"""Helpers of the consumer-group membership tests: a cluster with two coordinators and fast
groups, topics with records, consumers polled round-robin from the test thread, and a
consumer in a subprocess (``membership_member.py``) that can be killed with SIGKILL."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from strom_testkit import wait_until

from strom import Consumer, NewTopic, Producer, TopicPartition
from strom.consumer._coordinator import ConsumerCoordinator
from strom.types import ConsumerRecord

__all__ = [
    "COORDINATOR_FLAGS",
    "Listener",
    "MemberProcess",
    "consumer",
    "create_topic",
    "groups_cluster",
    "membership",
    "poll_until",
    "produce",
]

#: Groups form at once, sessions may be short, a dead coordinator's partitions move in ~3 s.
COORDINATOR_FLAGS = (
    "--group-initial-rebalance-delay-ms", "0",
    "--group-min-session-timeout-ms", "500",
    "--offsets.topic.num.partitions", "4",
    "--coordinator.session.timeout.ms", "3000",
)  # fmt: skip
MEMBER_SCRIPT = Path(__file__).with_name("membership_member.py")


@pytest.fixture(scope="module")
def groups_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One cluster with two coordinators for the whole test module."""
    yield from start_local_cluster(
        tmp_path_factory.mktemp("membership"), coordinators=2, coordinator_flags=COORDINATOR_FLAGS
    )


def create_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])
    wait_until(
        lambda: all(p.leader >= 0 for p in cluster.describe(name).partitions),
        30,
        f"leaders of {name}",
    )


def produce(cluster: LocalCluster, topic: str, partitions: int, per_partition: int) -> None:
    """``per_partition`` records in each partition, values ``b"<partition>:<n>"``."""
    with Producer(bootstrap_servers=cluster.gateway) as producer:
        for p in range(partitions):
            producer.send_many(
                topic, [f"{p}:{n}".encode() for n in range(per_partition)], partition=p
            ).result(30)


def consumer(cluster: LocalCluster, group: str, **options: Any) -> Consumer:
    options.setdefault("auto_offset_reset", "earliest")
    options.setdefault("session_timeout_ms", 6000)
    options.setdefault("heartbeat_interval_ms", 500)
    options.setdefault("request_timeout_ms", 15000)
    return Consumer(bootstrap_servers=cluster.gateway, group_id=group, **options)


def membership(c: Consumer) -> ConsumerCoordinator:
    """The consumer's client-side group coordinator (read its state; change it only on the
    loop thread, through ``c._call``)."""
    coordinator = c.aio._coordinator
    assert coordinator is not None
    return coordinator


class Listener:
    """Records every listener call (in the thread that polls)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []
        self.threads: set[threading.Thread] = set()

    def _record(self, name: str, partitions: set[TopicPartition]) -> None:
        self.calls.append((name, set(partitions)))
        self.threads.add(threading.current_thread())

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self._record("revoked", partitions)

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self._record("assigned", partitions)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._record("lost", partitions)

    def of(self, name: str) -> list[set[TopicPartition]]:
        return [ps for kind, ps in self.calls if kind == name]


def poll_until(
    consumers: Iterable[Consumer],
    condition: Any,
    timeout_s: float = 30.0,
    what: str = "",
    into: list[ConsumerRecord] | None = None,
) -> None:
    """Poll every consumer in turn (briefly) until ``condition()`` holds; records go to
    ``into``. Polling keeps the members in the group and lets rebalances complete."""
    members = list(consumers)

    def step() -> bool:
        for c in members:
            for records in c.poll(timeout_ms=50).values():
                if into is not None:
                    into.extend(records)
        return bool(condition())

    wait_until(step, timeout_s, what, interval_s=0.0)


class MemberProcess:
    """``membership_member.py`` in a subprocess; its JSON lines are collected in ``events``."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str, *args: str) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), cluster.gateway, group, topic, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            with self._lock:
                self.events.append(json.loads(line))

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def assignment(self) -> set[TopicPartition] | None:
        """The partitions it owns now (None before its first assignment)."""
        owned: set[TopicPartition] | None = None
        for event in self.snapshot():
            if "assigned" in event:
                owned = (owned or set()) | {TopicPartition(t, p) for t, p in event["assigned"]}
            elif "revoked" in event or "lost" in event:
                gone = event.get("revoked", event.get("lost"))
                owned = (owned or set()) - {TopicPartition(t, p) for t, p in gone}
        return owned

    def kill(self) -> None:
        """SIGKILL: no commit, no LeaveGroup, no listener."""
        self.popen.kill()
        self.popen.wait(10)
        self._reader.join(10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.kill()

    def stderr(self) -> str:
        assert self.popen.stderr is not None
        return self.popen.stderr.read() if self.popen.poll() is not None else ""
