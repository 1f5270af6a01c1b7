"""How long this node may still acknowledge acks=all writes as a leader: its leader lease.

The controller moves a partition's leadership away from a node only once that node's etcd
session (its registration lease, ``broker.session.timeout.ms``) has expired. The node cannot
see the controller decide, but it can tell when the expiry became *possible*: a keep-alive
sent at time ``t`` and answered with TTL ``ttl`` keeps the session alive at least until
``t + ttl`` (etcd renews it on receipt, after ``t``). Past the latest such bound the node may
have been replaced, so it stops acknowledging acks=all writes (``NOT_LEADER_OR_FOLLOWER``)
until a keep-alive gets through again. acks=0/1 writes and reads are not covered: their
guarantee never depended on the ISR.

Clock: the node's monotonic clock against etcd's; both run on real time, so their drift over
one TTL (seconds) is negligible next to the TTL itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from strom.errors import NotLeaderOrFollowerError

__all__ = ["LeaderLease"]


class LeaderLease:
    """The end of the current lease, renewed by every answered etcd keep-alive."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._valid_until = float("-inf")  # nothing acknowledged before the first session
        self.renewals = 0

    def renewed(self, sent_at: float, ttl_s: float) -> None:
        """A keep-alive (or the registration) sent at ``sent_at`` got TTL ``ttl_s``."""
        if ttl_s > 0:
            self._valid_until = max(self._valid_until, sent_at + ttl_s)
            self.renewals += 1

    def now(self) -> float:
        return self._monotonic()

    def remaining_s(self) -> float:
        """Seconds left (negative: expired that long ago)."""
        return self._valid_until - self._monotonic()

    def expired(self) -> bool:
        return self._monotonic() >= self._valid_until

    def error(self, node_id: int, what: str) -> NotLeaderOrFollowerError:
        return NotLeaderOrFollowerError(
            f"node {node_id} has not renewed its etcd session for longer than its lease "
            f"(expired {max(0.0, -self.remaining_s()):.1f} s ago): another node may lead "
            f"{what} now, so it no longer acknowledges acks=all writes"
        )
