"""The embedded default cluster behind ``strom cluster up``: local processes, one data directory.

It runs etcd, two controllers, three storage nodes, a gateway and a group coordinator, so
that ``strom cluster up``, the docker-compose file and the integration tests share one
definition. Services are started by module name (``python -m strom_storage``): this package
never imports them.

Directory layout under ``data_dir``::

    etcd/               etcd's data (kept between runs)
    storage-<id>/       partition logs of storage node <id>
    logs/<name>.log     each process's output (restarts append to it)
    logs/supervisor.log the supervisor's own output when it runs detached
    cluster.json        what is running (states, pids, restarts) while the cluster is up
    supervisor.sock     the supervisor's control socket (``strom cluster stop NODE`` ...)

``run_cluster`` starts everything in dependency order and then keeps it running (see
``process_keeper``); ``cluster_control`` holds what other terminals do to a running cluster.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from strom import Admin, NewTopic, StromError
from strom_server.etcd.binary import find_etcd
from strom_server.etcd.process import etcd_argv, etcd_is_healthy
from strom_server.local import secure
from strom_server.local.cluster_state import (
    clear_ready,
    mark_ready,
    process_start_ticks,
    read_state,
    remove_state,
    running_processes,
    supervisor_alive,
    write_state,
)
from strom_server.local.control_socket import ControlServer, socket_path_for
from strom_server.local.free_ports import port_in_use
from strom_server.local.process_keeper import ProcessKeeper
from strom_server.local.restart_policy import RestartPolicy
from strom_server.local.supervisor import ManagedProcess, ProcessFailedError, Supervisor
from strom_server.rpc.health_probe import grpc_serving

log = structlog.get_logger(__name__)

__all__ = [
    "ClusterAlreadyRunningError",
    "LocalClusterSpec",
    "StopRequests",
    "check_startable",
    "run_cluster",
    "spec_from_json",
    "spec_to_json",
]
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
    #: The web console's port (``strom cluster up`` passes 8080); None: no console (tests,
    #: benchmarks).
    console_port: int | None = None
    #: The schema registry's port (``strom cluster up`` passes 8081); None: no registry
    #: (tests, benchmarks).
    registry_port: int | None = None
    #: The gateway's Kafka-protocol listener; None: ``base_port + 100`` (9192 by default).
    kafka_port: int | None = None
    #: TLS, SCRAM logins and ACLs everywhere (``strom cluster up --secure``,
    #: ``strom_server.local.secure``): certificates under ``<data_dir>/tls/``, the super user's
    #: settings in ``<data_dir>/admin.properties``.
    secure: bool = False

    @property
    def etcd_endpoint(self) -> str:
        scheme = "https" if self.secure else "http"
        return f"{scheme}://{self.host}:{self.etcd_client_port}"

    @property
    def gateway_address(self) -> str:
        return f"{self.host}:{self.base_port}"

    @property
    def kafka_address(self) -> str:
        """Where Kafka clients bootstrap (the gateway's Kafka listener)."""
        port = self.base_port + 100 if self.kafka_port is None else self.kafka_port
        return f"{self.host}:{port}"

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
            # Clients of the gateway like any other.
            *([self._registry()] if self.registry_port is not None else []),
            *([self._console()] if self.console_port is not None else []),
        ]

    def _service(
        self, role: str, node_id: int | None, module: str, address: str, *flags: str
    ) -> ManagedProcess:
        name = role if node_id is None else f"{role}-{node_id}"
        argv = [
            sys.executable, "-m", module,
            "--listen", address,
            "--etcd-endpoints", f"{self.host}:{self.etcd_client_port}",
            *flags,
        ]  # fmt: skip
        cafile = None
        if self.secure:
            secure.prepare_tls(self.data_dir, [name])
            argv += secure.service_flags(self.data_dir, name)
            cafile = str(secure.tls_dir(self.data_dir) / "ca.crt")
        return ManagedProcess(
            name=name,
            argv=argv,
            log_path=self.data_dir / "logs" / f"{name}.log",
            ready=lambda: grpc_serving(address, cafile=cafile),
            address=address,
            role=role,
            node_id=node_id,
        )

    def _controller(self, controller_id: int) -> ManagedProcess:
        return self._service(
            "controller", controller_id, "strom_controller",
            self.controller_address(controller_id),
            "--controller-id", str(controller_id),
            *self.controller_flags,
        )  # fmt: skip

    def _storage_node(self, node_id: int) -> ManagedProcess:
        return self._service(
            "storage", node_id, "strom_storage",
            self.storage_address(node_id),
            "--node-id", str(node_id),
            "--rack", f"rack-{node_id}",
            "--log-dirs", str(self.data_dir / f"storage-{node_id}"),
            *self.storage_flags,
        )  # fmt: skip

    def _coordinator(self, coordinator_id: int) -> ManagedProcess:
        return self._service(
            "coordinator", coordinator_id, "strom_coordinator",
            self.coordinator_address(coordinator_id),
            "--coordinator-id", str(coordinator_id),
            "--bootstrap-servers", self.gateway_address,
            *self.coordinator_flags,
        )  # fmt: skip

    def _gateway(self) -> ManagedProcess:
        return self._service(
            "gateway", None, "strom_gateway", self.gateway_address,
            "--kafka-port", self.kafka_address,
        )  # fmt: skip

    @property
    def console_url(self) -> str:
        return f"http://{self.host}:{self.console_port}"

    @property
    def registry_url(self) -> str:
        scheme = "https" if self.secure else "http"
        return f"{scheme}://{self.host}:{self.registry_port}"

    def _registry(self) -> ManagedProcess:
        """The schema registry (``strom_registry``): REST API, data in the ``_schemas`` topic.
        Secure: HTTPS with its own certificate, Basic authentication and ACLs, reaching the
        cluster as the super user (admin.properties)."""
        assert self.registry_port is not None
        flags = ["--etcd-endpoints", f"{self.host}:{self.etcd_client_port}"]
        if self.secure:
            secure.prepare_tls(self.data_dir, ["registry"])
            flags += secure.service_flags(self.data_dir, "registry")
            flags += ["--command-config", str(secure.admin_properties_path(self.data_dir))]
        return self._http_service("registry", self.registry_port, *flags)

    def _console(self) -> ManagedProcess:
        """The web console (``strom_console``); with the registry, its schemas pages. Secure:
        it reaches the cluster, and the registry (HTTPS, Basic), as the super user
        (admin.properties) and its pages need a login as that user, with the same password
        (``console.password``)."""
        assert self.console_port is not None
        flags = [] if self.registry_port is None else ["--schema-registry-url", self.registry_url]
        if self.secure:
            secure.prepare_tls(self.data_dir, [])  # admin.properties
            password_file = self.data_dir / "console.password"
            password_file.touch(mode=0o600)
            password_file.write_text(secure.admin_options(self.data_dir)["sasl_plain_password"])
            flags += [
                "--command-config", str(secure.admin_properties_path(self.data_dir)),
                "--user", secure.ADMIN_USER,
                "--password-file", str(password_file),
            ]  # fmt: skip
        return self._http_service("console", self.console_port, *flags)

    def _http_service(self, name: str, port: int, *flags: str) -> ManagedProcess:
        """An HTTP service (``strom_<name>``, a client of the gateway), ready when its health
        path (``HTTP_HEALTH_PATHS``) answers 200."""
        address = f"{self.host}:{port}"
        # Secure services serve HTTPS (the registry; its health path needs no login).
        https = self.secure and "--ssl.certfile" in flags
        cafile = str(secure.tls_dir(self.data_dir) / "ca.crt") if https else None
        url = f"{'https' if https else 'http'}://{address}"
        argv = [
            sys.executable, "-m", f"strom_{name}",
            "--listen", address,
            "--bootstrap-servers", self.gateway_address,
            *flags,
        ]  # fmt: skip
        return ManagedProcess(
            name=name,
            argv=argv,
            log_path=self.data_dir / "logs" / f"{name}.log",
            ready=lambda: http_ok(f"{url}{HTTP_HEALTH_PATHS[name]}", cafile=cafile),
            address=url,
            role=name,
        )

    def _etcd(self) -> ManagedProcess:
        tls = None
        if self.secure:
            secure.prepare_tls(self.data_dir, ["etcd"])
            tls = secure.etcd_tls(self.data_dir)
        argv = etcd_argv(
            find_etcd(),
            name="strom-etcd",
            data_dir=self.data_dir / "etcd",
            host=self.host,
            client_port=self.etcd_client_port,
            peer_port=self.etcd_peer_port,
            tls=tls,
        )
        return ManagedProcess(
            name="etcd",
            argv=argv,
            log_path=self.data_dir / "logs" / "etcd.log",
            ready=lambda: etcd_is_healthy(self.etcd_endpoint, tls=tls),
            address=self.etcd_endpoint,
            role="etcd",
        )

    def ports(self) -> dict[str, int]:
        ports = {"etcd client": self.etcd_client_port, "etcd peer": self.etcd_peer_port,
                 "gateway": self.base_port,
                 "gateway kafka": int(self.kafka_address.rpartition(":")[2])}  # fmt: skip
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
        if self.console_port is not None:
            ports["console"] = self.console_port
        if self.registry_port is not None:
            ports["schema registry"] = self.registry_port
        return ports


#: The HTTP services (the others speak gRPC) and the path their health check asks for.
HTTP_HEALTH_PATHS = {"console": "/healthz", "registry": "/"}


def http_ok(url: str, cafile: str | None = None) -> bool:
    """Whether ``url`` answers 200 (the console's and the registry's readiness probe);
    ``cafile``: the CA an https URL's certificate is checked against."""
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except OSError:
        return False


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
    options = secure.admin_options(spec.data_dir) if spec.secure else {}
    with Admin(spec.gateway_address, request_timeout_ms=int(timeout_s * 1000), **options) as admin:
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


def check_startable(spec: LocalClusterSpec) -> None:
    """Refuse to start when a cluster already runs from the data directory or a port is busy."""
    alive = running_processes(spec.data_dir)
    state = read_state(spec.data_dir)
    if state is not None and supervisor_alive(state):
        alive.setdefault("supervisor", {"pid": state["supervisor_pid"]})
    if alive:
        pids = ", ".join(f"{name} pid {info['pid']}" for name, info in alive.items())
        raise ClusterAlreadyRunningError(
            f"a cluster is already running from {spec.data_dir} ({pids}); stop it first "
            "(`strom cluster down`)"
        )
    busy = [
        f"{what} port {port}" for what, port in spec.ports().items() if port_in_use(spec.host, port)
    ]
    if busy:
        raise ProcessFailedError(
            f"{', '.join(busy)} on {spec.host} already in use; pick other ports "
            "(see `strom cluster up --help`)"
        )


def spec_to_json(spec: LocalClusterSpec) -> dict[str, Any]:
    """The spec as JSON-ready values (for a detached supervisor)."""
    values = dataclasses.asdict(spec)
    values["data_dir"] = str(spec.data_dir)
    return values


def spec_from_json(values: dict[str, Any]) -> LocalClusterSpec:
    fields = {f.name for f in dataclasses.fields(LocalClusterSpec)}
    unknown = set(values) - fields
    if unknown:
        raise ValueError(f"unknown cluster spec fields: {', '.join(sorted(unknown))}")
    converted: dict[str, Any] = {
        name: tuple(value) if isinstance(value, list) else value for name, value in values.items()
    }
    converted["data_dir"] = Path(values["data_dir"])
    return LocalClusterSpec(**converted)


def _ready_settings(spec: LocalClusterSpec) -> dict[str, str]:
    """What ``cluster.ready`` says: where to connect, and with which settings."""
    settings = {"bootstrap.servers": spec.gateway_address, "kafka.servers": spec.kafka_address}
    if spec.secure:
        settings["command.config"] = str(secure.admin_properties_path(spec.data_dir))
        settings["kafka.config"] = str(secure.kafka_properties_path(spec.data_dir))
    return settings


class _StateWriter:
    """Keeps ``cluster.json`` in step with the keeper."""

    def __init__(self, spec: LocalClusterSpec, policy: RestartPolicy, control_socket: Path) -> None:
        self.spec = spec
        self.base = {
            "started_at": time.time(),
            "supervisor_pid": os.getpid(),
            "supervisor_started": process_start_ticks(os.getpid()),
            "control_socket": str(control_socket),
            "restart": policy.enabled,
            "etcd_endpoints": [spec.etcd_endpoint],
            "gateway": spec.gateway_address,
        }

    def write(self, status: str, processes: dict[str, dict[str, Any]]) -> None:
        for info in processes.values():
            pid = info.get("pid")
            info["pid_started"] = process_start_ticks(pid) if isinstance(pid, int) else None
        write_state(self.spec.data_dir, {**self.base, "status": status, "processes": processes})


def _starting(processes: list[ManagedProcess]) -> dict[str, dict[str, Any]]:
    """The state of each process while the cluster starts (before the keeper takes over)."""
    described = {}
    for p in processes:
        state = "pending" if p.pid is None else "up" if p.exit_code() is None else "exited"
        described[p.name] = {
            "role": p.role, "id": p.node_id, "pid": p.pid, "address": p.address,
            "log": str(p.log_path), "state": state, "restarts": 0,
        }  # fmt: skip
    return described


class StopRequests:
    """The stop signals' handler: the first asks for an orderly stop (``requested``), a
    second one, once the keeper runs, forces it (``ProcessKeeper.force_stop``: what is still
    running is killed at once instead of after its grace period)."""

    def __init__(self) -> None:
        self.requested = False
        self.keeper: ProcessKeeper | None = None

    def __call__(self, signum: int, _frame: object) -> None:
        if self.requested and self.keeper is not None:
            self.keeper.force_stop()
        self.requested = True


def run_cluster(
    spec: LocalClusterSpec,
    *,
    ready_timeout_s: float = 60.0,
    announce: Callable[[str], object] = print,
    policy: RestartPolicy | None = None,
    detached: bool = False,
) -> int:
    """Start the cluster, announce it, keep it running until SIGINT, SIGTERM or SIGHUP, stop it.

    A process that exits meanwhile is restarted under ``policy`` (the default
    ``RestartPolicy()``) while the others keep serving; commands from other terminals
    (``strom cluster stop|start|restart|kill NODE``) arrive on the control socket. Returns
    the exit status for the CLI: 0 after a requested stop.
    """
    policy = policy or RestartPolicy()
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    check_startable(spec)
    clear_ready(spec.data_dir)  # left by a supervisor that was killed
    processes = spec.processes()
    supervisor = Supervisor(processes, grace_s=STOP_GRACE_S)
    stops = StopRequests()
    # SIGHUP too: closing the terminal of a foreground `up` must not orphan its processes.
    stop_signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, stops) for sig in stop_signals}
    control_path = socket_path_for(spec.data_dir)
    state = _StateWriter(spec, policy, control_path)
    control: ControlServer | None = None
    try:
        state.write("starting", _starting(processes))

        def on_ready(process: ManagedProcess) -> None:
            if spec.secure and process.role == "etcd":  # the registry logs in as admin
                secure.create_admin(spec.data_dir, f"{spec.host}:{spec.etcd_client_port}")
            state.write("starting", _starting(processes))
            announce(f"  {process.name:<13} ready  {process.address}  (log: {process.log_path})")

        supervisor.start_all(ready_timeout_s, on_ready=on_ready)
        keeper = stops.keeper = ProcessKeeper(
            processes,
            policy,
            ready_timeout_s=ready_timeout_s,
            grace_s=STOP_GRACE_S,
            announce=announce,
        )
        control = ControlServer(control_path, partial(_handle_request, keeper))
        created = create_topics(spec)
        kafka_settings = None
        if spec.secure:  # SASL_SSL: librdkafka-style settings for the admin
            kafka_settings = secure.write_kafka_properties(spec.data_dir, spec.kafka_address)
        ready = mark_ready(spec.data_dir, _ready_settings(spec))
        for line in _up_lines(spec, created, ready, kafka_settings):
            announce(line)
        if not policy.enabled:
            announce("  --no-restart: a process that exits stays down")
        if detached:
            announce(f"Stop it with `strom cluster down --data-dir {spec.data_dir}`.")
        else:
            announce("Press Ctrl-C to stop.")
        state.write("up", keeper.describe())  # `up --detach` returns: all of the above shown
        while not stops.requested:
            commanded = control.serve(timeout_s=0.2)
            if keeper.tick() or commanded:
                state.write("up", keeper.describe())
        clear_ready(spec.data_dir)
        announce("Stopping... (Ctrl-C again to kill the processes at once)")
        state.write("stopping", keeper.describe())
        ended = keeper.stop_all()
        announce("Stopped: " + ", ".join(f"{name} ({how})" for name, how in ended.items()))
        return 0
    finally:
        if control is not None:
            control.close()
        supervisor.stop_all()
        remove_state(spec.data_dir)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _up_lines(
    spec: LocalClusterSpec, created: list[str], ready: Path, kafka_settings: Path | None
) -> list[str]:
    """What ``run_cluster`` tells the operator once the cluster is up: where to connect."""
    lines = [f"Strom cluster is up (data in {spec.data_dir})."]
    if created:
        lines.append(f"  created topics: {', '.join(created)}")
    lines.append(f"  bootstrap (gateway): {spec.gateway_address}")
    if spec.secure:
        lines.append(
            f"  secure: SASL_SSL, super user admin; client settings in "
            f"{secure.admin_properties_path(spec.data_dir)} (--command-config)"
        )
    if spec.console_port is not None:
        login = " (login: admin, password in admin.properties)" if spec.secure else ""
        lines.append(f"  web console:         {spec.console_url}{login}")
    if spec.registry_port is not None:
        lines.append(f"  schema registry:     {spec.registry_url}")
    if kafka_settings is not None:
        lines.append(f"  Kafka clients:       {spec.kafka_address} (SASL_SSL: {kafka_settings})")
    else:
        lines.append(f"  Kafka clients:       {spec.kafka_address}")
    lines.append(f"  etcd endpoints:      {spec.etcd_endpoint}")
    lines.append(f"  ready marker:        {ready} (exists while the cluster serves)")
    return lines


def _handle_request(keeper: ProcessKeeper, request: dict[str, Any]) -> dict[str, Any]:
    op, name = request.get("op"), request.get("name")
    if not isinstance(op, str) or not isinstance(name, str):
        return {"ok": False, "error": "a request needs string fields 'op' and 'name'"}
    try:
        message = keeper.command(op, name)
    except ValueError as exc:
        return {"ok": False, "error": str(exc)}
    log.info("operator command", op=op, process=name, result=message)
    return {"ok": True, "message": message}


def main(argv: list[str] | None = None) -> int:
    """``python -m strom_server.local.cluster RUN.json``: the detached supervisor of
    ``strom cluster up --detach`` (RUN.json: the spec, the ready timeout and the policy)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m strom_server.local.cluster RUN.json", file=sys.stderr)
        return 2
    run = json.loads(Path(args[0]).read_text())
    return run_cluster(
        spec_from_json(run["spec"]),
        ready_timeout_s=float(run["ready_timeout_s"]),
        announce=lambda line: print(line, flush=True),
        policy=RestartPolicy(**run["policy"]),
        detached=bool(run.get("detached", False)),
    )


if __name__ == "__main__":
    sys.exit(main())
