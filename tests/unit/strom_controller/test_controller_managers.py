"""The controller's managers against in-memory caches: the effects they decide and every
rejection, without etcd or network."""

from __future__ import annotations

import random

import pytest
from controller_unitkit import KEYS, CacheBuilder, commit

from strom.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FencedLeaderEpochError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    NoReassignmentInProgressError,
    NotLeaderOrFollowerError,
    PreferredLeaderNotAvailableError,
    ReassignmentInProgressError,
    TopicAlreadyExistsError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from strom_controller.keys import PartitionRecord, TopicRecord, decode
from strom_controller.managers.configs import ConfigManager
from strom_controller.managers.producer_ids import BLOCK_SIZE, ProducerIdManager
from strom_controller.managers.reassignment import ReassignmentManager
from strom_controller.managers.replication import ReplicationManager
from strom_controller.managers.topics import TopicDefaults, TopicManager
from strom_controller.model import (
    AlterConfigOp,
    AlterPartitionItem,
    ConfigResourceRef,
    NewPartitions,
    NewTopicSpec,
)
from strom_server.etcd.store import Delete, Put


def _topics(defaults: TopicDefaults | None = None) -> TopicManager:
    return TopicManager(
        KEYS, defaults or TopicDefaults(), rng=random.Random(0), new_topic_id=lambda: "tid"
    )


def _three_brokers() -> CacheBuilder:
    return CacheBuilder().broker(1, "a").broker(2, "b").broker(3, "c")


# --- topics ------------------------------------------------------------------------------


def test_create_writes_partition_states_then_the_topic() -> None:
    cache = _three_brokers().cache
    result = _topics().create(cache, NewTopicSpec("t", 3, 2, configs={"retention.ms": "5"}))
    assert [type(e) for e in result.effects] == [Put] * 4
    assert result.effects[-1].key == KEYS.topic("t")  # the topic key comes last
    record = TopicRecord.from_json(result.effects[-1].value)
    assert record.topic_id == "tid" and record.configs == {"retention.ms": "5"}
    for p, replicas in record.partitions.items():
        state = PartitionRecord.from_json(result.effects[p].value)
        assert state == PartitionRecord(replicas[0], 0, replicas, 0)
    assert result.compares[0].key == KEYS.topic("t") and result.compares[0].target == "create"
    assert result.response is not None and result.response.replication_factor == 2
    assert _topics().create(cache, NewTopicSpec("t", 1, 1), validate_only=True).effects == []


def test_create_uses_defaults_and_refuses_bad_requests() -> None:
    cache = _three_brokers().topic("a.b", {0: (1,)}).cache
    topics = _topics(TopicDefaults(num_partitions=4, replication_factor=3))
    made = topics.create(cache, NewTopicSpec("d"))
    assert made.response is not None
    assert (made.response.num_partitions, made.response.replication_factor) == (4, 3)
    bad = [
        (NewTopicSpec("a.b"), TopicAlreadyExistsError),
        (NewTopicSpec("a_b"), InvalidTopicError),
        (NewTopicSpec("no way"), InvalidTopicError),
        (NewTopicSpec("x", 1, 4), InvalidReplicationFactorError),
        (NewTopicSpec("x", 0, 1), InvalidPartitionsError),
        (NewTopicSpec("x", configs={"retention.ms": "x"}), InvalidConfigError),
        (NewTopicSpec("x", configs={"nope": "1"}), InvalidConfigError),
        (NewTopicSpec("x", 1, -1, assignments={0: (1,)}), InvalidRequestError),
        (NewTopicSpec("x", assignments={0: (1, 1)}), InvalidReplicaAssignmentError),
        (NewTopicSpec("x", assignments={0: (7,)}), InvalidReplicaAssignmentError),
        (NewTopicSpec("x", assignments={1: (1,)}), InvalidReplicaAssignmentError),
        (NewTopicSpec("x", assignments={0: (1,), 1: (1, 2)}), InvalidReplicaAssignmentError),
    ]
    for spec, error in bad:
        with pytest.raises(error):
            topics.create(cache, spec)


def test_new_partition_leader_is_the_first_live_replica() -> None:
    cache = _three_brokers().cache
    result = _topics().create(cache, NewTopicSpec("t", assignments={0: (3, 1)}))
    assert PartitionRecord.from_json(result.effects[0].value) == PartitionRecord(3, 0, (3, 1), 0)


def test_delete_and_grow() -> None:
    cache = _three_brokers().topic("t", {0: (1, 2), 1: (2, 3)}).cache
    deleted = _topics().delete(cache, "t")
    assert deleted.effects == [
        Delete(KEYS.topic("t")),
        Delete(KEYS.topic_partitions("t"), prefix=True),
        Delete(KEYS.topic_reassignments("t"), prefix=True),
    ]
    with pytest.raises(UnknownTopicOrPartitionError):
        _topics().delete(cache, "nope")
    grown = _topics().create_partitions(cache, NewPartitions("t", 4))
    record = TopicRecord.from_json(grown.effects[-1].value)
    assert sorted(record.partitions) == [0, 1, 2, 3]
    assert record.partitions[0] == (1, 2) and all(len(r) == 2 for r in record.partitions.values())
    with pytest.raises(InvalidPartitionsError, match="cannot be decreased"):
        _topics().create_partitions(cache, NewPartitions("t", 1))
    with pytest.raises(InvalidPartitionsError, match="already has 2"):
        _topics().create_partitions(cache, NewPartitions("t", 2))
    with pytest.raises(InvalidReplicaAssignmentError):
        _topics().create_partitions(cache, NewPartitions("t", 3, ((1,),)))
    placed = _topics().create_partitions(cache, NewPartitions("t", 3, ((3, 1),)))
    assert TopicRecord.from_json(placed.effects[-1].value).partitions[2] == (3, 1)


# --- configs -----------------------------------------------------------------------------


def test_config_sources_and_alter() -> None:
    cache = (
        _three_brokers()
        .broker_config(segment_ms="1000")
        .topic("t", {0: (1,)}, {"retention.ms": "5"})
        .cache
    )
    configs = ConfigManager(KEYS, {"num.partitions": "1"})
    topic = ConfigResourceRef("topic", "t")
    described = {c.name: c for c in configs.describe(cache, topic)}
    assert (described["retention.ms"].value, described["retention.ms"].source) == ("5", "TOPIC")
    assert described["segment.ms"].source == "BROKER_DEFAULT"
    assert described["segment.bytes"].source == "DEFAULT"
    only = configs.describe(cache, ConfigResourceRef("topic", "t", ("segment.ms",)))
    assert [c.name for c in only] == ["segment.ms"]

    result = configs.alter(
        cache,
        topic,
        [
            AlterConfigOp("retention.ms", "", "delete"),
            AlterConfigOp("cleanup.policy", "compact", "append"),
            AlterConfigOp("max.message.bytes", "2000", "set"),
        ],
    )
    assert TopicRecord.from_json(result.effects[0].value).configs == {
        "cleanup.policy": "delete,compact",
        "max.message.bytes": "2000",
    }
    for bad in (
        AlterConfigOp("retention.ms", "soon", "set"),
        AlterConfigOp("bogus", "1", "set"),
        AlterConfigOp("retention.ms", "1", "append"),
        AlterConfigOp("segment.bytes", "1", "set"),  # below the minimum of 14
    ):
        with pytest.raises(InvalidConfigError):
            configs.alter(cache, topic, [bad])
    broker = configs.alter(
        cache, ConfigResourceRef("broker", ""), [AlterConfigOp("retention.ms", "9", "set")]
    )
    assert broker.effects[0].key == KEYS.broker_config
    assert decode(broker.effects[0].value) == {"segment.ms": "1000", "retention.ms": "9"}
    with pytest.raises(InvalidConfigError, match="read-only"):
        configs.alter(
            cache, ConfigResourceRef("broker", ""), [AlterConfigOp("num.partitions", "2", "set")]
        )
    with pytest.raises(UnknownTopicOrPartitionError):
        configs.describe(cache, ConfigResourceRef("topic", "nope"))
    with pytest.raises(InvalidRequestError):
        configs.describe(cache, ConfigResourceRef("unknown", "x"))


# --- replication -------------------------------------------------------------------------


def _states(builder: CacheBuilder) -> dict[tuple[str, int], PartitionRecord]:
    replication = ReplicationManager(KEYS)
    for result in replication.reconcile(builder.cache):
        commit(builder.cache, result)
    return dict(builder.cache.partitions)


def test_reconcile_moves_leaders_and_shrinks_isr() -> None:
    b = _three_brokers().topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    assert _states(b)[("t", 0)] == PartitionRecord(1, 0, (1, 2, 3), 0)  # nothing to do
    b.remove_broker(1)
    states = _states(b)
    assert states[("t", 0)] == PartitionRecord(2, 1, (2, 3), 1)  # leader moved, epoch bumped
    assert states[("t", 1)] == PartitionRecord(2, 0, (2, 3), 1)  # follower dropped only
    b.remove_broker(2).remove_broker(3)
    states = _states(b)
    assert states[("t", 0)].leader == -1 and states[("t", 0)].isr == (2,)
    b.broker(1)  # not in the ISR: no leader without unclean election
    assert _states(b)[("t", 0)].leader == -1
    b.broker(2)  # the last ISR member returns
    assert _states(b)[("t", 0)] == PartitionRecord(2, 3, (2,), 3)


def test_reconcile_unclean_election_when_enabled() -> None:
    b = _three_brokers().topic("u", {0: (1, 2)}, {"unclean.leader.election.enable": "true"})
    b.state("u", 0, PartitionRecord(1, 0, (1,), 0)).remove_broker(1)
    replication = ReplicationManager(KEYS)
    [result] = replication.reconcile(b.cache)
    assert result.response == PartitionRecord(2, 1, (2,), 1)
    assert replication.unclean_elections == 1


def test_elections() -> None:
    b = _three_brokers().topic("t", {0: (1, 2)}).state("t", 0, PartitionRecord(2, 3, (2, 1), 4))
    replication = ReplicationManager(KEYS)
    elected = replication.elect(b.cache, "t", 0, "preferred")
    assert elected.response == PartitionRecord(1, 4, (2, 1), 5)
    assert replication.needs_preferred_election(b.cache) == [("t", 0)]
    b.state("t", 0, PartitionRecord(2, 3, (2,), 4))
    with pytest.raises(PreferredLeaderNotAvailableError, match="not in the ISR"):
        replication.elect(b.cache, "t", 0, "preferred")
    with pytest.raises(ElectionNotNeededError):
        replication.elect(b.cache, "t", 0, "unclean")
    b.remove_broker(2).remove_broker(1)
    with pytest.raises(EligibleLeadersNotAvailableError):
        replication.elect(b.cache, "t", 0, "unclean")
    b.broker(1)
    assert replication.elect(b.cache, "t", 0, "unclean").response == PartitionRecord(1, 4, (1,), 5)
    with pytest.raises(UnknownTopicOrPartitionError):
        replication.elect(b.cache, "t", 9, "preferred")


def test_alter_partition_checks() -> None:
    b = (
        _three_brokers()
        .topic("t", {0: (1, 2, 3)})
        .state("t", 0, PartitionRecord(1, 2, (1, 2, 3), 5))
    )
    replication = ReplicationManager(KEYS)
    epoch = b.cache.brokers[1].epoch

    def alter(broker: int = 1, isr=(1, 2), leader_epoch: int = 2, partition_epoch: int = 5,
              broker_epoch: int = 0):  # fmt: skip
        item = AlterPartitionItem("t", 0, leader_epoch, tuple(isr), partition_epoch)
        return replication.alter_partition(b.cache, broker, broker_epoch, item)

    assert alter(broker_epoch=epoch).response == PartitionRecord(1, 2, (1, 2), 6)
    assert alter(isr=(1, 2, 3)).effects == []  # no change
    for kwargs, error in [
        ({"broker": 2}, NotLeaderOrFollowerError),
        ({"leader_epoch": 1}, FencedLeaderEpochError),
        ({"leader_epoch": 3}, UnknownLeaderEpochError),
        ({"partition_epoch": 4}, InvalidRequestError),
        ({"isr": (2, 3)}, InvalidRequestError),
        ({"isr": (1, 4)}, InvalidRequestError),
        ({"broker_epoch": epoch + 100}, InvalidRequestError),
    ]:
        with pytest.raises(error):
            alter(**kwargs)


# --- reassignment and producer ids -------------------------------------------------------


def test_reassignment_lifecycle() -> None:
    b = _three_brokers().topic("r", {0: (1, 2)})
    manager = ReassignmentManager(KEYS)
    started = manager.alter(b.cache, "r", 0, (2, 3), 500)
    commit(b.cache, started)
    assert b.cache.topics["r"].partitions[0] == (2, 3, 1)
    ongoing = b.cache.reassignments[("r", 0)]
    assert (ongoing.adding, ongoing.removing, ongoing.throttle_bytes_per_sec) == ((3,), (1,), 500)
    assert manager.completions(b.cache) == []  # 3 is not in sync yet
    with pytest.raises(ReassignmentInProgressError):
        manager.alter(b.cache, "r", 0, (3,))
    state = b.cache.partitions[("r", 0)]
    b.state("r", 0, PartitionRecord(1, state.leader_epoch, (1, 2, 3), state.partition_epoch + 1))
    [done] = manager.completions(b.cache)
    commit(b.cache, done)
    assert b.cache.topics["r"].partitions[0] == (2, 3)
    assert ("r", 0) not in b.cache.reassignments
    final = b.cache.partitions[("r", 0)]
    assert (final.leader, final.isr) == (2, (2, 3)) and final.leader_epoch == 1
    with pytest.raises(NoReassignmentInProgressError):
        manager.alter(b.cache, "r", 0, ())
    commit(b.cache, manager.alter(b.cache, "r", 0, (1,)))
    commit(b.cache, manager.alter(b.cache, "r", 0, ()))  # cancel
    assert b.cache.topics["r"].partitions[0] == (2, 3)
    assert manager.list(b.cache) == []
    with pytest.raises(InvalidReplicaAssignmentError):
        manager.alter(b.cache, "r", 0, (9,))


def test_producer_id_blocks() -> None:
    b = CacheBuilder()
    ids = ProducerIdManager(KEYS)
    assert ids.next_id() is None
    claim = ids.claim_block(b.cache)
    assert claim.response == (0, BLOCK_SIZE)
    commit(b.cache, claim)
    ids.block_claimed(*claim.response)
    assert [ids.next_id() for _ in range(3)] == [0, 1, 2]
    assert ids.claim_block(b.cache).response == (BLOCK_SIZE, 2 * BLOCK_SIZE)
    ids.reset()
    assert ids.next_id() is None
