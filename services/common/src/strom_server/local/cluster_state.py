"""The state file of a running local cluster: ``<data_dir>/cluster.json``.

The supervisor of ``strom cluster up`` rewrites it (atomically) whenever a process changes
state; ``strom cluster status|stop|down|...`` in another terminal read it to find the
supervisor, its control socket and every process. Example::

    {"status": "up", "supervisor_pid": 4242, "supervisor_started": 81234567,
     "control_socket": ".strom/supervisor.sock", "restart": true,
     "gateway": "127.0.0.1:9092", "etcd_endpoints": ["http://127.0.0.1:2379"],
     "processes": {"storage-1": {"role": "storage", "id": 1, "pid": 4300, "state": "up",
                                 "restarts": 0, "up_since": 1764000000.0, ...}, ...}}

Beside it, ``<data_dir>/cluster.ready`` (``READY_FILE``) exists while the cluster serves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "READY_FILE",
    "STATE_FILE",
    "clear_ready",
    "live_processes",
    "mark_ready",
    "pid_alive",
    "process_start_ticks",
    "read_state",
    "remove_state",
    "running_processes",
    "supervisor_alive",
    "write_state",
]

STATE_FILE = "cluster.json"
#: Exists while the cluster started by ``up`` serves: written once every process is ready,
#: the topics are created and the client settings files are written; removed when the stop
#: begins. What a script waits for (``admin.properties`` exists before the services start).
READY_FILE = "cluster.ready"


def read_state(data_dir: Path) -> dict[str, Any] | None:
    """The state file of a running cluster, or None when none is recorded."""
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def write_state(data_dir: Path, state: dict[str, Any]) -> None:
    tmp = data_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(data_dir / STATE_FILE)


def remove_state(data_dir: Path) -> None:
    clear_ready(data_dir)
    (data_dir / STATE_FILE).unlink(missing_ok=True)


def mark_ready(data_dir: Path, settings: dict[str, str]) -> Path:
    """Write ``READY_FILE`` (atomically: it appears complete) with ``key=value`` lines."""
    path = data_dir / READY_FILE
    tmp = data_dir / (READY_FILE + ".tmp")
    tmp.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    tmp.replace(path)
    return path


def clear_ready(data_dir: Path) -> None:
    (data_dir / READY_FILE).unlink(missing_ok=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), to tell it from a
    later process that got the same pid; None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])  # field 22 of stat(5), the 20th after the command name
    except (IndexError, ValueError):
        return None


def _still_running(pid: object, recorded_start: object) -> bool:
    """Whether ``pid`` runs and is the process that was recorded (its start time, when both
    are known, is the recorded one: a later process may have been given the same pid)."""
    if not isinstance(pid, int) or not pid_alive(pid):
        return False
    return recorded_start is None or process_start_ticks(pid) in (None, recorded_start)


def supervisor_alive(state: dict[str, Any]) -> bool:
    """Whether the supervisor that wrote ``state`` is still running."""
    return _still_running(state.get("supervisor_pid"), state.get("supervisor_started"))


def live_processes(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The processes of ``state`` still running (the same processes: start times checked), by
    name, in start order."""
    processes = state.get("processes", {})
    if not isinstance(processes, dict):
        return {}
    return {
        name: info
        for name, info in processes.items()
        if _still_running(info.get("pid"), info.get("pid_started"))
    }


def running_processes(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Processes recorded in the state file of ``data_dir`` that are still alive, by name."""
    return live_processes(read_state(data_dir) or {})
