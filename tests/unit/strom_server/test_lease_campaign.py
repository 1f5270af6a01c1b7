"""LeaseCampaign against a real etcd: one of two candidates wins and only its fenced writes go
through; it keeps the key past its TTL (keep-alive from a thread), steps down when the lease
expires, when its event loop is wedged past the TTL or when the key changes, and hands over at
once when it resigns."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from lease_testkit import etcd, eventually, lease_alive

from strom.errors import StromError
from strom_server.etcd.lease_campaign import Ballot, LeaseCampaign
from strom_server.etcd.process import EtcdProcess
from strom_server.etcd.store import EtcdStore, Put

__all__ = ["etcd"]  # the module-scoped fixture, used by name

pytestmark = pytest.mark.timeout(60)

TTL_S = 2


class Candidate(LeaseCampaign):
    """A candidate writing its name; it records when it was elected and deposed."""

    def __init__(self, store: EtcdStore, key: str, name: str) -> None:
        super().__init__(store, key, ttl_s=TTL_S, name=f"test-{name}")
        self.candidate = name
        self.elected: list[int] = []
        self.deposed: list[str] = []

    async def _ballot(self) -> Ballot | None:
        if await self._store.get(self.key) is not None:
            return None
        return Ballot(self.candidate.encode())

    async def _elected(self, ballot: Ballot, revision: int) -> None:
        self.elected.append(revision)

    def _deposed(self, reason: str) -> None:
        self.deposed.append(reason)

    async def _wait(self) -> None:
        await asyncio.sleep(0.05)


def test_one_candidate_wins_keeps_the_key_and_only_its_writes_pass(etcd: EtcdProcess) -> None:
    key = "/test-campaign/a/leader"

    async def scenario() -> None:
        store = EtcdStore([etcd.endpoint])
        a, b = Candidate(store, key, "a"), Candidate(store, key, "b")
        tasks = [asyncio.create_task(c.run()) for c in (a, b)]
        try:
            await eventually(lambda: a.leading or b.leading, "a leader")
            leader, other = (a, b) if a.leading else (b, a)
            await asyncio.sleep(TTL_S * 2)  # kept alive past its TTL, by the thread
            assert leader.leading and not other.leading
            assert leader.elections_won == 1 and other.elections_won == 0
            held = await store.get(key)
            assert held is not None and held.value == leader.candidate.encode()
            assert held.lease == leader.lease_id
            stale = leader.fence()
            done = await store.txn([stale], [Put("/test-campaign/a/data", b"1")])
            assert done.succeeded
            with pytest.raises(StromError):
                other.fence()

            tasks[(a, b).index(leader)].cancel()
            resigned_at = time.monotonic()
            await leader.resign()
            assert leader.deposed == ["shutting down"] and not leader.leading
            await eventually(lambda: other.leading, "the other candidate to take over")
            assert time.monotonic() - resigned_at < TTL_S  # no wait for the lease to expire
            refused = await store.txn([stale], [Put("/test-campaign/a/data", b"2")])
            assert not refused.succeeded
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for candidate in (a, b):
                await candidate.resign()
            await store.close()

    asyncio.run(scenario())


@contextlib.asynccontextmanager
async def elected(etcd: EtcdProcess, key: str) -> AsyncIterator[tuple[EtcdStore, Candidate, int]]:
    """One candidate campaigning on ``key`` until it has won: (store, candidate, its lease);
    stopped, resigned and closed afterwards."""
    store = EtcdStore([etcd.endpoint])
    a = Candidate(store, key, "a")
    task = asyncio.create_task(a.run())
    try:
        await eventually(lambda: a.leading, "the election")
        first = a.lease_id
        assert first is not None
        yield store, a, first
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await a.resign()
        await store.close()


def test_an_expired_lease_steps_down_and_campaigns_again(etcd: EtcdProcess) -> None:
    key = "/test-campaign/b/leader"

    async def scenario() -> None:
        async with elected(etcd, key) as (store, a, first):
            await store.revoke_lease(first)  # what an expiry in etcd does
            await eventually(lambda: a.elections_won == 2, "the second election")
            assert len(a.deposed) == 1 and "etcd reported the lease expired" in a.deposed[0]
            assert a.leading and a.lease_id not in (None, first)
            held = await store.get(key)
            assert held is not None and held.lease == a.lease_id

    asyncio.run(scenario())


def test_a_wedged_event_loop_loses_the_lease(etcd: EtcdProcess) -> None:
    key = "/test-campaign/c/leader"

    async def scenario() -> None:
        async with elected(etcd, key) as (_, a, first):
            time.sleep(TTL_S + 1)  # noqa: ASYNC251 (the loop is wedged: its keep-alive holds back)
            await eventually(lambda: bool(a.deposed), "the step-down")
            assert "lease" in a.deposed[0]
            assert not await lease_alive(etcd, first)

    asyncio.run(scenario())


def test_a_changed_key_steps_down_and_revokes_the_lease(etcd: EtcdProcess) -> None:
    key = "/test-campaign/d/leader"

    async def scenario() -> None:
        store = EtcdStore([etcd.endpoint])
        a = Candidate(store, key, "a")
        try:
            assert await a._campaign()
            lease = a.lease_id
            assert lease is not None and await lease_alive(etcd, lease)
            await store.put(key, b"someone else")  # what the owner's watch then reports
            lead = asyncio.create_task(a._lead())
            a.key_changed()
            await asyncio.wait_for(lead, 5)
            assert a.deposed == ["the election key changed"] and not a.leading
            assert a.lease_id is None and not await lease_alive(etcd, lease)
            with pytest.raises(StromError):
                a.fence()
        finally:
            await a.resign()
            await store.close()

    asyncio.run(scenario())
