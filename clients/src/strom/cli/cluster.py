"""``strom cluster up|status``: the embedded local cluster (needs the server packages)."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from strom.admin import Admin
from strom.errors import StromError

DEFAULT_DATA_DIR = Path(".strom")


def _server_module(name: str) -> ModuleType:
    # Imported by name so that the client distribution never depends on server code.
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            "`strom cluster` needs the server packages: pip install 'strom[server]' "
            "(or run `make up` in a Strom checkout)"
        ) from exc


def add_parser(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="run a local cluster (etcd and services)")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)

    up = actions.add_parser("up", help="start the local cluster in the foreground; Ctrl-C stops it")
    up.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="where every process keeps its data and logs (default: %(default)s)",
    )
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
    up.set_defaults(handler=cluster_up)

    status = actions.add_parser("status", help="show what a running local cluster consists of")
    status.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="the data directory given to `up` (default: %(default)s)",
    )
    status.add_argument("--json", action="store_true", help="print the state as JSON")
    status.set_defaults(handler=cluster_status)


def cluster_up(args: argparse.Namespace) -> int:
    local = _server_module("strom_server.local_cluster")
    for option in ("etcd_client_port", "etcd_peer_port", "base_port"):
        port = getattr(args, option)
        if not 1 <= port <= 65535:
            raise RuntimeError(f"--{option.replace('_', '-')} {port} is not a TCP port (1-65535)")
    if not 1 <= args.storage_nodes <= 100:
        raise RuntimeError(f"--storage-nodes {args.storage_nodes} must be between 1 and 100")
    if not 1 <= args.controllers <= 9:
        raise RuntimeError(f"--controllers {args.controllers} must be between 1 and 9")
    if not 0 <= args.coordinators <= 9:
        raise RuntimeError(f"--coordinators {args.coordinators} must be between 0 and 9")
    topics = tuple(t for t in args.topics.split(",") if t)
    for topic in topics:
        try:
            local.parse_topic_spec(topic)
        except ValueError as exc:
            raise RuntimeError(f"--topics: {exc}") from None
    spec = local.LocalClusterSpec(
        data_dir=args.data_dir.resolve(),
        host=args.host,
        etcd_client_port=args.etcd_client_port,
        etcd_peer_port=args.etcd_peer_port,
        storage_nodes=args.storage_nodes,
        base_port=args.base_port,
        controllers=args.controllers,
        coordinators=args.coordinators,
        topics=topics,
    )
    print(f"Starting the Strom cluster in {spec.data_dir} ...", flush=True)
    return int(
        local.run_cluster(
            spec, ready_timeout_s=args.ready_timeout, announce=lambda line: print(line, flush=True)
        )
    )


def cluster_status(args: argparse.Namespace) -> int:
    local = _server_module("strom_server.local_cluster")
    data_dir = args.data_dir.resolve()
    state = local.read_state(data_dir)
    alive = local.running_processes(data_dir)
    if args.json:
        print(json.dumps({"state": state, "alive": sorted(alive)}, indent=2))
        return 0 if state and alive else 1
    if not state:
        print(f"No cluster is running from {data_dir}.")
        return 1
    print(f"Cluster in {data_dir} (etcd: {', '.join(state.get('etcd_endpoints', []))}):")
    for name, info in state.get("processes", {}).items():
        mark = "running" if name in alive else "NOT RUNNING"
        print(f"  {name:<12} {mark:<12} pid {info['pid']:<8} {info['address']}")
    gateway = state.get("gateway")
    if gateway:
        try:
            with Admin(gateway, request_timeout_ms=3000) as admin:
                cluster = admin.describe_cluster()
        except StromError as exc:
            print(f"Metadata through the gateway failed: {exc}")
        else:
            active = cluster.controller
            print(
                f"Active controller: {active.node_id} at {active.address}"
                if active
                else "Active controller: none"
            )
            print(
                "Registered storage nodes: "
                + ", ".join(f"{b.node_id} ({b.address}, {b.rack})" for b in cluster.brokers)
            )
    return 0 if len(alive) == len(state.get("processes", {})) else 1
