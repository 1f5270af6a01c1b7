"""ProcessKeeper over real child processes: restarts with backoff, crash loops, operator
commands, --no-restart, and the ordered stop; CrashHistory's arithmetic; the control socket."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strom_server.local.cluster import StopRequests
from strom_server.local.control_socket import ControlServer, send_request, socket_path_for
from strom_server.local.process_keeper import ProcessKeeper, ProcessState
from strom_server.local.restart_policy import CrashHistory, RestartPolicy
from strom_server.local.supervisor import ManagedProcess, Supervisor

# Creates READY_FILE once it handles SIGTERM, then sleeps; on SIGTERM appends its name to
# ORDER_FILE (when given) and exits 0.
SLEEPER = """
import signal, sys, time
def stop(*_):
    if len(sys.argv) > 3:
        with open(sys.argv[3], "a") as f:
            f.write(sys.argv[1] + "\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[2], "w").close()
while True:
    time.sleep(1)
"""
# Ignores SIGTERM (a process slow to stop), creates READY_FILE, sleeps.
STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[2], "w").close()
while True:
    time.sleep(1)
"""
FAST = RestartPolicy(initial_delay_s=0.05, max_delay_s=0.2, healthy_reset_s=60, max_restarts=3)


def _process(
    tmp_path: Path, name: str, role: str, order_file: Path | None = None, *, stubborn: bool = False
) -> ManagedProcess:
    ready_file = tmp_path / f"{name}.ready"
    argv = [sys.executable, "-c", STUBBORN if stubborn else SLEEPER, name, str(ready_file)]
    argv += [str(order_file)] if order_file else []

    def ready() -> bool:  # a restart's readiness is its new file
        if ready_file.exists():
            ready_file.unlink()
            return True
        return False

    return ManagedProcess(
        name=name, argv=argv, log_path=tmp_path / f"{name}.log", ready=ready, role=role
    )


def _run_until(keeper: ProcessKeeper, done: Callable[[], bool], timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, keeper.describe()
        keeper.tick()
        time.sleep(0.02)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Callable[..., ProcessKeeper]]:
    keepers: list[ProcessKeeper] = []

    def start(*processes: ManagedProcess, policy: RestartPolicy = FAST) -> ProcessKeeper:
        Supervisor(processes).start_all()
        lines: list[str] = []
        keeper = ProcessKeeper(processes, policy, grace_s=5, announce=lines.append)
        keeper.announced = lines  # type: ignore[attr-defined]
        keepers.append(keeper)
        return keeper

    yield start
    for keeper in keepers:
        keeper.stop_all()


def test_a_killed_process_is_restarted_while_the_others_keep_running(
    tmp_path: Path, started: Callable[..., ProcessKeeper]
) -> None:
    keeper = started(_process(tmp_path, "a", "x"), _process(tmp_path, "b", "y"))
    a, b = keeper.kept["a"], keeper.kept["b"]
    b_pid = b.process.pid
    assert keeper.command("kill", "a").startswith("sent SIGKILL to a")
    _run_until(keeper, lambda: a.state == ProcessState.RESTARTING)
    assert a.last_exit == "killed by signal 9"
    _run_until(keeper, lambda: a.state == ProcessState.UP)
    assert a.restarts == 1 and keeper.describe()["a"]["restarts"] == 1
    assert b.state == ProcessState.UP and b.process.pid == b_pid and b.restarts == 0
    assert "--- strom cluster: starting a again (restart 1)" in a.process.log_path.read_text()
    assert any("a exited (killed by signal 9); restarting in " in line
               for line in keeper.announced)  # type: ignore[attr-defined]  # fmt: skip


def test_a_crash_looping_process_is_left_down_and_reported(
    tmp_path: Path, started: Callable[..., ProcessKeeper]
) -> None:
    process = _process(tmp_path, "a", "x")
    keeper = started(process)
    process.argv = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]
    keeper.command("kill", "a")
    kept = keeper.kept["a"]
    _run_until(keeper, lambda: kept.state == ProcessState.FAILED)
    assert kept.restarts == FAST.max_restarts  # tried max_restarts times, then gave up
    assert kept.last_exit == "exit 3"
    (loud,) = [line for line in keeper.announced if line.startswith("!!!")]  # type: ignore[attr-defined]
    assert "a exited (exit 3) 4 times in a row; leaving it DOWN" in loud and "boom" in loud
    # An operator start tries again with a fresh count.
    process.argv = _process(tmp_path, "a", "x").argv
    keeper.command("start", "a")
    _run_until(keeper, lambda: kept.state == ProcessState.UP)


def test_no_restart_keeps_an_exited_process_down(
    tmp_path: Path, started: Callable[..., ProcessKeeper]
) -> None:
    keeper = started(_process(tmp_path, "a", "x"), policy=RestartPolicy(enabled=False))
    keeper.command("kill", "a")
    kept = keeper.kept["a"]
    _run_until(keeper, lambda: kept.state == ProcessState.EXITED)
    for _ in range(10):
        keeper.tick()
        time.sleep(0.02)
    assert kept.state == ProcessState.EXITED and kept.restarts == 0
    assert keeper.describe()["a"]["pid"] is None


def test_operator_stop_start_and_restart(
    tmp_path: Path, started: Callable[..., ProcessKeeper]
) -> None:
    keeper = started(_process(tmp_path, "a", "x"))
    kept = keeper.kept["a"]
    assert keeper.command("stop", "a") == "stopping a"
    _run_until(keeper, lambda: kept.state == ProcessState.STOPPED)
    assert kept.last_exit == "stopped"
    with pytest.raises(ValueError, match="a is not running"):
        keeper.command("kill", "a")
    keeper.command("start", "a")
    _run_until(keeper, lambda: kept.state == ProcessState.UP)
    with pytest.raises(ValueError, match="already up"):
        keeper.command("start", "a")
    pid = kept.process.pid
    keeper.command("restart", "a")
    assert kept.state == ProcessState.STOPPING  # the command itself changes the state
    _run_until(keeper, lambda: kept.state == ProcessState.UP)
    assert kept.process.pid != pid and kept.restarts == 2
    with pytest.raises(ValueError, match="no process named 'b'"):
        keeper.command("stop", "b")
    with pytest.raises(ValueError, match="unknown command 'pause'"):
        keeper.command("pause", "a")


def test_stop_all_stops_roles_in_reverse_start_order(
    tmp_path: Path, started: Callable[..., ProcessKeeper]
) -> None:
    order = tmp_path / "order"
    keeper = started(
        _process(tmp_path, "etcd", "etcd", order),
        _process(tmp_path, "storage-1", "storage", order),
        _process(tmp_path, "storage-2", "storage", order),
        _process(tmp_path, "gateway", "gateway", order),
    )
    ended = keeper.stop_all()
    assert ended == {"gateway": "stopped", "storage-2": "stopped", "storage-1": "stopped",
                     "etcd": "stopped"}  # fmt: skip
    stopped = order.read_text().split()
    assert stopped[0] == "gateway" and stopped[-1] == "etcd"
    assert set(stopped[1:3]) == {"storage-1", "storage-2"}


def test_a_second_stop_signal_kills_what_is_left_at_once(
    tmp_path: Path, started: Callable[..., ProcessKeeper]
) -> None:
    """`strom cluster up`'s handler: the first Ctrl-C asks for the orderly stop; a second one
    during it kills the processes that ignore SIGTERM at once instead of after their grace
    period (5 s per role here: 10 s)."""
    keeper = started(
        _process(tmp_path, "etcd", "etcd", stubborn=True),
        _process(tmp_path, "gateway", "gateway", stubborn=True),
    )
    stops = StopRequests()
    stops.keeper = keeper
    previous = signal.signal(signal.SIGINT, stops)
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C: an orderly stop
        assert stops.requested and not keeper.forced
        second = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        second.start()
        began = time.monotonic()
        ended = keeper.stop_all()
        took = time.monotonic() - began
        second.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert keeper.forced
    assert took < 3, f"the stop took {took:.1f} s after the second signal"
    assert ended == {"gateway": "killed by signal 9", "etcd": "killed by signal 9"}


def test_crash_history_backoff_cap_and_healthy_reset() -> None:
    history = CrashHistory(RestartPolicy(max_restarts=10))
    delays = [history.on_exit(healthy_for_s=1.0) for _ in range(8)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert history.on_exit(healthy_for_s=61.0) == 0.5  # a healthy minute forgives
    limited = CrashHistory(RestartPolicy(max_restarts=2))
    assert [limited.on_exit(0), limited.on_exit(0), limited.on_exit(0)] == [0.5, 1.0, None]
    assert CrashHistory(RestartPolicy(enabled=False)).on_exit(0) is None
    with pytest.raises(ValueError, match="restart delays"):
        RestartPolicy(initial_delay_s=5, max_delay_s=1)


def test_control_socket_round_trip_and_malformed_requests(tmp_path: Path) -> None:
    path = socket_path_for(tmp_path)
    server = ControlServer(path, lambda request: {"ok": True, "echo": request})
    try:
        import threading

        replies: list[dict[str, object]] = []
        client = threading.Thread(
            target=lambda: replies.append(send_request(path, {"op": "stop", "name": "x"}))
        )
        client.start()
        deadline = time.monotonic() + 10
        while client.is_alive() and time.monotonic() < deadline:
            server.serve(0.1)
        client.join()
        assert replies == [{"ok": True, "echo": {"op": "stop", "name": "x"}}]
        assert path.stat().st_mode & 0o077 == 0  # only the owner may command the cluster
    finally:
        server.close()
    assert not path.exists()
    with pytest.raises(ConnectionError, match="no supervisor answers"):
        send_request(path, {"op": "stop", "name": "x"})


def test_control_socket_path_falls_back_when_the_data_dir_is_deep(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    path = socket_path_for(deep)
    assert len(str(path)) <= 107 and path.name.startswith("strom-")
    assert socket_path_for(deep) == path  # stable for the same directory
