"""Key layout, record encoding and the revision-guarded metadata cache."""

from __future__ import annotations

import pytest
from controller_unitkit import KEYS, CacheBuilder

from strom.errors import ConfigurationError
from strom_controller.config import ControllerConfig
from strom_controller.keys import ControllerRecord, KeyLayout, PartitionRecord, TopicRecord
from strom_controller.metadata_cache import MetadataCache
from strom_server.etcd.store import Delete, KeyValue, Put, prefix_end
from strom_server.runtime.config import load_config


def test_key_layout() -> None:
    keys = KeyLayout("/strom")
    assert keys.controller_leader == "/strom/controller/leader"
    assert keys.controller_epoch == "/strom/controller/epoch"
    assert keys.cluster_id == "/strom/cluster/id"
    assert keys.broker(3) == "/strom/brokers/ids/3"
    assert keys.topic("t") == "/strom/topics/t"
    assert keys.partition("t", 2) == "/strom/partitions/t/2"
    assert keys.broker_config == "/strom/config/brokers"
    assert keys.reassignment("t", 1) == "/strom/reassignments/t/1"
    assert keys.producer_ids == "/strom/producer_ids/next_block"
    assert keys.split_topic_partition("a.b/12") == ("a.b", 12)
    assert keys.split_topic_partition("nope") is None
    assert prefix_end(b"/a/") == b"/a0"


def test_records_round_trip_with_stable_bytes() -> None:
    record = ControllerRecord(2, "h", 9095, 7)
    assert record.to_json() == b'{"epoch":7,"host":"h","id":2,"port":9095}'
    assert ControllerRecord.from_json(record.to_json()) == record
    topic = TopicRecord("id", {1: (2, 3), 0: (1,)}, {"retention.ms": "1"})
    assert TopicRecord.from_json(topic.to_json()) == topic
    assert PartitionRecord.from_json(PartitionRecord(1, 2, (1,), 3).to_json()) == PartitionRecord(
        1, 2, (1,), 3
    )


def test_cache_ignores_older_revisions_and_tombstones() -> None:
    cache = MetadataCache(KEYS)
    seen: list[set[str]] = []
    cache.add_listener(seen.append)
    state = PartitionRecord(1, 0, (1,), 0).to_json()
    cache.apply_ops([Put(KEYS.partition("t", 0), state)], 10)
    older = KeyValue(KEYS.partition("t", 0), PartitionRecord(2, 0, (2,), 0).to_json(), 5, 5)
    cache.apply_events([("put", older)], 10)  # the watch delivering an older write: ignored
    assert cache.partitions[("t", 0)].leader == 1
    cache.apply_ops([Delete(KEYS.topic_partitions("t"), prefix=True)], 11)
    assert cache.partitions == {}
    cache.apply_events([("put", older)], 11)  # no resurrection from before the delete
    assert cache.partitions == {}
    assert {"partitions"} in seen


def test_cache_tracks_brokers_with_epochs_and_controller() -> None:
    b = CacheBuilder().broker(1, "r")
    assert b.cache.brokers[1].epoch == 1 and b.cache.brokers[1].rack == "r"
    raw = ControllerRecord(1, "h", 1, 1).to_json()
    b._put(KEYS.controller_leader, raw)
    assert b.cache.controller_raw == raw
    b._delete(KEYS.controller_leader)
    assert b.cache.controller is None
    b._put(KEYS.topic("bad"), b"not json")  # logged and ignored
    assert "bad" not in b.cache.topics


def test_controller_config() -> None:
    config = load_config(
        ControllerConfig,
        ["--controller-id", "3", "--controller.session.timeout.ms", "2500",
         "--topic.config.defaults", "retention.ms=10", "--no-auto.create.topics.enable"],
        env={},
    )  # fmt: skip
    assert config.controller_id == 3 and config.lease_ttl_s == 2
    assert config.broker_topic_defaults() == {"retention.ms": "10"}
    assert config.auto_create_topics_enable is False
    assert config.listen == "127.0.0.1:9094"
    default = load_config(ControllerConfig, [], env={})
    assert default.auto_create_topics_enable and default.num_partitions == 1
    with pytest.raises(ConfigurationError, match=r"topic\.config\.defaults"):
        load_config(ControllerConfig, ["--topic.config.defaults", "retention.ms=x"], env={})


def test_layout_matches_the_shared_contract() -> None:
    from strom_server.etcd.keys import ClusterKeys

    shared, mine = ClusterKeys("/p"), KeyLayout("/p")
    assert mine.controller_leader == shared.controller_leader
    assert mine.broker(1) == shared.broker(1) and mine.brokers == shared.brokers
    assert mine.topic("t") == shared.topic("t")
    assert mine.partition("t", 0) == shared.partition("t", 0)
    assert mine.topic_partitions("t") == shared.partitions_of("t")
    assert mine.reassignment("t", 0) == shared.reassignment("t", 0)
    assert mine.producer_ids == shared.producer_id_block
    assert shared.parse_partition_key(mine.partition("a.b", 3)) == ("a.b", 3)
