"""The pages' shared cluster answers: fresh reuse, stale-while-revalidate, one call in flight."""

from __future__ import annotations

import asyncio

import pytest

from strom.errors import StromError
from strom_console.cache import Cached


def test_fresh_then_stale_while_revalidating_then_too_old() -> None:
    async def scenario() -> None:
        now = [0.0]
        calls: list[int] = []
        release = asyncio.Event()

        async def fetch() -> int:
            calls.append(1)
            await release.wait()
            return len(calls)

        cached = Cached(fetch, fresh_s=1, max_age_s=10, clock=lambda: now[0])
        first = [asyncio.create_task(cached.get()) for _ in range(5)]
        await asyncio.sleep(0)
        release.set()
        assert await asyncio.gather(*first) == [1] * 5 and len(calls) == 1  # one call for all
        now[0] = 0.5
        assert await cached.get() == 1 and len(calls) == 1  # fresh: reused
        now[0] = 5
        release.clear()
        assert await cached.get() == 1  # stale: answered at once...
        await asyncio.sleep(0)
        assert await cached.get() == 1 and len(calls) == 2  # ...while one refresh runs
        release.set()
        await asyncio.sleep(0.01)
        assert await cached.get() == 2
        now[0] = 100  # too old: waits for the answer
        assert await cached.get() == 3
        cached.invalidate()
        assert await cached.get() == 4

    asyncio.run(scenario())


def test_no_caching_with_zero_and_errors_reach_a_waiting_caller() -> None:
    async def scenario() -> None:
        answers = iter([1, 2])

        async def fetch() -> int:
            value = next(answers, None)
            if value is None:
                raise StromError("cluster away")
            return value

        cached = Cached(fetch, fresh_s=0, max_age_s=0)
        assert await cached.get() == 1
        await asyncio.sleep(0.001)
        assert await cached.get() == 2
        await asyncio.sleep(0.001)
        with pytest.raises(StromError, match="away"):
            await cached.get()

    asyncio.run(scenario())
