"""The automatic leader rebalance's decision (which partitions get a preferred election), its
settings and its metrics, against in-memory caches: no etcd, no network."""

from __future__ import annotations

import pytest
from controller_unitkit import KEYS, CacheBuilder, commit
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from strom.errors import ConfigurationError
from strom_controller.config import ControllerConfig
from strom_controller.controller import Controller
from strom_controller.keys import PartitionRecord, ReassignmentRecord
from strom_controller.managers.leader_balance import leader_imbalance, preferred_elections_due
from strom_controller.managers.replication import ReplicationManager
from strom_controller.metadata_cache import MetadataCache
from strom_controller.stats import watch_controller
from strom_server.runtime.config import load_config


def _due(cache: MetadataCache, percentage: int = 10, *, enabled: bool = True) -> dict:
    """{broker: partitions to elect} as decided."""
    return {
        imbalance.broker: partitions
        for imbalance, partitions in preferred_elections_due(
            cache, enabled=enabled, percentage=percentage
        )
    }


def _led_by(b: CacheBuilder, leader: int, topic: str, *partitions: int, isr=(1, 2, 3)) -> None:
    for p in partitions:
        b.state(topic, p, PartitionRecord(leader, 1, tuple(isr), 1))


def _ten_preferred_by_1() -> CacheBuilder:
    """Brokers 1-3; broker 1 is the preferred replica of t-0..t-9, broker 2 of u-0."""
    b = CacheBuilder().broker(1).broker(2).broker(3)
    b.topic("t", {p: (1, 2, 3) for p in range(10)})
    return b.topic("u", {0: (2, 1, 3)})


def test_balanced_leadership_needs_nothing() -> None:
    b = _ten_preferred_by_1()
    assert _due(b.cache) == {}
    shares = leader_imbalance(b.cache)
    assert {k: (v.preferred, v.not_leading) for k, v in shares.items()} == {
        1: (10, []),
        2: (1, []),
    }


def test_imbalance_above_the_threshold_elects_every_eligible_partition() -> None:
    b = _ten_preferred_by_1()
    _led_by(b, 2, "t", 3, 7)  # 2 of 10 = 20% > 10%
    assert _due(b.cache) == {1: [("t", 3), ("t", 7)]}
    assert leader_imbalance(b.cache)[1].ratio == pytest.approx(0.2)
    # The elections the runtime then runs hand leadership back to broker 1.
    replication = ReplicationManager(KEYS)
    for topic, p in _due(b.cache)[1]:
        result = replication.elect(b.cache, topic, p, "preferred")
        assert result.response is not None and result.response.leader == 1
        assert result.response.leader_epoch == 2
        commit(b.cache, result)
    assert _due(b.cache) == {}


def test_imbalance_at_or_below_the_threshold_is_tolerated() -> None:
    b = _ten_preferred_by_1()
    _led_by(b, 2, "t", 3)  # 1 of 10 = exactly 10%: not above
    assert _due(b.cache) == {}
    assert _due(b.cache, percentage=9) == {1: [("t", 3)]}
    _led_by(b, 3, "t", 4)  # 2 of 10
    assert _due(b.cache, percentage=20) == {}
    assert _due(b.cache, percentage=19) == {1: [("t", 3), ("t", 4)]}
    assert _due(b.cache, percentage=0) == {1: [("t", 3), ("t", 4)]}


def test_each_broker_is_judged_on_its_own_share() -> None:
    b = _ten_preferred_by_1()
    _led_by(b, 3, "u", 0)  # broker 2: 1 of 1 = 100%
    _led_by(b, 2, "t", 0)  # broker 1: 1 of 10 = 10%
    assert _due(b.cache) == {2: [("u", 0)]}
    assert _due(b.cache, percentage=5) == {1: [("t", 0)], 2: [("u", 0)]}
    assert _due(b.cache, percentage=100) == {}


def test_a_dead_preferred_replica_is_not_elected() -> None:
    b = _ten_preferred_by_1()
    _led_by(b, 2, "t", 0, 1, 2, isr=(2, 3))
    b.remove_broker(1)
    assert _due(b.cache) == {}
    assert 1 not in leader_imbalance(b.cache)  # only live brokers are judged
    b.broker(1)  # back, but not in the ISR yet
    assert leader_imbalance(b.cache)[1].not_leading == [("t", 0), ("t", 1), ("t", 2)]
    assert _due(b.cache) == {}


def test_only_partitions_whose_preferred_replica_is_in_the_isr() -> None:
    b = _ten_preferred_by_1()
    _led_by(b, 2, "t", 0, 1, isr=(2, 3))  # broker 1 has not caught up on these
    _led_by(b, 2, "t", 2, isr=(2, 3, 1))  # but has on this one
    assert _due(b.cache) == {1: [("t", 2)]}  # 3 of 10 count towards the ratio, 1 is eligible


def test_leaderless_partitions_count_and_reassignments_are_left_alone() -> None:
    b = _ten_preferred_by_1()
    _led_by(b, -1, "t", 5, isr=(1,))  # leaderless but broker 1 is in the ISR
    b._put(KEYS.reassignment("t", 6), ReassignmentRecord((1, 2, 3), (), ()).to_json())
    _led_by(b, 2, "t", 6)  # being reassigned: neither counted nor elected
    assert leader_imbalance(b.cache)[1].preferred == 9
    assert _due(b.cache, percentage=12) == {}  # 1 of 9 = 11%
    assert _due(b.cache, percentage=11) == {1: [("t", 5)]}


def test_disabled_decides_nothing() -> None:
    b = _ten_preferred_by_1()
    _led_by(b, 2, "t", *range(10))
    assert len(_due(b.cache)[1]) == 10
    assert _due(b.cache, enabled=False) == {}


def test_settings() -> None:
    default = load_config(ControllerConfig, [], env={})
    assert default.auto_leader_rebalance_enable is True
    assert default.leader_imbalance_check_interval_seconds == 300
    assert default.leader_imbalance_per_broker_percentage == 10
    config = load_config(
        ControllerConfig,
        ["--no-auto.leader.rebalance.enable", "--leader.imbalance.check.interval.seconds", "1",
         "--leader.imbalance.per.broker.percentage", "25"],
        env={},
    )  # fmt: skip
    assert config.auto_leader_rebalance_enable is False
    assert config.leader_imbalance_check_interval_seconds == 1
    assert config.leader_imbalance_per_broker_percentage == 25
    env = {"STROM_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE": "0"}
    assert load_config(ControllerConfig, [], env=env).leader_imbalance_per_broker_percentage == 0
    for bad in (["--leader.imbalance.check.interval.seconds", "0"],
                ["--leader.imbalance.per.broker.percentage", "101"]):  # fmt: skip
        with pytest.raises(ConfigurationError, match=r"leader\.imbalance"):
            load_config(ControllerConfig, bad, env={})


def test_metrics() -> None:
    controller = Controller(ControllerConfig(etcd_prefix=KEYS.prefix))
    b = _ten_preferred_by_1()
    _led_by(b, 2, "t", 3, 7)
    _led_by(b, -1, "u", 0)
    controller.cache = b.cache  # as if the watch had delivered this metadata
    controller.leader_balancer.elections = 4
    reader = InMemoryMetricReader()
    watch_controller(controller, MeterProvider(metric_readers=[reader]).get_meter("test"))
    values = {
        m.name: m.data.data_points[0].value
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert values["strom.controller.preferred_replica_imbalance"] == 3
    assert values["strom.controller.auto_leader_rebalance_elections"] == 4
    assert values["strom.controller.unclean_leader_elections"] == 0
