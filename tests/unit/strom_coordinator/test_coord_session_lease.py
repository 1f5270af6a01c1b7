"""The coordinator's session lease: while its etcd session may have expired (last answered
keep-alive's send time + TTL) every request for a partition it hosts, reads included, answers
NOT_COORDINATOR, and it serves again once a keep-alive gets through
(``strom_server.etcd.session_lease``, checked by ``partitions.hosting.HostedPartitions``)."""

from __future__ import annotations

import asyncio

import pytest
from group_unitkit import MemoryLog, join, serving_manager

from strom.errors import NotCoordinatorError
from strom_coordinator.group.api import CommitPartition
from strom_coordinator.txn.completion import MarkerJob
from strom_coordinator.txn.manager import TransactionManager, TxnConfig
from strom_server.etcd.session_lease import SessionLease


def _commit(offset: int) -> list[CommitPartition]:
    return [CommitPartition("t", 0, offset, -1, "")]


def test_group_requests_answer_not_coordinator_while_the_session_may_have_expired() -> None:
    async def main() -> None:
        now = [100.0]
        session = SessionLease(lambda: now[0])
        m = serving_manager()
        m.use_session(session)
        session.renewed(sent_at=100.0, ttl_s=6)
        [ok] = await m.commit_offsets("g", -1, "", _commit(5))
        assert ok.error is None
        now[0] = 105.9
        [got] = await m.fetch_offsets("g", [("t", 0)])
        assert got.offset == 5

        now[0] = 106.0  # another coordinator may own the partition now
        with pytest.raises(NotCoordinatorError, match="etcd session"):
            await m.fetch_offsets("g", [("t", 0)])
        with pytest.raises(NotCoordinatorError):
            await m.commit_offsets("g", -1, "", _commit(7))
        with pytest.raises(NotCoordinatorError):
            await join(m, "other")
        [described] = await m.describe_groups(["g"])
        assert isinstance(described.error, NotCoordinatorError)

        session.renewed(sent_at=106.5, ttl_s=6)  # a keep-alive got through again
        [got] = await m.fetch_offsets("g", [("t", 0)])
        assert got.offset == 5  # the refused commit changed nothing

    asyncio.run(main())


def test_a_partition_not_hosted_here_still_answers_not_coordinator_with_a_live_session() -> None:
    async def main() -> None:
        session = SessionLease(lambda: 0.0)
        session.renewed(sent_at=0.0, ttl_s=6)
        m = serving_manager(partitions=1)
        m.use_session(session)
        m.unload(0)
        with pytest.raises(NotCoordinatorError, match="does not own"):
            await m.fetch_offsets("g", [("t", 0)])

    asyncio.run(main())


class _NoMarkers:
    async def write(self, job: MarkerJob) -> None:
        raise AssertionError("no transaction ends in this test")


def test_transaction_requests_answer_not_coordinator_while_the_session_may_have_expired() -> None:
    async def main() -> None:
        now = [100.0]
        session = SessionLease(lambda: now[0])
        pids = [100]

        async def fresh() -> int:
            pids[0] += 1
            return pids[0]

        m = TransactionManager(
            MemoryLog(),
            TxnConfig(),
            fresh_producer_id=fresh,
            group_partition_for=lambda group: 0,
            markers=_NoMarkers(),
            coordinator_epoch=lambda partition: 1,
            on_fenced=lambda partition: None,
        )
        m.partition_count = 1
        m.begin_loading(0)
        m.finish_loading(0)
        m.use_session(session)
        assert session.expired()  # never renewed: nothing is answered
        with pytest.raises(NotCoordinatorError, match="etcd session"):
            await m.init_producer_id("orders", 60_000)
        session.renewed(sent_at=100.0, ttl_s=6)
        assert await m.init_producer_id("orders", 60_000) == (101, 0)
        now[0] = 107.0
        with pytest.raises(NotCoordinatorError, match="etcd session"):
            await m.add_partitions("orders", 101, 0, [("t", 0)])
        with pytest.raises(NotCoordinatorError, match="etcd session"):
            await m.init_producer_id("orders", 60_000)

    asyncio.run(main())
