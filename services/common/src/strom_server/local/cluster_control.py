"""What other terminals do to a local cluster: start it detached, command it, take it down.

``strom cluster up --detach`` runs the supervisor (``python -m strom_server.local.cluster``)
in its own session with its output in ``<data_dir>/logs/supervisor.log`` and returns once the
cluster is up. ``strom cluster stop|start|restart|kill NODE`` send one request to the
supervisor's control socket and wait for the state file to show the result.
``strom cluster down`` asks the supervisor to stop everything (SIGTERM, as Ctrl-C does); when
the supervisor itself is gone it stops the processes the state file names.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import asdict
from pathlib import Path
from typing import Any

from strom_server.local.cluster import STOP_GRACE_S, LocalClusterSpec, check_startable, spec_to_json
from strom_server.local.cluster_state import (
    live_processes,
    pid_alive,
    read_state,
    remove_state,
    supervisor_alive,
)
from strom_server.local.control_socket import send_request
from strom_server.local.restart_policy import RestartPolicy
from strom_server.local.supervisor import ProcessFailedError

__all__ = [
    "ClusterNotRunningError",
    "command",
    "log_path",
    "start_detached",
    "stop_cluster",
    "wait_for_state",
]

SUPERVISOR_LOG = "supervisor"
Progress = Callable[[str], object]


class ClusterNotRunningError(RuntimeError):
    """No supervisor of a local cluster runs from the data directory."""


def log_path(data_dir: Path, name: str) -> Path:
    """The log file of process ``name`` (``supervisor`` for the detached supervisor's own)."""
    return data_dir / "logs" / f"{name}.log"


def _running_state(data_dir: Path) -> dict[str, Any]:
    state = read_state(data_dir)
    if state is None or not supervisor_alive(state):
        raise ClusterNotRunningError(
            f"no cluster is running from {data_dir} (start one with `strom cluster up`)"
        )
    return state


def start_detached(
    spec: LocalClusterSpec,
    *,
    ready_timeout_s: float,
    policy: RestartPolicy,
    progress: Progress,
) -> dict[str, Any]:
    """Run the supervisor in the background; return the state file once the cluster is up.

    Raises ProcessFailedError (with the end of the supervisor's log) when it does not come up.
    """
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    check_startable(spec)
    run_file = spec.data_dir / "supervisor-run.json"
    run_file.write_text(
        json.dumps(
            {
                "spec": spec_to_json(spec),
                "ready_timeout_s": ready_timeout_s,
                "policy": asdict(policy),
                "detached": True,
            }
        )
    )
    output = log_path(spec.data_dir, SUPERVISOR_LOG)
    output.parent.mkdir(parents=True, exist_ok=True)
    shown = output.stat().st_size if output.exists() else 0
    with open(output, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "strom_server.local.cluster", str(run_file)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this terminal
        )
    # Every process gets ready_timeout_s; topics and etcd's first start need a little more.
    deadline = time.monotonic() + ready_timeout_s * len(spec.processes()) + 60
    while True:
        shown = _show_new_lines(output, shown, progress)
        state = read_state(spec.data_dir)
        if state and state.get("status") == "up" and state.get("supervisor_pid") == child.pid:
            _show_new_lines(output, shown, progress)
            return state
        code = child.poll()
        if code is not None:
            raise ProcessFailedError(
                f"the cluster did not start (supervisor exit {code}); see {output}"
            )
        if time.monotonic() > deadline:
            child.send_signal(signal.SIGTERM)
            raise ProcessFailedError(f"the cluster was not up in time; see {output}")
        time.sleep(0.2)


def _show_new_lines(path: Path, offset: int, progress: Progress) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return offset
    complete = data[: data.rfind(b"\n") + 1]
    for line in complete.decode(errors="replace").splitlines():
        progress(line)
    return offset + len(complete)


def command(data_dir: Path, op: str, name: str) -> str:
    """Send ``op NAME`` to the supervisor; returns its answer. Raises ValueError when the
    supervisor refuses (unknown process, say) and ClusterNotRunningError without one."""
    state = _running_state(data_dir)
    try:
        reply = send_request(Path(state["control_socket"]), {"op": op, "name": name})
    except ConnectionError as exc:
        raise ClusterNotRunningError(str(exc)) from None
    if not reply.get("ok"):
        raise ValueError(str(reply.get("error", "refused")))
    return str(reply.get("message", ""))


def wait_for_state(
    data_dir: Path,
    name: str,
    done: Callable[[dict[str, Any]], bool],
    *,
    timeout_s: float,
    what: str,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Poll the state file until process ``name``'s entry satisfies ``done``; returns it."""
    deadline = time.monotonic() + timeout_s
    last_shown = ""
    while True:
        state = _running_state(data_dir)
        info = state.get("processes", {}).get(name, {})
        if done(info):
            return dict(info)
        shown = str(info.get("state", "?"))
        if progress is not None and shown != last_shown:
            progress(f"  {name}: {shown}")
            last_shown = shown
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not become {what} within {timeout_s:.0f} s ({shown})")
        time.sleep(0.2)


def in_states(states: Collection[str]) -> Callable[[dict[str, Any]], bool]:
    return lambda info: info.get("state") in states


def stop_cluster(data_dir: Path, *, progress: Progress, timeout_s: float | None = None) -> None:
    """Stop the cluster running from ``data_dir`` and wait until every process is gone."""
    state = read_state(data_dir)
    if state is None:
        raise ClusterNotRunningError(f"no cluster is running from {data_dir}")
    if timeout_s is None:  # the supervisor stops one role at a time, each within the grace
        roles = {info.get("role") for info in state.get("processes", {}).values()}
        timeout_s = STOP_GRACE_S * max(1, len(roles)) + 10
    if supervisor_alive(state):
        pid = int(state["supervisor_pid"])
        progress(f"Stopping the cluster in {data_dir} (supervisor pid {pid}) ...")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        next_report = time.monotonic() + 2
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
            if time.monotonic() >= next_report:
                left = sorted(live_processes(state))
                progress(f"  still stopping: {', '.join(left) or 'the supervisor'}")
                next_report += 2
        if pid_alive(pid):
            progress(f"The supervisor did not stop within {timeout_s:.0f} s; killing it")
            os.kill(pid, signal.SIGKILL)
    else:
        progress(f"The supervisor of {data_dir} is gone; stopping the processes it left")
    _stop_orphans(state, progress)
    remove_state(data_dir)


def _stop_orphans(state: dict[str, Any], progress: Progress) -> None:
    """SIGTERM, then SIGKILL after the grace period, whatever the supervisor left running, in
    reverse start order."""
    for name, info in reversed(list(live_processes(state).items())):
        pid = int(info["pid"])
        progress(f"  stopping {name} (pid {pid})")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
