"""When to restart a process that exited unexpectedly: exponential backoff with a crash-loop limit.

The policy of compose's ``restart: on-failure`` and systemd's ``Restart=on-failure`` with
``RestartSec``/``StartLimitBurst``: the first restart waits ``initial_delay_s``, each further
one twice as long up to ``max_delay_s``; a process that stayed healthy for ``healthy_reset_s``
starts counting afresh; after ``max_restarts`` consecutive failures it is left down. Pure
bookkeeping, no clock of its own: callers pass the times.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CrashHistory", "RestartPolicy"]


@dataclass(frozen=True)
class RestartPolicy:
    """How a supervisor restarts processes that exit on their own."""

    #: False keeps an exited process down (fault drills: ``strom cluster up --no-restart``).
    enabled: bool = True
    initial_delay_s: float = 0.5
    max_delay_s: float = 30.0
    #: Up (ready) this long, a process's earlier crashes are forgotten.
    healthy_reset_s: float = 60.0
    #: Consecutive crashes after which the process is left down.
    max_restarts: int = 5

    def __post_init__(self) -> None:
        if not 0 < self.initial_delay_s <= self.max_delay_s:
            raise ValueError(
                f"restart delays: need 0 < initial ({self.initial_delay_s}) <= max "
                f"({self.max_delay_s})"
            )
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")


@dataclass
class CrashHistory:
    """One process's consecutive crashes under a ``RestartPolicy``."""

    policy: RestartPolicy
    consecutive: int = 0

    def on_exit(self, healthy_for_s: float) -> float | None:
        """Record an unexpected exit after ``healthy_for_s`` seconds ready (0 if it never got
        ready); returns the delay before restarting, or None to leave the process down."""
        if not self.policy.enabled:
            return None
        if healthy_for_s >= self.policy.healthy_reset_s:
            self.consecutive = 0
        self.consecutive += 1
        if self.consecutive > self.policy.max_restarts:
            return None
        delay = self.policy.initial_delay_s * 2 ** (self.consecutive - 1)
        return min(delay, self.policy.max_delay_s)

    def reset(self) -> None:
        """Forget earlier crashes (an operator started the process by hand)."""
        self.consecutive = 0
