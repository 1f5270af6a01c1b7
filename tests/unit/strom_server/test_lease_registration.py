"""LeaseRegistration against a real etcd: the registration outlives its TTL (keep-alive from a
thread), is written again on a new lease once the old one is lost, revokes the lease of a
failed write, keeps trying a write that fails, and goes at once on close."""

from __future__ import annotations

import asyncio

import pytest
from lease_testkit import etcd, eventually, lease_alive

from strom_server.etcd.lease_registration import LeaseRegistration
from strom_server.etcd.process import EtcdProcess
from strom_server.etcd.store import EtcdStore

__all__ = ["etcd"]  # the module-scoped fixture, used by name

pytestmark = pytest.mark.timeout(60)

TTL_S = 2


def test_kept_past_its_ttl_written_again_after_a_loss_and_gone_on_close(
    etcd: EtcdProcess,
) -> None:
    key = "/test-registration/a"

    async def scenario() -> None:
        store = EtcdStore([etcd.endpoint])
        events: list[str] = []
        registration = LeaseRegistration(
            store, what="test registration", ttl_s=TTL_S,
            write=lambda lease: store.put(key, b"me", lease=lease),
            on_lost=lambda: events.append("lost"),
            on_registered=lambda: events.append("registered"),
        )  # fmt: skip
        await registration.start()
        try:
            first = registration.lease_id
            assert first and not registration.session.expired()
            await asyncio.sleep(TTL_S * 2)
            held = await store.get(key)
            assert held is not None and held.lease == first and events == []

            await store.revoke_lease(first)  # what an expiry in etcd does: the key goes
            await eventually(lambda: events == ["lost", "registered"], "the registration again")
            second = registration.lease_id
            assert second not in (0, first)
            held = await store.get(key)
            assert held is not None and held.value == b"me" and held.lease == second
        finally:
            await registration.close()
        assert registration.lease_id == 0
        assert await store.get(key) is None  # revoked: gone at once
        await store.close()

    asyncio.run(scenario())


def test_a_failed_write_revokes_its_lease_and_run_keeps_trying(etcd: EtcdProcess) -> None:
    key = "/test-registration/b"

    async def scenario() -> None:
        store = EtcdStore([etcd.endpoint])
        leases: list[int] = []

        async def refused(lease: int) -> None:
            leases.append(lease)
            raise ValueError("refused")

        once = LeaseRegistration(store, what="test registration", ttl_s=TTL_S, write=refused)
        with pytest.raises(ValueError, match="refused"):
            await once.start()
        assert once.lease_id == 0 and not await lease_alive(etcd, leases[0])

        async def refused_twice(lease: int) -> None:
            leases.append(lease)
            if len(leases) < 4:
                raise ValueError("refused")
            await store.put(key, b"me", lease=lease)

        patient = LeaseRegistration(
            store, what="test registration", ttl_s=TTL_S, write=refused_twice
        )
        task = asyncio.create_task(patient.run())
        try:
            await eventually(lambda: patient.lease_id != 0, "the registration")
            assert len(leases) == 4 and patient.lease_id == leases[-1]
            assert not any([await lease_alive(etcd, lease) for lease in leases[1:3]])
            held = await store.get(key)
            assert held is not None and held.lease == patient.lease_id
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await patient.close()
            await once.close()
            await store.close()

    asyncio.run(scenario())
