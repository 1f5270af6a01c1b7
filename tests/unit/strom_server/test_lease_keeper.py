"""LeaseKeeper against a real etcd: it keeps a lease alive from its thread, holds back while
``may_renew`` says no (so the lease lapses), reports an expired lease, and moves past a dead
endpoint."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import etcd3
import pytest

from strom_server.etcd.lease_keeper import LeaseKeeper
from strom_server.etcd.process import EtcdProcess
from strom_server.etcd.session_lease import SessionLease

pytestmark = pytest.mark.timeout(60)

TTL_S = 2


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdProcess]:
    with EtcdProcess() as process:
        yield process


def eventually(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _client(etcd: EtcdProcess) -> etcd3.Etcd3Client:
    host, port = etcd.endpoint.removeprefix("http://").rsplit(":", 1)
    return etcd3.client(host=host, port=int(port))


def _keeper(endpoints: list[str], may_renew: Callable[[], bool], expired: list[int]) -> LeaseKeeper:
    return LeaseKeeper(
        endpoints,
        lease=SessionLease(),
        interval_s=TTL_S / 3,
        may_renew=may_renew,
        on_expired=expired.append,
    )


def test_keeps_the_lease_alive_past_its_ttl(etcd: EtcdProcess) -> None:
    client = _client(etcd)
    lease = client.lease(TTL_S)
    expired: list[int] = []
    keeper = _keeper([etcd.endpoint], lambda: True, expired)
    keeper.keep(lease.id)
    keeper.start()
    try:
        time.sleep(TTL_S * 2)
        assert lease.remaining_ttl > 0
        assert keeper.lease.remaining_s() > 0 and keeper.answered >= 3
        assert expired == []
    finally:
        keeper.stop()
        lease.revoke()


def test_holds_back_while_may_renew_is_false_then_reports_the_expiry(
    etcd: EtcdProcess,
) -> None:
    client = _client(etcd)
    lease = client.lease(TTL_S)
    allowed = threading.Event()
    expired: list[int] = []
    keeper = _keeper([etcd.endpoint], allowed.is_set, expired)
    keeper.keep(lease.id)
    keeper.start()
    try:
        eventually(lambda: lease.remaining_ttl < 0, "the lease to expire in etcd")
        assert keeper.answered == 0 and keeper.lease.expired()
        allowed.set()
        eventually(lambda: expired == [lease.id], "the keeper to report the expiry")
        answered = keeper.answered
        time.sleep(TTL_S / 2)
        assert keeper.answered == answered  # an expired lease is not renewed again
    finally:
        keeper.stop()


def test_moves_past_a_dead_endpoint(etcd: EtcdProcess) -> None:
    client = _client(etcd)
    lease = client.lease(TTL_S)
    expired: list[int] = []
    keeper = _keeper(["127.0.0.1:1", etcd.endpoint], lambda: True, expired)
    keeper.keep(lease.id)
    keeper.start()
    try:
        eventually(lambda: keeper.answered > 0, "an answered keep-alive")
        assert keeper.failed >= 1
        time.sleep(TTL_S * 1.5)
        assert lease.remaining_ttl > 0
    finally:
        keeper.stop()
        lease.revoke()
