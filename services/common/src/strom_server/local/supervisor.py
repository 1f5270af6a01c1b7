"""Start, watch and stop a set of local processes: the engine of ``strom cluster up``.

Each ``ManagedProcess`` runs in its own process group with output appended to a log file, and
is ready when its readiness probe (a health check) passes. ``Supervisor`` starts processes in
order, waiting for each to be ready before the next (services need etcd first), and stops them
in reverse order: SIGTERM, then SIGKILL after a grace period. Not thread-safe: one thread
drives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

__all__ = ["ManagedProcess", "ProcessFailedError", "Supervisor"]


class ProcessFailedError(RuntimeError):
    """A managed process exited, or did not become ready in time."""


@dataclass
class ManagedProcess:
    """One local process: its command line, environment, log file and readiness probe."""

    name: str
    argv: Sequence[str]
    log_path: Path
    ready: Callable[[], bool]
    env: Mapping[str, str] = field(default_factory=dict)
    #: What to show users once it is ready (an address, typically).
    address: str = ""
    #: What kind of process it is ("storage", "controller", ...) and its id within that kind.
    role: str = ""
    node_id: int | None = None
    popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.popen = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                start_new_session=True,  # Ctrl-C in the terminal reaches the supervisor only
            )

    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen else None

    def is_running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def send_signal(self, signum: int) -> None:
        """Signal the process if it is still running (a no-op once it has exited)."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signum)

    def note_in_log(self, line: str) -> None:
        """Append a line of the supervisor's own to the process's log (restarts, say)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as out:
            out.write(line.rstrip("\n") + "\n")

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.exit_code()
            if code is not None:
                raise ProcessFailedError(
                    f"{self.name} exited with code {code} while starting; last lines of "
                    f"{self.log_path}:\n{self.tail()}"
                )
            if self.ready():
                return
            if time.monotonic() > deadline:
                raise ProcessFailedError(
                    f"{self.name} was not ready within {timeout_s:.0f} s; last lines of "
                    f"{self.log_path}:\n{self.tail()}"
                )
            time.sleep(0.1)

    def stop(self, grace_s: float) -> int | None:
        """SIGTERM, wait up to ``grace_s``, then SIGKILL; returns the exit code."""
        if self.popen is None or self.popen.poll() is not None:
            return self.exit_code()
        self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            log.warning("process did not stop in time; killing", process=self.name)
            self.popen.kill()
            return self.popen.wait()


class Supervisor:
    """Starts processes in order (each ready before the next) and stops them in reverse."""

    def __init__(self, processes: Sequence[ManagedProcess], *, grace_s: float = 10.0) -> None:
        self.processes = list(processes)
        self.grace_s = grace_s

    def start_all(
        self,
        ready_timeout_s: float = 30.0,
        on_ready: Callable[[ManagedProcess], object] | None = None,
    ) -> None:
        """Start every process; on any failure stop those already started and re-raise."""
        try:
            for process in self.processes:
                process.start()
                process.wait_ready(ready_timeout_s)
                if on_ready:
                    on_ready(process)
        except BaseException:
            self.stop_all()
            raise

    def first_exited(self) -> ManagedProcess | None:
        """A process that has exited, if any."""
        return next((p for p in self.processes if p.exit_code() is not None), None)

    def stop_all(self) -> dict[str, int | None]:
        return {p.name: p.stop(self.grace_s) for p in reversed(self.processes)}
