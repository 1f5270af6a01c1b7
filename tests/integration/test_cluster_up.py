"""`strom cluster up` starts the embedded cluster, Ctrl-C stops it cleanly, data is reused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import etcd3
import grpc
import pytest

from strom import Admin
from strom.protocol.v1 import common_pb2, storage_pb2
from strom.protocol.v1.storage_pb2_grpc import StorageNodeStub
from strom.records import encode_batch
from strom_server.local import secure

pytestmark = pytest.mark.integration

STROM = str(Path(sys.executable).parent / "strom")


def _wait_for_line(process: subprocess.Popen[str], text: str, timeout_s: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line:
            seen.append(line.rstrip("\n"))
            if text in line:
                return seen
        elif process.poll() is not None:
            break
        else:
            time.sleep(0.05)
    raise AssertionError(f"never saw {text!r}; output so far: {seen}")


@pytest.fixture
def start_cluster(
    free_port_range: Callable[[int], int],
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Runs `strom cluster up ARGS` (services on free ports unless ARGS says otherwise)."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        if "--base-port" not in args:  # gateway, 3 storage nodes, 2 controllers, 1 coordinator
            args = (*args, "--base-port", str(free_port_range(7)))
        if "--registry-port" not in args:  # the registry has tests of its own (never 8081)
            args = (*args, "--registry-port", "0")
        if "--console-port" not in args:  # so has the console (never 8080)
            args = (*args, "--console-port", "0")
        process = subprocess.Popen(
            [STROM, "cluster", "up", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:  # stop everything we started, even when the test failed
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _pids_using(data_dir: Path) -> list[int]:
    """Processes whose command line mentions the cluster's data directory."""
    out = subprocess.run(["pgrep", "-f", str(data_dir)], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def test_up_serves_until_ctrl_c_and_keeps_its_data(
    tmp_path: Path,
    free_port: Callable[[], int],
    free_port_range: Callable[[int], int],
    start_cluster: Callable[..., subprocess.Popen[str]],
) -> None:
    data_dir = tmp_path / "cluster"
    client_port, peer_port, console_port = free_port(), free_port(), free_port()
    base = free_port_range(7)
    args = (
        "--console-port",
        str(console_port),
        "--data-dir",
        str(data_dir),
        "--etcd-client-port",
        str(client_port),
        "--etcd-peer-port",
        str(peer_port),
        "--base-port",
        str(base),
        "--topics",
        "demo:2",
    )

    first = start_cluster(*args)
    output = _wait_for_line(first, "Press Ctrl-C", 120)
    assert any(f"127.0.0.1:{client_port}" in line for line in output)
    assert any("created topics: demo" in line for line in output)
    gateway = f"127.0.0.1:{base}"
    assert any(f"bootstrap (gateway): {gateway}" in line for line in output)
    console = f"http://127.0.0.1:{console_port}"
    assert any(f"web console:         {console}" in line for line in output)
    with urllib.request.urlopen(console + "/healthz", timeout=10) as answer:
        assert answer.status == 200
    with Admin(gateway) as admin:
        cluster = admin.describe_cluster()
        assert cluster.controller is not None
        assert sorted(b.node_id for b in cluster.brokers) == [1, 2, 3]
        (demo,) = admin.describe_topics(["demo"])
    leader = demo.partitions[1].leader
    with grpc.insecure_channel(f"127.0.0.1:{base + leader}") as channel:
        request = storage_pb2.ProduceRequest(
            acks=1,
            partitions=[
                storage_pb2.ProducePartitionData(
                    topic="demo", partition=1, records=encode_batch([(1, b"k", b"v", None)])
                )
            ],
        )
        written = StorageNodeStub(channel).Produce(request, timeout=10).partitions[0]
    assert written.error_code == 0 and written.base_offset == 0
    status = subprocess.run(
        [STROM, "cluster", "status", "--data-dir", str(data_dir)], capture_output=True, text=True
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert "running" in status.stdout
    client = etcd3.client(host="127.0.0.1", port=client_port)
    client.put("/strom-test/kept", b"across restarts")
    client.close()

    first.send_signal(signal.SIGINT)  # what Ctrl-C delivers
    assert first.wait(30) == 0
    assert _pids_using(data_dir) == []
    stopped = first.stdout.read()  # type: ignore[union-attr]
    for name in ("etcd", "controller-1", "controller-2", "storage-3", "gateway", "coordinator-1"):
        assert f"{name} (stopped)" in stopped, stopped
    after = subprocess.run(
        [STROM, "cluster", "status", "--data-dir", str(data_dir)], capture_output=True, text=True
    )
    assert after.returncode == 1 and "No cluster is running" in after.stdout

    second = start_cluster(*args)
    second_output = _wait_for_line(second, "Press Ctrl-C", 120)
    assert not any("created topics" in line for line in second_output)  # demo already exists
    with Admin(gateway) as admin:
        (demo,) = admin.describe_topics(["demo"])
    with grpc.insecure_channel(f"127.0.0.1:{base + demo.partitions[1].leader}") as channel:
        offsets = (
            StorageNodeStub(channel)
            .ListOffsets(
                storage_pb2.ListOffsetsRequest(
                    partitions=[
                        storage_pb2.ListOffsetsPartition(
                            topic="demo", partition=1, spec=common_pb2.LATEST
                        )
                    ]
                ),
                timeout=10,
            )
            .partitions[0]
        )
    assert offsets.offset == 1  # the record written before the restart is still there
    client = etcd3.client(host="127.0.0.1", port=client_port)
    value, _ = client.get("/strom-test/kept")
    client.close()
    assert value == b"across restarts"
    second.send_signal(signal.SIGINT)
    assert second.wait(30) == 0


def test_secure_up_marks_itself_ready_only_once_it_serves(
    tmp_path: Path,
    free_port: Callable[[], int],
    free_port_range: Callable[[int], int],
    start_cluster: Callable[..., subprocess.Popen[str]],
) -> None:
    """admin.properties exists before the services start (they use it); a script waits for
    DATA_DIR/cluster.ready instead: a stale one (a killed supervisor's) is removed at once,
    the new one appears when the gateway serves the admin (no "connection refused") and the
    Kafka clients' settings are written, and it goes when the stop begins."""
    data_dir = tmp_path / "secure"
    data_dir.mkdir()
    marker = data_dir / "cluster.ready"
    marker.write_text("stale\n")
    base = free_port_range(7)
    process = start_cluster(
        "--secure", "--data-dir", str(data_dir), "--base-port", str(base),
        "--etcd-client-port", str(free_port()), "--etcd-peer-port", str(free_port()),
        "--kafka-port", str(free_port()),
    )  # fmt: skip
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    output: list[str] = []
    stale_removed = False
    deadline = time.monotonic() + 180
    while True:
        output.extend(line.rstrip("\n") for line in iter(process.stdout.readline, ""))
        if marker.exists():
            text = marker.read_text()
            if text != "stale\n":
                break
        else:
            stale_removed = True
        assert time.monotonic() < deadline, f"no ready marker; output: {output}"
        assert process.poll() is None, f"up exited; output: {output}"
        assert not any("Press Ctrl-C" in line for line in output), (
            f"up is serving and no fresh {marker}; output: {output}"
        )
        time.sleep(0.02)
    # The moment the marker appears the cluster answers the admin of admin.properties.
    with Admin(f"127.0.0.1:{base}", **secure.admin_options(data_dir)) as admin:
        assert admin.describe_cluster().controller is not None
    assert stale_removed, "the stale marker was never removed"
    assert f"bootstrap.servers=127.0.0.1:{base}\n" in text
    assert f"command.config={data_dir / 'admin.properties'}\n" in text
    assert (data_dir / "kafka-client.properties").exists()
    if not any("Press Ctrl-C" in line for line in output):
        output += _wait_for_line(process, "Press Ctrl-C", 60)
    assert any(f"ready marker:        {marker}" in line for line in output), output
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 0
    assert not marker.exists()
    assert (data_dir / "admin.properties").exists()  # the admin's password is kept


def test_up_refuses_a_busy_port_with_one_clear_line(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [
                STROM,
                "cluster",
                "up",
                "--data-dir",
                str(tmp_path / "c"),
                "--etcd-client-port",
                str(port),
                "--etcd-peer-port",
                str(free_port()),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert f"etcd client port {port}" in result.stderr and "already in use" in result.stderr


def test_up_refuses_a_second_cluster_on_the_same_data_dir(
    tmp_path: Path,
    free_port: Callable[[], int],
    start_cluster: Callable[..., subprocess.Popen[str]],
) -> None:
    data_dir = tmp_path / "cluster"
    first = start_cluster(
        "--data-dir",
        str(data_dir),
        "--etcd-client-port",
        str(free_port()),
        "--etcd-peer-port",
        str(free_port()),
    )
    _wait_for_line(first, "Press Ctrl-C", 60)
    result = subprocess.run(
        [
            STROM,
            "cluster",
            "up",
            "--data-dir",
            str(data_dir),
            "--etcd-client-port",
            str(free_port()),
            "--etcd-peer-port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "already running" in result.stderr


def test_invalid_port_is_named(tmp_path: Path) -> None:
    result = subprocess.run(
        [STROM, "cluster", "up", "--data-dir", str(tmp_path), "--etcd-client-port", "70000"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "--etcd-client-port 70000 is not a TCP port" in result.stderr
