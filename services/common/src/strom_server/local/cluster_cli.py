"""``strom cluster ...``: run the embedded local cluster and operate it from other terminals.

``up`` (foreground, or ``--detach``), ``down``, ``status``, ``stop|start|restart|kill NODE``
and ``logs NODE [-f]``. Registered with the ``strom`` command through the entry point
``cluster`` of the group ``strom.cli_commands`` (``strom.cli.server_commands``); the engine
(``strom_server.local``) is imported when a command runs, so ``strom`` starts as fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from strom.cli.cluster_status import print_status, status_document

DEFAULT_DATA_DIR = Path(".strom")
#: What ``stop|start|restart|kill`` wait for, as states of the process in the state file.
_UP, _DOWN = ("up",), ("stopped", "exited", "failed")


def _add_data_dir(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"{what} (default: %(default)s)",
    )


def add_parsers(commands: Any) -> None:
    """Add ``strom cluster ...`` to the ``strom`` command's subparsers ``commands``."""
    cluster = commands.add_parser("cluster", help="run a local cluster (etcd and services)")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    _add_up_parser(actions)
    _add_control_parsers(actions)


def _add_up_parser(actions: Any) -> None:
    up = actions.add_parser(
        "up", help="start the local cluster and keep it running; Ctrl-C (or `down`) stops it"
    )
    _add_data_dir(up, "where every process keeps its data and logs")
    up.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    up.add_argument("--etcd-client-port", type=int, default=2379, help="default: %(default)s")
    up.add_argument("--etcd-peer-port", type=int, default=2380, help="default: %(default)s")
    up.add_argument(
        "--base-port",
        type=int,
        default=9092,
        help="gateway port; storage node N listens on base+N, then the controllers, then the "
        "coordinators (default: %(default)s)",
    )
    up.add_argument(
        "--kafka-port",
        type=int,
        default=None,
        help="the gateway's Kafka-protocol listener (default: base port + 100, i.e. 9192)",
    )
    up.add_argument(
        "--console-port",
        type=int,
        default=8080,
        help="the web console's port on --host; 0: no console (default: %(default)s)",
    )
    up.add_argument(
        "--registry-port",
        type=int,
        default=8081,
        help="the schema registry's port on --host; 0: no registry (default: %(default)s)",
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="TLS, SCRAM logins and ACLs everywhere: certificates under DATA_DIR/tls, the super "
        "user's settings in DATA_DIR/admin.properties (docs/security.md; written before the "
        "services start: a script waits for DATA_DIR/cluster.ready); the schema registry "
        "serves HTTPS with Basic authentication; the console asks for the admin's login",
    )
    up.add_argument("--storage-nodes", type=int, default=3, help="default: %(default)s")
    up.add_argument("--controllers", type=int, default=2, help="default: %(default)s")
    up.add_argument(
        "--coordinators", type=int, default=1, help="group coordinators (default: %(default)s)"
    )
    up.add_argument(
        "--topics",
        default="",
        help="topics to create once up: name:partitions[:replication],... (existing ones are kept)",
    )
    up.add_argument(
        "--ready-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for each process to be healthy (default: %(default)s)",
    )
    up.add_argument(
        "--detach",
        action="store_true",
        help="run in the background (supervisor output in DATA_DIR/logs/supervisor.log); "
        "return once the cluster is up (DATA_DIR/cluster.ready exists while it serves)",
    )
    up.add_argument(
        "--no-restart",
        action="store_true",
        help="leave a process that exits down instead of restarting it (fault drills)",
    )
    up.add_argument(
        "--max-restarts",
        type=int,
        default=5,
        help="consecutive crashes after which a process is left down (default: %(default)s)",
    )
    up.set_defaults(handler=cluster_up)


def _add_control_parsers(actions: Any) -> None:
    """``down``, ``status``, ``stop|start|restart|kill NODE`` and ``logs NODE``."""
    down = actions.add_parser("down", help="stop a running local cluster (as Ctrl-C does)")
    _add_data_dir(down, "the data directory given to `up`")
    down.set_defaults(handler=cluster_down)

    status = actions.add_parser(
        "status", help="processes (state, pid, restarts, uptime), controller, partition health"
    )
    _add_data_dir(status, "the data directory given to `up`")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(handler=cluster_status)

    for op, text in (
        ("stop", "stop one process (SIGTERM) and keep it down"),
        ("start", "start a stopped, exited or failed process"),
        ("restart", "stop one process and start it again"),
        ("kill", "SIGKILL one process (a drill: it restarts unless `up --no-restart`)"),
    ):
        parser = actions.add_parser(op, help=text)
        parser.add_argument("node", metavar="NODE", help="process name, e.g. storage-2, gateway")
        _add_data_dir(parser, "the data directory given to `up`")
        parser.add_argument(
            "--timeout",
            type=float,
            default=90.0,
            help="seconds to wait for the result (default: %(default)s)",
        )
        parser.set_defaults(handler=cluster_command, op=op)

    logs = actions.add_parser("logs", help="show a process's log (`supervisor` for its own)")
    logs.add_argument("node", metavar="NODE", help="process name, e.g. storage-2, gateway")
    _add_data_dir(logs, "the data directory given to `up`")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument(
        "-n", "--tail", type=int, default=100, help="last lines to show first (default: 100)"
    )
    logs.set_defaults(handler=cluster_logs)


def _spec(args: argparse.Namespace, local: ModuleType) -> Any:
    for option in ("etcd_client_port", "etcd_peer_port", "base_port"):
        port = getattr(args, option)
        if not 1 <= port <= 65535:
            raise RuntimeError(f"--{option.replace('_', '-')} {port} is not a TCP port (1-65535)")
    if args.kafka_port is not None and not 1 <= args.kafka_port <= 65535:
        raise RuntimeError(f"--kafka-port {args.kafka_port} is not a TCP port (1-65535)")
    if not 0 <= args.console_port <= 65535:
        raise RuntimeError(f"--console-port {args.console_port} is not a port (0: no console)")
    if not 0 <= args.registry_port <= 65535:
        raise RuntimeError(f"--registry-port {args.registry_port} is not a port (0: no registry)")
    if not 1 <= args.storage_nodes <= 100:
        raise RuntimeError(f"--storage-nodes {args.storage_nodes} must be between 1 and 100")
    if not 1 <= args.controllers <= 9:
        raise RuntimeError(f"--controllers {args.controllers} must be between 1 and 9")
    if not 0 <= args.coordinators <= 9:
        raise RuntimeError(f"--coordinators {args.coordinators} must be between 0 and 9")
    if not 0 <= args.max_restarts <= 1000:
        raise RuntimeError(f"--max-restarts {args.max_restarts} must be between 0 and 1000")
    if args.ready_timeout <= 0:
        raise RuntimeError(f"--ready-timeout {args.ready_timeout} must be positive")
    topics = tuple(t for t in args.topics.split(",") if t)
    for topic in topics:
        try:
            local.parse_topic_spec(topic)
        except ValueError as exc:
            raise RuntimeError(f"--topics: {exc}") from None
    return local.LocalClusterSpec(
        data_dir=args.data_dir.resolve(),
        host=args.host,
        etcd_client_port=args.etcd_client_port,
        etcd_peer_port=args.etcd_peer_port,
        storage_nodes=args.storage_nodes,
        base_port=args.base_port,
        controllers=args.controllers,
        coordinators=args.coordinators,
        topics=topics,
        console_port=args.console_port or None,
        registry_port=args.registry_port or None,
        kafka_port=args.kafka_port,
        secure=args.secure,
    )


def _say(line: str) -> None:
    print(line, flush=True)


def cluster_up(args: argparse.Namespace) -> int:
    from strom_server.local import cluster as local
    from strom_server.local import restart_policy

    spec = _spec(args, local)
    policy = restart_policy.RestartPolicy(
        enabled=not args.no_restart, max_restarts=args.max_restarts
    )
    print(f"Starting the Strom cluster in {spec.data_dir} ...", flush=True)
    if args.detach:
        from strom_server.local import cluster_control as control

        state = control.start_detached(
            spec, ready_timeout_s=args.ready_timeout, policy=policy, progress=_say
        )
        print(
            f"Supervisor pid {state['supervisor_pid']}; its output: "
            f"{control.log_path(spec.data_dir, control.SUPERVISOR_LOG)}"
        )
        return 0
    return int(
        local.run_cluster(spec, ready_timeout_s=args.ready_timeout, announce=_say, policy=policy)
    )


def cluster_down(args: argparse.Namespace) -> int:
    from strom_server.local import cluster_control as control

    data_dir = args.data_dir.resolve()
    started = time.monotonic()
    control.stop_cluster(data_dir, progress=_say)
    print(f"Stopped the cluster in {data_dir} ({time.monotonic() - started:.1f} s).")
    return 0


def cluster_status(args: argparse.Namespace) -> int:
    from strom_server.local import cluster_state as state_module

    data_dir = args.data_dir.resolve()
    state = state_module.read_state(data_dir)
    if state is not None and not state_module.supervisor_alive(state):
        state["status"] = "supervisor gone"
    alive = sorted(state_module.running_processes(data_dir))
    document = status_document(state, alive)
    if args.json:
        print(json.dumps(document, indent=2))
    elif state is None:
        print(f"No cluster is running from {data_dir}.")
    else:
        print_status(data_dir, document)
    processes = (state or {}).get("processes", {})
    return 0 if state and processes and len(alive) == len(processes) else 1


def cluster_command(args: argparse.Namespace) -> int:
    from strom_server.local import cluster_control as control
    from strom_server.local import cluster_state

    data_dir = args.data_dir.resolve()
    before = cluster_state.read_state(data_dir) or {}
    restarts = before.get("processes", {}).get(args.node, {}).get("restarts", 0)
    try:
        message = control.command(data_dir, args.op, args.node)
    except ValueError as exc:
        raise RuntimeError(str(exc)) from None
    print(message, flush=True)
    if args.op == "kill":
        # Done once the supervisor has seen the exit (it then restarts the process or not).
        info = control.wait_for_state(
            data_dir,
            args.node,
            lambda i: i.get("state") != "up" or i.get("restarts", 0) > restarts,
            timeout_s=args.timeout,
            what="noticed as exited",
        )
    else:
        wanted = _DOWN if args.op == "stop" else _UP
        info = control.wait_for_state(
            data_dir,
            args.node,
            control.in_states(wanted),
            timeout_s=args.timeout,
            what=" or ".join(wanted),
            progress=_say,
        )
    print(
        f"{args.node}: {info.get('state')}" + (f" (pid {info['pid']})" if info.get("pid") else "")
    )
    return 0


def cluster_logs(args: argparse.Namespace) -> int:
    from strom_server.local import cluster_control as control

    path = control.log_path(args.data_dir.resolve(), args.node)
    if not path.exists():
        names = sorted(p.stem for p in path.parent.glob("*.log"))
        raise RuntimeError(
            f"no log for {args.node!r} in {path.parent}"
            + (f" (logs: {', '.join(names)})" if names else "")
        )
    if args.tail < 0:
        raise RuntimeError(f"--tail {args.tail} must be >= 0")
    with open(path, "rb") as log_file:
        _print_last_lines(log_file, args.tail)
        while args.follow:
            chunk = log_file.read()
            if chunk:
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
            else:
                time.sleep(0.2)
    return 0


def _print_last_lines(log_file: Any, count: int) -> None:
    """Print the last ``count`` lines, reading back from the end (logs can be large)."""
    log_file.seek(0, 2)
    end = position = log_file.tell()
    data = b""
    while position > 0 and data.count(b"\n") <= count:
        step = min(64 * 1024, position)
        position -= step
        log_file.seek(position)
        data = log_file.read(step) + data
    lines = data.splitlines(keepends=True)[-count:] if count else []
    sys.stdout.write(b"".join(lines).decode(errors="replace"))
    sys.stdout.flush()
    log_file.seek(end)
