"""Builders of metadata caches for the controller's unit tests (no etcd, no network)."""

from __future__ import annotations

from strom_controller.keys import (
    BrokerRecord,
    KeyLayout,
    PartitionRecord,
    TopicRecord,
    encode,
)
from strom_controller.metadata_cache import MetadataCache
from strom_server.etcd.store import KeyValue

KEYS = KeyLayout("/t")


class CacheBuilder:
    """Puts records into a fresh cache as if the watch delivered them, one revision each."""

    def __init__(self) -> None:
        self.cache = MetadataCache(KEYS)
        self.revision = 0

    def _put(self, key: str, value: bytes) -> CacheBuilder:
        self.revision = self.cache.revision + 1
        kv = KeyValue(key, value, self.revision, self.revision)
        self.cache.apply_events([("put", kv)], self.revision)
        return self

    def _delete(self, key: str) -> CacheBuilder:
        self.revision = self.cache.revision + 1
        kv = KeyValue(key, b"", 0, self.revision)
        self.cache.apply_events([("delete", kv)], self.revision)
        return self

    def broker(self, broker_id: int, rack: str = "") -> CacheBuilder:
        return self._put(KEYS.broker(broker_id), BrokerRecord(broker_id, "h", 9000, rack).to_json())

    def remove_broker(self, broker_id: int) -> CacheBuilder:
        return self._delete(KEYS.broker(broker_id))

    def topic(
        self,
        name: str,
        partitions: dict[int, tuple[int, ...]],
        configs: dict[str, str] | None = None,
    ) -> CacheBuilder:
        self._put(KEYS.topic(name), TopicRecord("id-" + name, partitions, configs or {}).to_json())
        for p, replicas in partitions.items():
            self.state(name, p, PartitionRecord(replicas[0], 0, replicas, 0))
        return self

    def state(self, topic: str, partition: int, state: PartitionRecord) -> CacheBuilder:
        return self._put(KEYS.partition(topic, partition), state.to_json())

    def broker_config(self, **configs: str) -> CacheBuilder:
        return self._put(
            KEYS.broker_config, encode({k.replace("_", "."): v for k, v in configs.items()})
        )


def commit(cache: MetadataCache, result) -> None:
    """Apply a ControllerResult's effects as the runtime does after a successful commit."""
    cache.apply_ops(result.effects, cache.revision + 1)
