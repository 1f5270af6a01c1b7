"""The etcd-level fence, deterministically: a controller whose election key is gone (or now
someone else's) has its guarded transaction refused by etcd itself. In-process ControllerElection
objects on a real etcd, with the "pause" simulated by not refreshing the lease."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from strom.errors import NotControllerError
from strom_controller.election import ControllerElection
from strom_controller.keys import KeyLayout
from strom_controller.metadata_cache import CacheFeeder, MetadataCache
from strom_server.etcd.process import EtcdProcess
from strom_server.etcd.store import EtcdStore, Put

pytestmark = pytest.mark.integration


async def _nothing(_revision: int) -> None:
    return None


def _election(store: EtcdStore, keys: KeyLayout, cache: MetadataCache, cid: int):
    return ControllerElection(
        store, keys, cache, controller_id=cid, host="127.0.0.1", port=9000 + cid, ttl_s=2,
        on_elected=_nothing, on_deposed=lambda _reason: None,
    )  # fmt: skip


def test_a_deposed_controllers_guarded_write_is_refused_by_etcd(etcd_server: EtcdProcess) -> None:
    async def scenario() -> None:
        keys = KeyLayout(f"/fence-{uuid.uuid4().hex[:8]}")
        store_a = EtcdStore([etcd_server.endpoint])
        store_b = EtcdStore([etcd_server.endpoint])
        cache_a, cache_b = MetadataCache(keys), MetadataCache(keys)
        feeder_b = CacheFeeder(store_b, cache_b)
        await feeder_b.start()
        try:
            a = _election(store_a, keys, cache_a, 1)
            b = _election(store_b, keys, cache_b, 2)
            assert await a._campaign()
            assert not await b._campaign()  # the key is taken
            stale_fence = a.fence()
            ok = await store_a.txn([stale_fence], [Put(keys.topic("t1"), b"{}")])
            assert ok.succeeded  # A is active: its write goes through

            # A "pauses": it stops refreshing; its lease runs out (revoked here, no waiting).
            assert a.lease_id is not None
            await store_a.revoke_lease(a.lease_id)
            await cache_b.wait_for_revision((await store_b.get_prefix(keys.root))[1])
            assert await b._campaign()
            assert cache_b.controller is None or cache_b.controller.id in (1, 2)

            # A resumes believing it is active: etcd refuses its write.
            assert a.leading
            refused = await store_a.txn([a.fence()], [Put(keys.topic("t2"), b"{}")])
            assert not refused.succeeded
            assert await store_a.get(keys.topic("t2")) is None
            assert (await store_a.get(keys.controller_leader)).value == b.record_raw
            assert b.record is not None and b.record.epoch == 2

            await a.step_down("fenced")
            with pytest.raises(NotControllerError):
                a.fence()
        finally:
            await feeder_b.stop()
            await store_a.close()
            await store_b.close()

    asyncio.run(scenario())
