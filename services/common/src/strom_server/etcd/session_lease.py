"""How long this process's etcd session (its registration lease) is surely still alive.

Another process takes over what this one held (a partition's leadership, an internal topic's
partition) only once this process's etcd lease has expired. The process cannot see etcd
decide, but it can tell when the expiry became *possible*: a keep-alive sent at time ``t`` and
answered with TTL ``ttl`` keeps the lease alive at least until ``t + ttl`` (etcd renews it on
receipt, after ``t``). Past the latest such bound the process may have been replaced, so it
stops answering for what it held until a keep-alive gets through again.

Thread-safety: ``renewed`` may be called from a keep-alive thread (``lease_keeper``) while the
event loop reads ``expired``/``remaining_s``.

Clock: the process's monotonic clock against etcd's; both run on real time, so their drift
over one TTL (seconds) is negligible next to the TTL itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["SessionLease"]


class SessionLease:
    """The end of the current session lease, renewed by every answered etcd keep-alive."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._valid_until = float("-inf")  # nothing is valid before the first session
        self.renewals = 0
        self._lock = threading.Lock()

    def renewed(self, sent_at: float, ttl_s: float) -> None:
        """A keep-alive (or the lease grant) sent at ``sent_at`` got TTL ``ttl_s``."""
        if ttl_s > 0:
            with self._lock:
                self._valid_until = max(self._valid_until, sent_at + ttl_s)
                self.renewals += 1

    def now(self) -> float:
        return self._monotonic()

    def remaining_s(self) -> float:
        """Seconds left (negative: expired that long ago)."""
        return self._valid_until - self._monotonic()

    def expired(self) -> bool:
        return self._monotonic() >= self._valid_until

    def lapse(self) -> str:
        """Why its holder stops answering for what it held, for an error message (after
        the holder's name)."""
        return (
            "has not renewed its etcd session for longer than its lease "
            f"(expired {max(0.0, -self.remaining_s()):.1f} s ago)"
        )
