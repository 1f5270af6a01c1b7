"""``strom.cluster.retry``: jittered exponential backoff and deadlines."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from strom.cluster.retry import Backoff, Deadline


def test_delays_double_up_to_the_cap_each_jittered_into_its_upper_half() -> None:
    backoff = Backoff(0.1, 1.0, rng=random.Random(7))
    delays = [backoff.next() for _ in range(7)]
    for delay, nominal in zip(delays, (0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0), strict=True):
        assert nominal / 2 <= delay <= nominal
    backoff.reset()
    assert 0.05 <= backoff.next() <= 0.1


def test_callers_failing_together_spread_out() -> None:
    first = [Backoff(1.0, 1.0, rng=random.Random(seed)).next() for seed in range(50)]
    assert max(first) - min(first) > 0.25


def test_bad_bounds_are_refused_and_a_first_delay_above_the_cap_is_kept() -> None:
    with pytest.raises(ValueError, match="initial_s"):
        Backoff(0, 1)
    backoff = Backoff(60, 1, rng=random.Random(1))  # e.g. retry_backoff_ms=60000, cap 1 s
    assert backoff.max_s == 60 and 30 <= backoff.next() <= 60


def test_a_deadline_cuts_the_sleep_short() -> None:
    deadline = Deadline(0.05)
    assert deadline.allows(0.01) and not deadline.allows(1.0) and not deadline.expired()
    started = time.monotonic()
    asyncio.run(Backoff(5.0, 5.0).sleep(deadline))
    assert time.monotonic() - started < 1.0
    assert deadline.expired() and deadline.left() == 0.0
