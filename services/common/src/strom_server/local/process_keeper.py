"""Keeps a started set of local processes running: restarts, operator commands, ordered stop.

``ProcessKeeper`` takes over processes that ``Supervisor.start_all`` started (in dependency
order, each ready before the next) and from then on is driven by ``tick()`` from one loop:

- a process that exits on its own is restarted after the ``RestartPolicy``'s backoff while the
  others keep serving; one that crash-loops is left down and reported loudly; with the policy
  disabled (``--no-restart``) an exited process stays down;
- operator commands (``stop``, ``start``, ``restart``, ``kill``) change one process's target
  without blocking the loop: a stop sends SIGTERM and escalates to SIGKILL after the grace
  period on a later tick; ``kill`` is SIGKILL, after which the restart policy applies as for
  any crash (the drill: kill a node, watch it come back);
- ``stop_all()`` stops everything in reverse start order, one role at a time (coordinators,
  gateway, storage nodes, controllers, etcd), the processes of a role together, so the whole
  stop is bounded by the number of roles times the grace period; ``force_stop()`` (a second
  Ctrl-C) makes it kill whatever is still running at once.

States a process goes through::

    starting ──ready──▶ up ──exits──▶ restarting ──delay──▶ starting
        │                │                └──(crash loop)──▶ failed
        └─exits──────────┴──(--no-restart)──▶ exited
    any running state ──stop──▶ stopping ──exits──▶ stopped (kept down)

Not thread-safe: one thread calls ``tick``, ``command`` and ``stop_all``.
"""

from __future__ import annotations

import enum
import itertools
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from strom_server.local.restart_policy import CrashHistory, RestartPolicy
from strom_server.local.supervisor import ManagedProcess

log = structlog.get_logger(__name__)

__all__ = ["COMMANDS", "KeptProcess", "ProcessKeeper", "ProcessState", "describe_exit"]

#: Operator commands ``ProcessKeeper.command`` understands.
COMMANDS = ("stop", "start", "restart", "kill")


class ProcessState(enum.StrEnum):
    STARTING = "starting"
    UP = "up"
    RESTARTING = "restarting"
    STOPPING = "stopping"
    STOPPED = "stopped"
    EXITED = "exited"
    FAILED = "failed"


RUNNING_STATES = frozenset({ProcessState.STARTING, ProcessState.UP, ProcessState.STOPPING})
DOWN_STATES = frozenset({ProcessState.STOPPED, ProcessState.EXITED, ProcessState.FAILED})


def describe_exit(code: int | None) -> str:
    """An exit status as people say it: "stopped", "exit 3", "killed by signal 9"."""
    if code in (0, -signal.SIGTERM):
        return "stopped"
    if code is None:
        return "still running"
    return f"exit {code}" if code >= 0 else f"killed by signal {-code}"


@dataclass
class KeptProcess:
    """One process and what the keeper knows of it."""

    process: ManagedProcess
    history: CrashHistory
    state: ProcessState = ProcessState.STARTING
    #: Times started, the first included; restarts = starts - 1.
    starts: int = 0
    #: Monotonic times: when it became ready, when the pending restart / stop deadline is due.
    ready_at: float | None = None
    start_deadline: float = 0.0
    restart_at: float = 0.0
    stop_deadline: float = 0.0
    #: Start again once the pending stop completes (``restart``).
    then_start: bool = False
    #: Wall-clock time it became ready (uptime in ``status``), and how it last exited.
    up_since: float | None = None
    last_exit: str = ""

    @property
    def name(self) -> str:
        return self.process.name

    @property
    def restarts(self) -> int:
        return max(0, self.starts - 1)

    def describe(self) -> dict[str, Any]:
        """What ``strom cluster status`` shows of it (JSON-ready)."""
        p = self.process
        return {
            "role": p.role,
            "id": p.node_id,
            "pid": p.pid if self.state in RUNNING_STATES else None,
            "address": p.address,
            "log": str(p.log_path),
            "state": str(self.state),
            "restarts": self.restarts,
            "up_since": self.up_since if self.state == ProcessState.UP else None,
            "last_exit": self.last_exit,
        }


@dataclass
class ProcessKeeper:
    """Keeps ``processes`` (already started and ready, in start order) running."""

    processes: Sequence[ManagedProcess]
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    ready_timeout_s: float = 60.0
    grace_s: float = 30.0
    announce: Callable[[str], object] = print
    clock: Callable[[], float] = time.monotonic
    kept: dict[str, KeptProcess] = field(init=False)
    #: Set by ``force_stop``: ``stop_all`` kills what is left instead of waiting.
    forced: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        now = self.clock()
        self.kept = {
            p.name: KeptProcess(
                p,
                CrashHistory(self.policy),
                ProcessState.UP,
                starts=1,
                ready_at=now,
                up_since=time.time(),
            )
            for p in self.processes
        }

    # -- the loop ------------------------------------------------------------------------------

    def tick(self) -> bool:
        """Advance every process's state; True when some state changed (to persist it)."""
        changed = False
        for kept in self.kept.values():
            before = (kept.state, kept.starts)
            self._advance(kept, self.clock())
            changed |= before != (kept.state, kept.starts)
        return changed

    def _advance(self, kept: KeptProcess, now: float) -> None:
        process = kept.process
        code = process.exit_code()
        if kept.state == ProcessState.STOPPING:
            if code is not None:
                kept.last_exit = describe_exit(code)
                if kept.then_start:
                    self._start(kept, now)
                else:
                    self._set(kept, ProcessState.STOPPED)
                    self.announce(f"{kept.name} stopped ({kept.last_exit}); kept down")
            elif now >= kept.stop_deadline:
                log.warning("process did not stop in time; killing", process=kept.name)
                process.send_signal(signal.SIGKILL)
        elif kept.state in (ProcessState.STARTING, ProcessState.UP) and code is not None:
            self._on_unexpected_exit(kept, code, now)
        elif kept.state == ProcessState.STARTING:
            if process.ready():
                kept.ready_at, kept.up_since = now, time.time()
                self._set(kept, ProcessState.UP)
                self.announce(f"{kept.name} is up again (pid {process.pid}, {process.address})")
            elif now >= kept.start_deadline:
                self.announce(
                    f"{kept.name} was not ready within {self.ready_timeout_s:.0f} s; killing it"
                )
                process.send_signal(signal.SIGKILL)
        elif kept.state == ProcessState.RESTARTING and now >= kept.restart_at:
            self._start(kept, now)

    def _on_unexpected_exit(self, kept: KeptProcess, code: int, now: float) -> None:
        kept.last_exit = describe_exit(code)
        healthy_for = 0.0
        if kept.state == ProcessState.UP and kept.ready_at is not None:
            healthy_for = now - kept.ready_at
        delay = kept.history.on_exit(healthy_for)
        if not self.policy.enabled:
            self._set(kept, ProcessState.EXITED)
            self.announce(f"{kept.name} exited ({kept.last_exit}); --no-restart keeps it down")
        elif delay is None:
            self._set(kept, ProcessState.FAILED)
            self.announce(
                f"!!! {kept.name} exited ({kept.last_exit}) {kept.history.consecutive} times in "
                f"a row; leaving it DOWN (`strom cluster start {kept.name}` tries again). "
                f"Last lines of {kept.process.log_path}:\n{kept.process.tail()}"
            )
            log.error("process crash-looped; left down", process=kept.name, exit=kept.last_exit)
        else:
            kept.restart_at = now + delay
            self._set(kept, ProcessState.RESTARTING)
            self.announce(
                f"{kept.name} exited ({kept.last_exit}); restarting in {delay:.1f} s "
                f"(attempt {kept.history.consecutive} of {self.policy.max_restarts})"
            )

    def _start(self, kept: KeptProcess, now: float) -> None:
        kept.then_start = False
        kept.ready_at = None
        kept.process.note_in_log(
            f"--- strom cluster: starting {kept.name} again (restart {kept.starts}) at "
            f"{time.strftime('%Y-%m-%dT%H:%M:%S')} ---"
        )
        kept.process.start()
        kept.starts += 1
        kept.start_deadline = now + self.ready_timeout_s
        self._set(kept, ProcessState.STARTING)

    @staticmethod
    def _set(kept: KeptProcess, state: ProcessState) -> None:
        kept.state = state
        if state != ProcessState.UP:
            kept.up_since = None

    # -- operator commands ---------------------------------------------------------------------

    def command(self, op: str, name: str) -> str:
        """Apply ``op`` (one of ``COMMANDS``) to the process ``name``; returns what was done.

        Raises ValueError for an unknown command or process, or one the process's state does
        not allow (``start`` of a running process, say).
        """
        if op not in COMMANDS:
            raise ValueError(f"unknown command {op!r}; expected one of {', '.join(COMMANDS)}")
        kept = self.kept.get(name)
        if kept is None:
            raise ValueError(f"no process named {name!r}; processes: {', '.join(self.kept)}")
        now = self.clock()
        if op == "kill":
            if not kept.process.is_running():
                raise ValueError(f"{name} is not running ({kept.state})")
            kept.process.send_signal(signal.SIGKILL)
            return f"sent SIGKILL to {name} (pid {kept.process.pid})"
        if op == "start":
            if kept.state not in DOWN_STATES and kept.state != ProcessState.RESTARTING:
                raise ValueError(f"{name} is already {kept.state}")
            kept.history.reset()
            self._start(kept, now)
            return f"starting {name}"
        # stop / restart
        kept.then_start = op == "restart"
        if kept.process.is_running():
            if kept.state != ProcessState.STOPPING:
                kept.process.send_signal(signal.SIGTERM)
                kept.stop_deadline = now + self.grace_s
                self._set(kept, ProcessState.STOPPING)
            return f"stopping {name}" + (" to start it again" if kept.then_start else "")
        if kept.then_start:
            kept.history.reset()
            self._start(kept, now)
            return f"starting {name}"
        self._set(kept, ProcessState.STOPPED)
        return f"{name} is down; kept down"

    # -- shutdown ------------------------------------------------------------------------------

    def force_stop(self) -> None:
        """Make a ``stop_all`` under way (or the next) kill the processes it has not stopped
        yet at once (a second Ctrl-C). Safe from a signal handler: it only sets a flag."""
        self.forced = True

    def stop_all(self) -> dict[str, str]:
        """Stop every process, roles in reverse start order; returns how each one ended.
        After ``force_stop`` the rest are killed without waiting for the grace period."""
        ended: dict[str, str] = {}
        tiers = [
            list(group)
            for _, group in itertools.groupby(reversed(self.processes), key=lambda p: p.role)
        ]
        for tier in tiers:
            for process in tier:
                process.send_signal(signal.SIGCONT)  # a paused process cannot stop
                process.send_signal(signal.SIGKILL if self.forced else signal.SIGTERM)
            deadline = self.clock() + self.grace_s
            for process in tier:
                while process.is_running() and self.clock() < deadline and not self.forced:
                    time.sleep(0.05)
                if process.is_running():
                    if not self.forced:
                        log.warning("process did not stop in time; killing", process=process.name)
                    process.send_signal(signal.SIGKILL)
                    assert process.popen is not None
                    process.popen.wait()
                kept = self.kept[process.name]
                if kept.state in RUNNING_STATES:
                    kept.last_exit = describe_exit(process.exit_code())
                self._set(kept, ProcessState.STOPPED)
                ended[process.name] = kept.last_exit or "stopped"
        return ended

    def describe(self) -> dict[str, dict[str, Any]]:
        """Every process's state, in start order (JSON-ready)."""
        return {name: kept.describe() for name, kept in self.kept.items()}
