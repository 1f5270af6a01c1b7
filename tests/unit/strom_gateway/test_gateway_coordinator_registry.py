"""CoordinatorRegistry follows P/coordinators/ids/ in a real etcd: initial read, puts, deletes,
lease expiry, and ignores other keys and unreadable values."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from strom_gateway.routing.coordinator_registry import CoordinatorRegistry
from strom_server.etcd.keys import ClusterKeys, encode_value
from strom_server.etcd.process import EtcdProcess
from strom_server.etcd.store import EtcdStore

pytestmark = pytest.mark.timeout(60)


async def eventually(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_registry_follows_registrations() -> None:
    keys = ClusterKeys("/test-registry")

    async def scenario(endpoint: str) -> None:
        writer = EtcdStore([endpoint])
        await writer.put(keys.coordinator(1), encode_value({"id": 1, "host": "h1", "port": 11}))
        await writer.put(keys.coordinator_owner(0), encode_value({"coordinator_id": 1, "epoch": 1}))
        registry = CoordinatorRegistry(EtcdStore([endpoint]), keys)
        await registry.start()
        try:
            assert registry.addresses == {1: "h1:11"}
            lease = await writer.grant_lease(1)
            await writer.put(
                keys.coordinator(2), encode_value({"id": 2, "host": "h2", "port": 12}), lease
            )
            await writer.put(keys.coordinator(3), b"not json")
            await eventually(lambda: 2 in registry.addresses, "coordinator 2")
            assert registry.addresses == {1: "h1:11", 2: "h2:12"}
            await writer.put(keys.coordinator(1), encode_value({"id": 1, "host": "h1", "port": 21}))
            await eventually(lambda: registry.addresses.get(1) == "h1:21", "the new port")
            await writer.delete(keys.coordinator(1))
            await eventually(lambda: 1 not in registry.addresses, "coordinator 1 gone")
            # Coordinator 2's lease is never kept alive: it expires and the key goes.
            await eventually(lambda: not registry.addresses, "the lease to expire", 15.0)
            assert await registry.refresh() == {}
        finally:
            await registry.close()
            await writer.close()

    with EtcdProcess() as etcd:
        asyncio.run(scenario(etcd.endpoint))
