"""The leader lease: a storage node acknowledges acks=all writes only while its etcd session
cannot have expired (``node.leader_lease``, wired into ``ReplicaManager``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from storage_batches import make_batch

from strom.errors import NotLeaderOrFollowerError, RequestTimedOutError
from strom_server.runtime.clock import SystemClock
from strom_storage.log import LogConfig
from strom_storage.log.log_manager import LogManager
from strom_storage.membership.assignment import assignments_for
from strom_storage.node import ReplicaManager
from strom_storage.node.leader_lease import LeaderLease

TOPICS = {"t": {"partitions": {"0": [1, 2]}, "configs": {}}}
STATES = {("t", 0): {"leader": 1, "leader_epoch": 1, "isr": [1, 2]}}


async def _leader(tmp_path: Path) -> ReplicaManager:
    replicas = ReplicaManager(LogManager([tmp_path], clock=SystemClock()), node_id=1)
    await replicas.hosted.apply_assignments(
        assignments_for(1, TOPICS, STATES), LogConfig(), remove_others=True
    )
    return replicas


def _batch() -> bytes:
    return make_batch([(None, b"v", int(time.time() * 1000))])


def test_the_lease_runs_from_the_send_time_of_the_last_answered_keep_alive() -> None:
    now = [100.0]
    lease = LeaderLease(lambda: now[0])
    assert lease.expired()  # nothing before the first registration
    lease.renewed(sent_at=100.0, ttl_s=4)
    now[0] = 103.9
    assert not lease.expired()
    lease.renewed(sent_at=99.0, ttl_s=4)  # a late answer to an older keep-alive shortens nothing
    assert not lease.expired()
    now[0] = 104.0
    assert lease.expired()
    lease.renewed(sent_at=104.0, ttl_s=0)  # "expired" from etcd renews nothing
    assert lease.expired()


def test_an_expired_lease_refuses_acks_all_but_not_acks_1(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = await _leader(tmp_path)
        replicas.lease = LeaderLease()
        replicas.lease.renewed(time.monotonic() - 10, 4)
        (refused,) = await replicas.append(-1, 30000, [("t", 0, _batch())])
        assert isinstance(refused.error, NotLeaderOrFollowerError)
        assert "etcd session" in str(refused.error)
        assert replicas.hosted.get("t", 0).log.log_end_offset == 0  # nothing appended
        (accepted,) = await replicas.append(1, 30000, [("t", 0, _batch())])
        assert accepted.error is None and accepted.base_offset == 0
        replicas.close()

    asyncio.run(scenario())


def test_an_acks_all_wait_ends_when_the_lease_runs_out(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = await _leader(tmp_path)
        now = [0.0]
        lease = replicas.lease = LeaderLease(lambda: now[0])
        lease.renewed(sent_at=0.0, ttl_s=0.2)

        async def time_passes() -> None:
            await asyncio.sleep(0.05)
            now[0] = 1.0

        helper = asyncio.ensure_future(time_passes())
        # the follower never fetches: without the lease this waits the full 30 s
        (result,) = await asyncio.wait_for(replicas.append(-1, 30000, [("t", 0, _batch())]), 20)
        await helper
        assert isinstance(result.error, NotLeaderOrFollowerError)
        replicas.close()

    asyncio.run(scenario())


def test_a_renewed_lease_keeps_the_wait_going(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = await _leader(tmp_path)
        now = [0.0]
        lease = replicas.lease = LeaderLease(lambda: now[0])
        lease.renewed(sent_at=0.0, ttl_s=0.2)

        async def renew_then_fetch() -> None:
            await asyncio.sleep(0)
            lease.renewed(sent_at=0.0, ttl_s=30)
            await asyncio.sleep(0.4)  # the wait outlives the first lease's length
            replicas.hosted.get("t", 0).update_follower(2, 1, int(time.monotonic() * 1000))

        helper = asyncio.ensure_future(renew_then_fetch())
        (result,) = await asyncio.wait_for(replicas.append(-1, 30000, [("t", 0, _batch())]), 20)
        await helper
        assert result.error is None and result.base_offset == 0
        (timed_out,) = await replicas.append(-1, 100, [("t", 0, _batch())])
        assert isinstance(timed_out.error, RequestTimedOutError)  # the lease is still good
        replicas.close()

    asyncio.run(scenario())
