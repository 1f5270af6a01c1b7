"""A real local cluster (etcd, 2 controllers, 3 storage nodes, gateway, coordinators) for
integration tests,
the ``strom`` CLI run as a subprocess against it, and small polling helpers.

Shared by every test folder (tests/ is on the import path; test folders are not packages).
A folder's conftest re-exports ``cluster``: one cluster serves a whole test module
(module-scoped); every process it started, including restarted ones, is stopped at teardown
even when a test failed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from strom_testkit import free_port, free_port_range, wait_until

from strom import Admin
from strom.cluster import channel_options
from strom.protocol.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from strom.records import Record, encode_batch, iter_records
from strom.types import TopicDescription
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.supervisor import ManagedProcess

STROM = str(Path(sys.executable).parent / "strom")
STORAGE_NODES = 3
#: gateway, 3 storage nodes, 2 controllers on consecutive ports from the base port (then the
#: coordinators)
SERVICE_PORTS = 6
#: Kafka's debugging reader: Fetch from any replica, leader or follower, up to its high watermark
DEBUG_REPLICA_ID = -2
#: Produce answers meaning "this node does not lead the partition yet (metadata in flight)"
_NOT_HOSTED_YET = (
    common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
    common_pb2.NOT_LEADER_OR_FOLLOWER,
)


@dataclass
class CliResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.returncode == 0, self.explain()
        return json.loads(self.stdout)

    def explain(self) -> str:
        return (
            f"strom {' '.join(self.args)} -> exit {self.returncode}\n"
            f"stdout: {self.stdout!r}\nstderr: {self.stderr!r}"
        )


def run_strom(*args: str, timeout_s: float = 60.0) -> CliResult:
    completed = subprocess.run(
        [STROM, *args], capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
    )
    return CliResult(args, completed.returncode, completed.stdout, completed.stderr)


def assert_ok(result: CliResult) -> CliResult:
    assert result.returncode == 0, result.explain()
    assert "Traceback" not in result.stderr, result.explain()
    return result


def assert_one_line_error(result: CliResult, *fragments: str) -> str:
    """A failed command: non-zero exit, exactly one line on stderr (no traceback) naming every
    fragment, nothing on stdout. Returns that line."""
    assert result.returncode != 0, result.explain()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.explain()
    (line,) = lines
    assert line.startswith("strom: error: "), result.explain()
    assert "Traceback" not in result.stderr, result.explain()
    assert result.stdout == "", result.explain()
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    return line


@dataclass
class LocalCluster:
    """The processes of one ``LocalClusterSpec``, started in order, with per-process control."""

    spec: LocalClusterSpec
    processes: dict[str, ManagedProcess] = field(default_factory=dict)
    #: every process ever started (restarts included), for teardown
    started: list[ManagedProcess] = field(default_factory=list)

    @property
    def gateway(self) -> str:
        return self.spec.gateway_address

    def start(self, ready_timeout_s: float = 60.0) -> None:
        for process in self.spec.processes():
            self.processes[process.name] = process
            self.started.append(process)
            process.start()
            process.wait_ready(ready_timeout_s)

    def stop_all(self) -> None:
        for process in reversed(self.started):
            if process.popen is not None and process.popen.poll() is None:
                process.popen.send_signal(signal.SIGCONT)  # a paused process cannot stop
            process.stop(10.0)

    def stop(self, name: str) -> int | None:
        return self.processes[name].stop(10.0)

    def kill(self, name: str) -> int | None:
        """SIGKILL ``name`` (no clean shutdown: leases expire by themselves)."""
        popen = self.processes[name].popen
        assert popen is not None
        popen.kill()
        return popen.wait(10.0)

    def signal(self, name: str, signum: int) -> None:
        """Send ``signum`` to ``name`` (SIGSTOP / SIGCONT pause and resume it)."""
        popen = self.processes[name].popen
        assert popen is not None and popen.poll() is None, f"{name} is not running"
        popen.send_signal(signum)

    def coordinator_address(self, coordinator_id: int) -> str:
        return self.spec.coordinator_address(coordinator_id)

    def restart(self, name: str, ready_timeout_s: float = 60.0) -> ManagedProcess:
        """Start a stopped process again with the same command line, log and probe."""
        old = self.processes[name]
        assert old.exit_code() is not None, f"{name} is still running"
        new = ManagedProcess(
            name=old.name,
            argv=list(old.argv),
            log_path=old.log_path,
            ready=old.ready,
            env=dict(old.env),
            address=old.address,
        )
        self.processes[name] = new
        self.started.append(new)
        new.start()
        new.wait_ready(ready_timeout_s)
        return new

    def strom(self, *args: str, timeout_s: float = 60.0) -> CliResult:
        """``strom ARGS --bootstrap-server <gateway>``."""
        return run_strom(*args, "--bootstrap-server", self.gateway, timeout_s=timeout_s)

    def admin(self) -> Admin:
        return Admin(self.gateway, request_timeout_ms=20000)

    def describe(self, topic: str) -> TopicDescription:
        with self.admin() as admin:
            (description,) = admin.describe_topics([topic])
        return description

    def partition_dirs(self, node_id: int, topic: str) -> set[str]:
        """Partition directories of ``topic`` in storage node ``node_id``'s log dir."""
        log_dir = self.spec.data_dir / f"storage-{node_id}"
        return {p.name for p in log_dir.glob(f"{topic}-*") if p.is_dir()}

    def wait_for_brokers(self, count: int = STORAGE_NODES, timeout_s: float = 30.0) -> None:
        def ready() -> bool:
            try:
                with self.admin() as admin:
                    cluster = admin.describe_cluster()
            except Exception:
                return False
            return cluster.controller is not None and len(cluster.brokers) == count

        wait_until(ready, timeout_s, f"a controller and {count} registered storage nodes")

    # -- data, straight to partition leaders --------------------------------------------------

    def storage_address(self, node_id: int) -> str:
        return f"{self.spec.host}:{self.spec.base_port + node_id}"

    def produce(
        self,
        topic: str,
        partition: int,
        values: list[bytes],
        *,
        acks: int = -1,
        timeout_ms: int = 10000,
    ) -> storage_pb2.ProducePartitionResult:
        """Append ``values`` as one batch through the partition's current leader (asked again
        while the leader does not host the partition yet: a topic just created)."""
        batch = encode_batch([(int(time.time() * 1000), None, v) for v in values])
        request = storage_pb2.ProduceRequest(
            acks=acks,
            timeout_ms=timeout_ms,
            partitions=[
                storage_pb2.ProducePartitionData(topic=topic, partition=partition, records=batch)
            ],
        )
        deadline = time.monotonic() + 15
        while True:
            leader = self.describe(topic).partitions[partition].leader
            with grpc.insecure_channel(self.storage_address(leader)) as channel:
                response = storage_pb2_grpc.StorageNodeStub(channel).Produce(request, timeout=30)
            (result,) = response.partitions
            if result.error_code not in _NOT_HOSTED_YET or time.monotonic() > deadline:
                return result
            time.sleep(0.1)

    def wait_hosted(self, topic: str, partition: int, timeout_s: float = 30.0) -> None:
        """Wait until the partition's leader serves it (a topic just created is in the
        controller's metadata before its leader hosts it)."""
        request = storage_pb2.ListOffsetsRequest(
            replica_id=-1,
            partitions=[
                storage_pb2.ListOffsetsPartition(
                    topic=topic, partition=partition, spec=common_pb2.LATEST
                )
            ],
        )
        deadline = time.monotonic() + timeout_s
        while True:
            leader = self.describe(topic).partitions[partition].leader
            with grpc.insecure_channel(self.storage_address(leader)) as channel:
                stub = storage_pb2_grpc.StorageNodeStub(channel)
                (result,) = stub.ListOffsets(request, timeout=10).partitions
            if result.error_code not in _NOT_HOSTED_YET:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition} is not hosted by its leader")
            time.sleep(0.1)

    def replica_records(self, node_id: int, topic: str, partition: int) -> tuple[int, list[Record]]:
        """(high watermark, records below it) as node ``node_id``'s replica holds them, leader
        or follower: Fetch with Kafka's debugging replica id (-2)."""
        records: list[Record] = []
        offset = 0
        with grpc.insecure_channel(
            self.storage_address(node_id), options=channel_options()
        ) as channel:
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            while True:
                fetch = storage_pb2.FetchPartition(
                    topic=topic, partition=partition, fetch_offset=offset,
                    partition_max_bytes=8 << 20,
                )  # fmt: skip
                request = storage_pb2.FetchRequest(
                    replica_id=DEBUG_REPLICA_ID, max_bytes=8 << 20, partitions=[fetch]
                )
                (result,) = stub.Fetch(request, timeout=30).partitions
                assert result.error_code == 0, f"node {node_id}: {result.error_message}"
                new = [r for r in iter_records(result.records) if r.offset >= offset]
                records += new
                if not new or new[-1].offset + 1 >= result.high_watermark:
                    return result.high_watermark, records
                offset = new[-1].offset + 1


def read_values(
    cluster: LocalCluster, topic: str, *, isolation_level: str, timeout_s: float = 60.0
) -> list[str]:
    """Every value a new consumer with ``isolation_level`` reads from the beginning of every
    partition of ``topic`` up to its log end (per partition in offset order, partitions
    concatenated). Fails when the reader cannot reach the end (a stuck read_committed reader)."""
    from strom import Consumer, TopicPartition

    partitions = len(cluster.describe(topic).partitions)
    with cluster.admin() as admin:
        latest = admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(partitions)})
    ends = {tp: info.offset for tp, info in latest.items()}
    found: dict[int, list[str]] = {p: [] for p in range(partitions)}
    with Consumer(
        bootstrap_servers=cluster.gateway,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=isolation_level,
    ) as consumer:
        consumer.assign(list(ends))
        deadline = time.monotonic() + timeout_s
        while not all(consumer.position(tp) >= end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                positions = {tp.partition: consumer.position(tp) for tp in ends}
                raise AssertionError(
                    f"{isolation_level} reader of {topic} stuck at {positions}, log ends "
                    f"{ {tp.partition: end for tp, end in ends.items()} }"
                )
            for tp, records in consumer.poll(timeout_ms=300).items():
                found[tp.partition] += [(r.value or b"").decode() for r in records]
    return [value for p in range(partitions) for value in found[p]]


def start_local_cluster(
    data_dir: Path, cluster_class: type[LocalCluster] = LocalCluster, **spec: Any
) -> Iterator[LocalCluster]:
    """Start a cluster (``spec``: extra ``LocalClusterSpec`` fields, e.g. ``coordinators=2,
    coordinator_flags=(...)``; ``cluster_class``: a LocalCluster that starts it its own way)
    and stop it afterwards."""
    ports = SERVICE_PORTS + int(spec.get("coordinators", 1))
    base = free_port_range(ports)
    singles: list[int] = []  # etcd client, etcd peer, the gateway's Kafka listener
    while len(singles) < 3:
        port = free_port()
        if port not in singles and not base <= port < base + ports:
            singles.append(port)
    etcd_client, etcd_peer, kafka = singles
    spec.setdefault("kafka_port", kafka)
    spec = LocalClusterSpec(
        data_dir=data_dir,
        etcd_client_port=etcd_client,
        etcd_peer_port=etcd_peer,
        base_port=base,
        storage_nodes=STORAGE_NODES,
        controllers=2,
        **spec,
    )
    cluster = cluster_class(spec)
    try:
        cluster.start()
        cluster.wait_for_brokers()
        yield cluster
    finally:
        cluster.stop_all()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One running cluster for the whole test module."""
    yield from start_local_cluster(tmp_path_factory.mktemp("cluster"))
