"""Shared by the lease tests against a real etcd: the etcd fixture, waiting for a condition,
and asking etcd whether a lease is alive."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import etcd3
import pytest

from strom_server.etcd.process import EtcdProcess

__all__ = ["etcd", "eventually", "lease_alive"]


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdProcess]:
    with EtcdProcess() as process:
        yield process


async def eventually(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def lease_alive(etcd: EtcdProcess, lease: int) -> bool:
    """Whether etcd still knows ``lease`` (asked with the synchronous client, off the loop)."""
    client = etcd3.client(etcd.host, etcd.port, timeout=5)
    try:
        info = await asyncio.to_thread(client.get_lease_info, lease)
        return int(info.TTL) > 0
    finally:
        client.close()
