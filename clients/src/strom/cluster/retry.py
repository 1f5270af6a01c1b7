"""The one retry policy of the clients and the services: jittered exponential backoff
(``Backoff``), bounded by a deadline (``Deadline``).

``Backoff(initial_s, max_s)``: each ``next()`` is drawn uniformly from ``[d/2, d]``, where ``d``
starts at ``initial_s`` and doubles up to ``max_s`` ("equal jitter": callers that failed
together do not retry together, and no wait is shorter than half the nominal one); ``reset()``
after a success starts again from ``initial_s``. ``sleep()`` waits the next delay, cut short at
a ``Deadline``.
"""

from __future__ import annotations

import asyncio
import random
import time

__all__ = ["Backoff", "Deadline"]


class Deadline:
    """A point in monotonic time ``timeout_s`` from now."""

    __slots__ = ("at",)

    def __init__(self, timeout_s: float) -> None:
        self.at = time.monotonic() + timeout_s

    def left(self) -> float:
        """Seconds until the deadline (0 once passed)."""
        return max(self.at - time.monotonic(), 0.0)

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def allows(self, delay_s: float) -> bool:
        """Whether a wait of ``delay_s`` still ends before the deadline."""
        return time.monotonic() + delay_s < self.at


class Backoff:
    """Jittered exponential backoff (see the module docstring). Not thread-safe."""

    __slots__ = ("_nominal", "_rng", "initial_s", "max_s")

    def __init__(self, initial_s: float, max_s: float, *, rng: random.Random | None = None) -> None:
        if not initial_s > 0:
            raise ValueError(f"backoff needs initial_s > 0, got {initial_s}")
        self.initial_s = initial_s
        self.max_s = max(max_s, initial_s)  # a configured backoff above the cap is kept
        self._nominal = initial_s
        self._rng = rng or random.Random()

    def next(self) -> float:
        """The next delay; the one after it is twice as long (nominally), up to ``max_s``."""
        nominal = self._nominal
        self._nominal = min(nominal * 2, self.max_s)
        return self._rng.uniform(nominal / 2, nominal)

    def reset(self) -> None:
        """After a success: the next delay is ``initial_s``'s again."""
        self._nominal = self.initial_s

    async def sleep(self, deadline: Deadline | None = None) -> None:
        """Wait the next delay (no longer than what is left of ``deadline``)."""
        delay = self.next()
        await asyncio.sleep(delay if deadline is None else min(delay, deadline.left()))
