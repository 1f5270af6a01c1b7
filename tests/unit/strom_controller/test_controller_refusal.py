"""A controller that is not active refuses naming the active controller as etcd has it now,
not as its metadata cache says (a controller resuming from a pause has not seen the takeover
yet); when etcd does not answer, the cache's view stands."""

from __future__ import annotations

import asyncio

import pytest
from controller_unitkit import KEYS

from strom.errors import NotControllerError, StromError
from strom_controller.config import ControllerConfig
from strom_controller.controller import Controller
from strom_controller.election import ControllerElection
from strom_controller.keys import ControllerRecord
from strom_controller.model import ConfigResourceRef
from strom_server.etcd.store import KeyValue


class _LeaderKeyStore:
    """Answers reads of the leader key as etcd would (``value``; None: absent; an exception:
    etcd does not answer) and counts them."""

    endpoints = ("127.0.0.1:2379",)  # never dialled: no lease is kept alive here
    tls = None

    def __init__(self, value: ControllerRecord | Exception | None) -> None:
        self.value = value
        self.reads = 0

    async def get(
        self, key: str, *, retry: bool = True, timeout_s: float | None = None
    ) -> KeyValue | None:
        assert key == KEYS.controller_leader
        self.reads += 1
        if isinstance(self.value, Exception):
            raise self.value
        if self.value is None:
            return None
        return KeyValue(key, self.value.to_json(), 7, 7)


def _standby(store: _LeaderKeyStore, cache_leader: ControllerRecord | None = None) -> Controller:
    """Controller 1, not active, its metadata cache holding ``cache_leader`` as the leader."""
    config = ControllerConfig(etcd_prefix=KEYS.prefix, controller_id=1)
    controller = Controller(config, store=store)
    if cache_leader is not None:
        kv = KeyValue(KEYS.controller_leader, cache_leader.to_json(), 1, 1)
        controller.cache.apply_events([("put", kv)], 1)

    async def elected(_epoch: int) -> None:
        return None

    controller._election = ControllerElection(
        store,
        controller.keys,
        controller.cache,
        controller_id=1,
        host="h1",
        port=9093,
        ttl_s=5,
        on_elected=elected,
        on_deposed=lambda _why: None,
    )
    return controller


def test_refusal_names_the_controller_etcd_has_not_the_stale_cache() -> None:
    # The watch delivered the old leader key's deletion, not yet controller 2's key.
    store = _LeaderKeyStore(ControllerRecord(2, "h2", 9094, 5))
    controller = _standby(store)
    assert controller.cache.controller is None
    with pytest.raises(NotControllerError) as refused:
        asyncio.run(controller.list_reassignments([]))
    assert "active controller is 2 at h2:9094" in str(refused.value)
    assert store.reads == 1


def test_refusal_with_no_leader_in_etcd_says_an_election_is_in_progress() -> None:
    controller = _standby(_LeaderKeyStore(None))
    with pytest.raises(NotControllerError) as refused:
        asyncio.run(controller.list_reassignments([]))
    assert "no controller is active right now" in str(refused.value)


def test_refusal_with_no_leader_in_etcd_does_not_name_the_cache_s_stale_one() -> None:
    # Controller 2's key is gone from etcd (its lease expired); the watch has not said so yet.
    controller = _standby(_LeaderKeyStore(None), ControllerRecord(2, "h2", 9094, 5))
    with pytest.raises(NotControllerError) as refused:
        asyncio.run(controller.list_reassignments([]))
    assert "no controller is active right now" in str(refused.value)


def test_refusal_falls_back_to_the_cache_when_etcd_does_not_answer() -> None:
    controller = _standby(
        _LeaderKeyStore(StromError("etcd unavailable")), ControllerRecord(3, "h3", 9095, 4)
    )
    with pytest.raises(NotControllerError) as refused:
        asyncio.run(controller.list_reassignments([]))
    assert "active controller is 3 at h3:9095" in str(refused.value)


def test_describe_configs_refuses_every_resource_naming_the_active_controller() -> None:
    store = _LeaderKeyStore(ControllerRecord(2, "h2", 9094, 5))
    controller = _standby(store)
    outcomes = asyncio.run(
        controller.describe_configs(
            [ConfigResourceRef("topic", "a"), ConfigResourceRef("topic", "b")]
        )
    )
    assert [type(o.error) for o in outcomes] == [NotControllerError, NotControllerError]
    assert all("active controller is 2 at h2:9094" in str(o.error) for o in outcomes)
    assert store.reads == 1  # not one etcd read per resource
