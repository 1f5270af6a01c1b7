"""The embedded default cluster behind ``strom cluster up``: local processes, one data directory.

Today it runs etcd (the metadata store every service needs) and three storage nodes; each
service issue adds its processes here (two controllers, a coordinator, a gateway), so that
``strom cluster up``, the docker-compose file and the integration tests share one definition.
Services are started by module name (``python -m strom_storage``): this package never imports
them. Until the controller assigns partitions, ``topics`` are hosted by the first storage node.

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
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from strom_server.etcd_binary import find_etcd
from strom_server.etcd_process import etcd_argv, etcd_is_healthy
from strom_server.health_probe import grpc_serving
from strom_server.supervisor import ManagedProcess, ProcessFailedError, Supervisor

log = structlog.get_logger(__name__)

__all__ = ["ClusterAlreadyRunningError", "LocalClusterSpec", "read_state", "run_cluster"]

STATE_FILE = "cluster.json"


class ClusterAlreadyRunningError(RuntimeError):
    """Another ``strom cluster up`` is running from the same data directory."""


@dataclass(frozen=True)
class LocalClusterSpec:
    """Where the embedded cluster keeps its data and which loopback ports it uses."""

    data_dir: Path
    host: str = "127.0.0.1"
    etcd_client_port: int = 2379
    etcd_peer_port: int = 2380
    storage_nodes: int = 3
    storage_base_port: int = 9093
    #: Partitions hosted before a controller exists (``name:count``), on the first node.
    topics: tuple[str, ...] = ()

    @property
    def etcd_endpoint(self) -> str:
        return f"http://{self.host}:{self.etcd_client_port}"

    def processes(self) -> list[ManagedProcess]:
        """Every process of the cluster, in start order."""
        return [self._etcd(), *(self._storage_node(i) for i in range(1, self.storage_nodes + 1))]

    def storage_address(self, node_id: int) -> str:
        return f"{self.host}:{self.storage_base_port + node_id - 1}"

    def _storage_node(self, node_id: int) -> ManagedProcess:
        address = self.storage_address(node_id)
        argv = [
            sys.executable, "-m", "strom_storage",
            "--node-id", str(node_id),
            "--rack", f"rack-{node_id}",
            "--listen", address,
            "--log-dirs", str(self.data_dir / f"storage-{node_id}"),
            # Standalone until controllers join the local cluster (they assign partitions).
            "--etcd-endpoints", "",
        ]  # fmt: skip
        if node_id == 1 and self.topics:
            argv += ["--topics", ",".join(self.topics)]
        return ManagedProcess(
            name=f"storage-{node_id}",
            argv=argv,
            log_path=self.data_dir / "logs" / f"storage-{node_id}.log",
            ready=lambda: grpc_serving(address),
            address=address,
        )

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
        ports = {"etcd client": self.etcd_client_port, "etcd peer": self.etcd_peer_port}
        for node_id in range(1, self.storage_nodes + 1):
            ports[f"storage node {node_id}"] = self.storage_base_port + node_id - 1
        return ports


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


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
        "storage_nodes": [spec.storage_address(i) for i in range(1, spec.storage_nodes + 1)],
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
    supervisor = Supervisor(processes)
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
        announce(f"  etcd endpoints: {spec.etcd_endpoint}")
        storage = [spec.storage_address(i) for i in range(1, spec.storage_nodes + 1)]
        if storage:
            announce(f"  storage nodes:  {', '.join(storage)}")
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
