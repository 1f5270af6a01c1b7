"""Transactional ids: one stable producer id per id, the epoch bumped on every init, a fresh id
when the epoch runs out; the keys quote any id into one path segment."""

from __future__ import annotations

import pytest
from controller_unitkit import KEYS, CacheBuilder, commit

from strom_controller.keys import decode
from strom_controller.managers.producer_ids import MAX_PRODUCER_EPOCH
from strom_controller.managers.transactional_ids import TransactionalIdManager
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import Compare, KeyValue, Put

TID = "__strom_coordinator-offsets-7"


def test_first_init_takes_the_fresh_id_at_epoch_zero() -> None:
    cache = CacheBuilder().cache
    manager = TransactionalIdManager(KEYS)
    assert manager.needs_new_id(cache, TID)
    result = manager.init(cache, TID, fresh_id=1000)
    assert result.response == (1000, 0)
    (put,) = result.effects
    assert isinstance(put, Put) and put.key == KEYS.transactional_id(TID)
    assert decode(put.value) == {"producer_id": 1000, "producer_epoch": 0}
    assert result.compares == [Compare.absent(put.key)]
    with pytest.raises(ValueError):
        manager.init(cache, TID, fresh_id=None)


def test_later_inits_keep_the_id_and_bump_the_epoch_guarded_by_the_record() -> None:
    cache = CacheBuilder().cache
    manager = TransactionalIdManager(KEYS)
    commit(cache, manager.init(cache, TID, fresh_id=5))
    for epoch in (1, 2, 3):
        assert not manager.needs_new_id(cache, TID)
        result = manager.init(cache, TID, fresh_id=None)
        assert result.response == (5, epoch)
        key = KEYS.transactional_id(TID)
        assert result.compares == [Compare.mod_equals(key, cache.mod_revision(key))]
        commit(cache, result)
        assert cache.transactional_ids[TID] == (5, epoch)
    # Another transactional id is independent.
    assert manager.init(cache, "other", fresh_id=6).response == (6, 0)


def test_an_exhausted_epoch_moves_to_a_fresh_producer_id() -> None:
    cache = CacheBuilder().cache
    key = KEYS.transactional_id(TID)
    value = b'{"producer_epoch":%d,"producer_id":9}' % (MAX_PRODUCER_EPOCH - 1)
    cache.apply_events([("put", KeyValue(key, value, 3, 3))], 3)
    manager = TransactionalIdManager(KEYS)
    assert manager.needs_new_id(cache, TID)
    assert manager.init(cache, TID, fresh_id=77).response == (77, 0)


def test_the_cache_follows_puts_and_deletes() -> None:
    cache = CacheBuilder().cache
    key = KEYS.transactional_id("a/b c")
    cache.apply_events([("put", KeyValue(key, b'{"producer_id":4,"producer_epoch":2}', 2, 2))], 2)
    assert cache.transactional_ids == {"a/b c": (4, 2)}
    cache.apply_events([("delete", KeyValue(key, b"", 0, 3))], 3)
    assert cache.transactional_ids == {}


def test_keys_quote_the_id_into_one_segment() -> None:
    keys = ClusterKeys("/p")
    key = keys.transactional_id("a/b%c")
    assert key.startswith(keys.transactional_ids)
    assert "/" not in key.removeprefix(keys.transactional_ids)
    assert keys.parse_transactional_id_key(key) == "a/b%c"
    assert keys.parse_transactional_id_key(keys.topic("x")) is None
    assert keys.parse_transactional_id_key(keys.transactional_ids) is None
