"""The embedded default cluster behind ``strom cluster up``: local processes, one data directory.

It runs etcd, two controllers, three storage nodes, a gateway and a group coordinator, so
that ``strom cluster up``, the docker-compose file and the integration tests share one
definition. Services are started by module name (``python -m strom_storage``): this package
never imports them.

Directory layout under ``data_dir``::

    etcd/            etcd's data (kept between runs)
    storage-<id>/    partition logs of storage node <id>
    logs/<name>.log  each process's output
    cluster.json     what is running (pids, addresses) while the cluster is up
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from strom import Admin, NewTopic, StromError
from strom_server.etcd_binary import find_etcd
from strom_server.etcd_process import etcd_argv, etcd_is_healthy
from strom_server.free_ports import port_in_use
from strom_server.health_probe import grpc_serving
from strom_server.supervisor import ManagedProcess, ProcessFailedError, Supervisor

log = structlog.get_logger(__name__)

__all__ = ["ClusterAlreadyRunningError", "LocalClusterSpec", "read_state", "run_cluster"]

STATE_FILE = "cluster.json"
#: Seconds a process gets to stop after SIGTERM before SIGKILL (closing thousands of logs
#: fsyncs each of them).
STOP_GRACE_S = 30.0


class ClusterAlreadyRunningError(RuntimeError):
    """Another ``strom cluster up`` is running from the same data directory."""


@dataclass(frozen=True)
class LocalClusterSpec:
    """Where the embedded cluster keeps its data and which loopback ports it uses.

    Ports from ``base_port`` (default 9092): the gateway on ``base_port``, storage node N on
    ``base_port + N``, then the controllers, then the coordinators.
    """

    data_dir: Path
    host: str = "127.0.0.1"
    etcd_client_port: int = 2379
    etcd_peer_port: int = 2380
    base_port: int = 9092
    storage_nodes: int = 3
    controllers: int = 2
    coordinators: int = 1
    #: Topics to create once the cluster is up: ``name:partitions[:replication factor]``.
    topics: tuple[str, ...] = ()
    #: Extra command-line settings for every storage node / controller / coordinator (tests,
    #: chaos runs).
    storage_flags: tuple[str, ...] = ()
    controller_flags: tuple[str, ...] = ()
    coordinator_flags: tuple[str, ...] = ()

    @property
    def etcd_endpoint(self) -> str:
        return f"http://{self.host}:{self.etcd_client_port}"

    @property
    def gateway_address(self) -> str:
        return f"{self.host}:{self.base_port}"

    def storage_address(self, node_id: int) -> str:
        return f"{self.host}:{self.base_port + node_id}"

    def controller_address(self, controller_id: int) -> str:
        return f"{self.host}:{self.base_port + self.storage_nodes + controller_id}"

    def coordinator_address(self, coordinator_id: int) -> str:
        port = self.base_port + self.storage_nodes + self.controllers + coordinator_id
        return f"{self.host}:{port}"

    def processes(self) -> list[ManagedProcess]:
        """Every process of the cluster, in start order (each ready before the next)."""
        return [
            self._etcd(),
            *(self._controller(i) for i in range(1, self.controllers + 1)),
            *(self._storage_node(i) for i in range(1, self.storage_nodes + 1)),
            self._gateway(),
            # After the gateway: they bootstrap through it.
            *(self._coordinator(i) for i in range(1, self.coordinators + 1)),
        ]

    def _service(self, name: str, module: str, address: str, *flags: str) -> ManagedProcess:
        argv = [
            sys.executable, "-m", module,
            "--listen", address,
            "--etcd-endpoints", f"{self.host}:{self.etcd_client_port}",
            *flags,
        ]  # fmt: skip
        return ManagedProcess(
            name=name,
            argv=argv,
            log_path=self.data_dir / "logs" / f"{name}.log",
            ready=lambda: grpc_serving(address),
            address=address,
        )

    def _controller(self, controller_id: int) -> ManagedProcess:
        return self._service(
            f"controller-{controller_id}",
            "strom_controller",
            self.controller_address(controller_id),
            "--controller-id", str(controller_id),
            *self.controller_flags,
        )  # fmt: skip

    def _storage_node(self, node_id: int) -> ManagedProcess:
        return self._service(
            f"storage-{node_id}",
            "strom_storage",
            self.storage_address(node_id),
            "--node-id", str(node_id),
            "--rack", f"rack-{node_id}",
            "--log-dirs", str(self.data_dir / f"storage-{node_id}"),
            *self.storage_flags,
        )  # fmt: skip

    def _coordinator(self, coordinator_id: int) -> ManagedProcess:
        return self._service(
            f"coordinator-{coordinator_id}",
            "strom_coordinator",
            self.coordinator_address(coordinator_id),
            "--coordinator-id", str(coordinator_id),
            "--bootstrap-servers", self.gateway_address,
            *self.coordinator_flags,
        )  # fmt: skip

    def _gateway(self) -> ManagedProcess:
        return self._service("gateway", "strom_gateway", self.gateway_address)

    def _etcd(self) -> ManagedProcess:
        argv = etcd_argv(
            find_etcd(),
            name="strom-etcd",
            data_dir=self.data_dir / "etcd",
            host=self.host,
            client_port=self.etcd_client_port,
            peer_port=self.etcd_peer_port,
        )
        return ManagedProcess(
            name="etcd",
            argv=argv,
            log_path=self.data_dir / "logs" / "etcd.log",
            ready=lambda: etcd_is_healthy(self.etcd_endpoint),
            address=self.etcd_endpoint,
        )

    def ports(self) -> dict[str, int]:
        ports = {"etcd client": self.etcd_client_port, "etcd peer": self.etcd_peer_port,
                 "gateway": self.base_port}  # fmt: skip
        for node_id in range(1, self.storage_nodes + 1):
            ports[f"storage node {node_id}"] = self.base_port + node_id
        for controller_id in range(1, self.controllers + 1):
            ports[f"controller {controller_id}"] = (
                self.base_port + self.storage_nodes + controller_id
            )
        for coordinator_id in range(1, self.coordinators + 1):
            ports[f"coordinator {coordinator_id}"] = (
                self.base_port + self.storage_nodes + self.controllers + coordinator_id
            )
        return ports


def parse_topic_spec(spec: str) -> NewTopic:
    """``name:partitions[:replication factor]`` -> NewTopic (defaults: 1 partition, RF 1)."""
    parts = spec.split(":")
    try:
        counts = [int(p) for p in parts[1:3]]
    except ValueError:
        raise ValueError(f"topic spec {spec!r}: expected name:partitions[:replication]") from None
    if not parts[0] or len(parts) > 3 or any(c < 1 for c in counts):
        raise ValueError(f"topic spec {spec!r}: expected name:partitions[:replication]")
    partitions = counts[0] if counts else 1
    replication = counts[1] if len(counts) > 1 else 1
    return NewTopic(parts[0], partitions, replication)


def create_topics(spec: LocalClusterSpec, timeout_s: float = 60.0) -> list[str]:
    """Create ``spec.topics`` through the gateway (existing ones are left as they are);
    waits for the controller and the storage nodes to be known first."""
    wanted = [parse_topic_spec(t) for t in spec.topics]
    if not wanted:
        return []
    deadline = time.monotonic() + timeout_s
    with Admin(spec.gateway_address, request_timeout_ms=int(timeout_s * 1000)) as admin:
        while True:
            try:
                cluster = admin.describe_cluster()
                if cluster.controller is not None and len(cluster.brokers) >= spec.storage_nodes:
                    break
            except StromError:
                pass
            if time.monotonic() > deadline:
                raise ProcessFailedError("the controller did not see every storage node in time")
            time.sleep(0.2)
        existing = set(admin.list_topics(include_internal=True))
        created = [t for t in wanted if t.name not in existing]
        if created:
            admin.create_topics(created)
        return [t.name for t in created]


def read_state(data_dir: Path) -> dict[str, object] | None:
    """The state file of a running cluster, or None when none is recorded."""
    try:
        return json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_processes(data_dir: Path) -> dict[str, dict[str, object]]:
    """Processes recorded in the state file that are still alive, by name."""
    state = read_state(data_dir) or {}
    processes = state.get("processes", {})
    assert isinstance(processes, dict)
    return {name: info for name, info in processes.items() if _pid_alive(int(info["pid"]))}


def _check_startable(spec: LocalClusterSpec) -> None:
    alive = running_processes(spec.data_dir)
    if alive:
        pids = ", ".join(f"{name} pid {info['pid']}" for name, info in alive.items())
        raise ClusterAlreadyRunningError(
            f"a cluster is already running from {spec.data_dir} ({pids}); stop it first"
        )
    busy = [
        f"{what} port {port}" for what, port in spec.ports().items() if port_in_use(spec.host, port)
    ]
    if busy:
        raise ProcessFailedError(
            f"{', '.join(busy)} on {spec.host} already in use; pick other ports "
            "(see `strom cluster up --help`)"
        )


def _write_state(spec: LocalClusterSpec, processes: list[ManagedProcess]) -> None:
    state = {
        "started_at": time.time(),
        "supervisor_pid": os.getpid(),
        "etcd_endpoints": [spec.etcd_endpoint],
        "gateway": spec.gateway_address,
        "processes": {
            p.name: {"pid": p.pid, "address": p.address, "log": str(p.log_path)} for p in processes
        },
    }
    tmp = spec.data_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(spec.data_dir / STATE_FILE)


def _describe_exit(code: int | None) -> str:
    if code in (0, -signal.SIGTERM):
        return "stopped"
    return f"exit {code}" if code is None or code >= 0 else f"killed by signal {-code}"


def run_cluster(
    spec: LocalClusterSpec,
    *,
    ready_timeout_s: float = 60.0,
    announce: Callable[[str], object] = print,
) -> int:
    """Start the cluster, announce it, block until SIGINT/SIGTERM or a process dies, stop all.

    Returns the exit status for the CLI: 0 after a requested stop, 1 when a process died.
    """
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    _check_startable(spec)
    processes = spec.processes()
    supervisor = Supervisor(processes, grace_s=STOP_GRACE_S)
    stop_requested = False

    def request_stop(signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        supervisor.start_all(
            ready_timeout_s,
            on_ready=lambda p: announce(f"  {p.name:<12} ready  {p.address}  (log: {p.log_path})"),
        )
        _write_state(spec, processes)
        announce(f"Strom cluster is up (data in {spec.data_dir}).")
        created = create_topics(spec)
        if created:
            announce(f"  created topics: {', '.join(created)}")
        announce(f"  bootstrap (gateway): {spec.gateway_address}")
        announce(f"  etcd endpoints:      {spec.etcd_endpoint}")
        announce("Press Ctrl-C to stop.")
        status = 0
        while not stop_requested:
            dead = supervisor.first_exited()
            if dead is not None:
                announce(
                    f"{dead.name} exited with code {dead.exit_code()}; stopping the cluster."
                    f" Last lines of {dead.log_path}:\n{dead.tail()}"
                )
                status = 1
                break
            time.sleep(0.2)
        announce("Stopping...")
        codes = supervisor.stop_all()
        announce(
            "Stopped: "
            + ", ".join(f"{name} ({_describe_exit(code)})" for name, code in codes.items())
        )
        return status
    finally:
        supervisor.stop_all()
        (spec.data_dir / STATE_FILE).unlink(missing_ok=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
