"""Fault drills under `strom cluster up`: kill -9 a process, the cluster keeps serving, the
process comes back, and no acknowledged record is lost; `--no-restart` keeps it down.

The cluster runs detached (`up --detach`) and is commanded with the CLI exactly as
docs/operations.md tells users to: `strom cluster kill NODE`, `strom cluster status --json`,
`strom cluster down`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from strom_testkit import wait_until

from strom import Admin, Consumer, Producer

pytestmark = pytest.mark.integration

STROM = str(Path(sys.executable).parent / "strom")
TOPIC = "drill"
PARTITIONS = 6
RECORDS_PER_SECOND = 400


def strom(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STROM, *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )


@dataclass
class DetachedCluster:
    data_dir: Path
    gateway: str

    def cli(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        return strom(*args, "--data-dir", str(self.data_dir), timeout_s=timeout_s)

    def status(self) -> dict[str, Any]:
        result = self.cli("cluster", "status", "--json")
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    def process(self, name: str) -> dict[str, Any]:
        info: dict[str, Any] = self.status()["state"]["processes"][name]
        return info

    def active_controller(self) -> str:
        with Admin(self.gateway, request_timeout_ms=10000) as admin:
            controller = admin.describe_cluster().controller
        assert controller is not None
        return f"controller-{controller.node_id}"


@pytest.fixture
def detached_cluster(
    tmp_path: Path, free_port: Callable[[], int], free_port_range: Callable[[int], int]
) -> Iterator[Callable[..., DetachedCluster]]:
    started: list[Path] = []

    def start(*extra: str) -> DetachedCluster:
        data_dir = tmp_path / f"cluster{len(started)}"
        base = free_port_range(7)
        started.append(data_dir)
        result = strom(
            "cluster", "up", "--detach", "--data-dir", str(data_dir),
            "--base-port", str(base), "--etcd-client-port", str(free_port()),
            "--etcd-peer-port", str(free_port()), "--topics", f"{TOPIC}:{PARTITIONS}:3",
            "--registry-port", "0", "--console-port", "0", *extra,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Strom cluster is up" in result.stdout
        return DetachedCluster(data_dir, f"127.0.0.1:{base}")

    yield start
    for data_dir in started:  # stop everything we started, even when the test failed
        down = strom("cluster", "down", "--data-dir", str(data_dir), timeout_s=300)
        leftover = subprocess.run(["pgrep", "-f", str(data_dir)], capture_output=True, text=True)
        for pid in leftover.stdout.split():
            os.kill(int(pid), signal.SIGKILL)
        assert down.returncode in (0, 1), down.stderr


@dataclass
class Traffic:
    """A producer (acks=all) and a group consumer through the gateway, in threads."""

    gateway: str
    acked: set[str] = field(default_factory=set)
    failed: int = 0
    consumed: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop_producing: threading.Event = field(default_factory=threading.Event)
    stop_consuming: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._guard(self._produce), daemon=True),
            threading.Thread(target=self._guard(self._consume), daemon=True),
        ]
        for thread in threads:
            thread.start()
        return threads

    def _guard(self, work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # reported by the test, not lost in a thread
                self.errors.append(exc)

        return run

    def _produce(self) -> None:
        producer = Producer(
            bootstrap_servers=self.gateway, acks="all", linger_ms=5, retry_backoff_ms=100,
            request_timeout_ms=5000, delivery_timeout_ms=120000, max_block_ms=120000,
        )  # fmt: skip
        n = 0
        started = time.monotonic()
        try:
            while not self.stop_producing.is_set():
                value = f"r{n}"
                future = producer.send(TOPIC, value=value.encode(), key=value.encode())

                def settle(done: Any, value: str = value) -> None:
                    with self.lock:
                        if done.exception() is None:
                            self.acked.add(value)
                        else:
                            self.failed += 1

                future.add_done_callback(settle)
                n += 1
                delay = started + n / RECORDS_PER_SECOND - time.monotonic()
                if delay > 0:
                    self.stop_producing.wait(delay)
        finally:
            producer.close(timeout=150)

    def _consume(self) -> None:
        consumer = Consumer(
            bootstrap_servers=self.gateway, group_id="drill-group",
            auto_offset_reset="earliest", enable_auto_commit=True,
        )  # fmt: skip
        consumer.subscribe([TOPIC])
        try:
            while not self.stop_consuming.is_set():
                for records in consumer.poll(timeout_ms=500).values():
                    with self.lock:
                        self.consumed.update((r.value or b"").decode() for r in records)
        finally:
            consumer.close()

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)


def _wait_back_up(cluster: DetachedCluster, name: str, restarts: int) -> None:
    def back() -> bool:
        info = cluster.process(name)
        return info["state"] == "up" and info["restarts"] >= restarts

    wait_until(back, 90, f"{name} up again after {restarts} restart(s)")


def test_kill_each_kind_of_process_under_load_loses_no_acknowledged_record(
    detached_cluster: Callable[..., DetachedCluster],
) -> None:
    cluster = detached_cluster()
    traffic = Traffic(cluster.gateway)
    threads = traffic.start()
    wait_until(lambda: traffic.acked_count() > 500, 60, "the producer's first acks")
    with Admin(cluster.gateway) as admin:
        (topic,) = admin.describe_topics([TOPIC])
    leader = f"storage-{topic.partitions[0].leader}"
    victims = [cluster.active_controller(), leader, "coordinator-1", "gateway"]
    for victim in victims:
        before = traffic.acked_count()
        killed = cluster.cli("cluster", "kill", victim)
        assert killed.returncode == 0, killed.stdout + killed.stderr
        assert f"sent SIGKILL to {victim}" in killed.stdout
        _wait_back_up(cluster, victim, restarts=1)
        # The cluster serves: acknowledgements keep coming after the process is back.
        wait_until(lambda b=before: traffic.acked_count() > b + 400, 90, f"acks after {victim}")
        assert not traffic.errors, traffic.errors

    traffic.stop_producing.set()
    threads[0].join(180)
    with traffic.lock:
        acked = set(traffic.acked)
    wait_until(lambda: acked <= traffic.consumed, 120, "the group consumer to read every ack")
    traffic.stop_consuming.set()
    threads[1].join(60)
    assert not traffic.errors, traffic.errors
    assert len(acked) > 2000

    status = cluster.status()
    processes = status["state"]["processes"]
    for victim in victims:
        assert processes[victim]["restarts"] == 1, processes[victim]
        assert processes[victim]["last_exit"] == "killed by signal 9"
    assert all(p["state"] == "up" for p in processes.values()), processes
    text = cluster.cli("cluster", "status")
    assert text.returncode == 0, text.stdout
    assert "Active controller:" in text.stdout and "Leaders per storage node:" in text.stdout
    logs = cluster.cli("cluster", "logs", leader, "-n", "1000")
    assert f"--- strom cluster: starting {leader} again (restart 1)" in logs.stdout


def test_no_restart_keeps_a_killed_node_down_until_started(
    detached_cluster: Callable[..., DetachedCluster],
) -> None:
    cluster = detached_cluster("--no-restart")
    killed = cluster.cli("cluster", "kill", "storage-2")
    assert killed.returncode == 0, killed.stderr
    assert "storage-2: exited" in killed.stdout
    time.sleep(3)  # well past the first backoff delay
    info = cluster.process("storage-2")
    assert info["state"] == "exited" and info["restarts"] == 0 and info["pid"] is None
    status = cluster.cli("cluster", "status")
    assert status.returncode == 1  # a process is down
    assert "EXITED" in status.stdout and "killed by signal 9" in status.stdout

    def under_replicated() -> bool:
        metadata = cluster.status().get("metadata", {})
        return len(metadata.get("under_replicated", [])) == PARTITIONS

    wait_until(under_replicated, 60, "every partition under-replicated without storage-2")
    started = cluster.cli("cluster", "start", "storage-2")
    assert started.returncode == 0, started.stderr
    assert "storage-2: up" in started.stdout
    unknown = cluster.cli("cluster", "stop", "storage-9")
    assert unknown.returncode == 1
    assert "no process named 'storage-9'" in unknown.stderr
    down = cluster.cli("cluster", "down")
    assert down.returncode == 0, down.stderr
    gone = cluster.cli("cluster", "status")
    assert gone.returncode == 1 and "No cluster is running" in gone.stdout
