"""``strom cluster status``: the supervisor's view of its processes plus the cluster's own.

The process table comes from the state file the supervisor keeps; the active controller,
leaders per storage node and partition health come from the cluster itself, through the
gateway, as any client sees them (so status also says when the gateway does not answer).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from strom.admin import Admin
from strom.errors import StromError
from strom.types import TopicDescription

__all__ = ["partition_health", "print_status", "status_document"]

#: How long status waits for the gateway before saying it does not answer.
METADATA_TIMEOUT_MS = 3000
#: Partitions listed by name in the text output, per kind of trouble.
LISTED = 10


def partition_health(topics: list[TopicDescription]) -> dict[str, Any]:
    """Leaders per storage node, under-replicated and offline partitions of ``topics``."""
    leaders: Counter[int] = Counter()
    under_replicated, offline = [], []
    for topic in topics:
        for p in topic.partitions:
            name = f"{topic.name}-{p.partition}"
            if p.leader < 0:
                offline.append(name)
            else:
                leaders[p.leader] += 1
            if len(p.isr) < len(p.replicas):
                under_replicated.append(name)
    return {
        "topics": len(topics),
        "partitions": sum(len(t.partitions) for t in topics),
        "leaders_per_node": {str(node): n for node, n in sorted(leaders.items())},
        "under_replicated": under_replicated,
        "offline": offline,
    }


def _metadata(gateway: str) -> dict[str, Any]:
    try:
        with Admin(gateway, request_timeout_ms=METADATA_TIMEOUT_MS) as admin:
            cluster = admin.describe_cluster()
            topics = admin.describe_topics()
    except StromError as exc:
        return {"error": f"metadata through the gateway {gateway} failed: {exc}"}
    controller = cluster.controller
    return {
        "active_controller": (
            {"id": controller.node_id, "address": controller.address} if controller else None
        ),
        "storage_nodes": [
            {"id": b.node_id, "address": b.address, "rack": b.rack} for b in cluster.brokers
        ],
        **partition_health(topics),
    }


def status_document(state: dict[str, Any] | None, alive: list[str]) -> dict[str, Any]:
    """What ``status --json`` prints: the state file, the live processes, the metadata."""
    document: dict[str, Any] = {"state": state, "alive": alive}
    gateway = (state or {}).get("gateway")
    if gateway and state and state.get("status") == "up":
        document["metadata"] = _metadata(gateway)
    return document


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _shown_state(info: dict[str, Any], running: bool) -> str:
    state = str(info.get("state", "?"))
    if state == "up":
        return "running" if running else "NOT RUNNING"
    return state.upper() if state in ("failed", "exited") else state


def print_status(data_dir: Path, document: dict[str, Any]) -> None:
    state: dict[str, Any] = document["state"]
    restarts = "on" if state.get("restart", True) else "off (--no-restart)"
    print(
        f"Cluster in {data_dir} ({state.get('status', '?')}; supervisor pid "
        f"{state.get('supervisor_pid')}, restarts {restarts}; etcd: "
        f"{', '.join(state.get('etcd_endpoints', []))}):"
    )
    print(
        f"  {'NAME':<14}{'ROLE':<12}{'ID':<4}{'STATE':<12}{'PID':<9}{'ADDRESS':<24}"
        f"{'RESTARTS':<10}UPTIME"
    )
    now = time.time()
    for name, info in state.get("processes", {}).items():
        up_since = info.get("up_since")
        uptime = _duration(now - up_since) if isinstance(up_since, (int, float)) else "-"
        node_id = info.get("id")
        line = (
            f"  {name:<14}{info.get('role', ''):<12}{'-' if node_id is None else node_id!s:<4}"
            f"{_shown_state(info, name in document['alive']):<12}{info.get('pid') or '-'!s:<9}"
            f"{info.get('address', ''):<24}{info.get('restarts', 0)!s:<10}{uptime}"
        )
        if info.get("last_exit") and info.get("state") != "up":
            line += f"  (last exit: {info['last_exit']})"
        print(line)
    metadata = document.get("metadata")
    if metadata is None:
        return
    if "error" in metadata:
        print(metadata["error"])
        return
    active = metadata["active_controller"]
    print(
        f"Active controller: {active['id']} at {active['address']}"
        if active
        else "Active controller: none"
    )
    nodes = metadata["storage_nodes"]
    print(
        "Registered storage nodes: "
        + (", ".join(f"{n['id']} ({n['address']}, {n['rack']})" for n in nodes) or "none")
    )
    leaders = metadata["leaders_per_node"]
    print(
        "Leaders per storage node: "
        + (", ".join(f"{node}: {count}" for node, count in leaders.items()) or "none")
    )
    print(
        f"Partitions: {metadata['partitions']} in {metadata['topics']} topics; "
        f"under-replicated: {_listed(metadata['under_replicated'])}; "
        f"offline: {_listed(metadata['offline'])}"
    )


def _listed(names: list[str]) -> str:
    if not names:
        return "0"
    more = f", +{len(names) - LISTED} more" if len(names) > LISTED else ""
    return f"{len(names)} ({', '.join(names[:LISTED])}{more})"
