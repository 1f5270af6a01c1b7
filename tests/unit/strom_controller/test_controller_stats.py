"""The controller's metrics, read through an in-memory OpenTelemetry reader."""

from __future__ import annotations

from controller_unitkit import KEYS
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from strom_controller.config import ControllerConfig
from strom_controller.controller import Controller
from strom_controller.keys import BrokerRecord, PartitionRecord, TopicRecord
from strom_controller.stats import watch_controller
from strom_server.etcd.store import Put


def test_gauges_follow_the_cache() -> None:
    controller = Controller(ControllerConfig(etcd_prefix=KEYS.prefix))
    controller.cache.apply_ops(
        [
            Put(KEYS.broker(1), BrokerRecord(1, "h", 1).to_json()),
            Put(KEYS.topic("t"), TopicRecord("id", {0: (1, 2), 1: (1,)}).to_json()),
            Put(KEYS.partition("t", 0), PartitionRecord(1, 0, (1,), 0).to_json()),
            Put(KEYS.partition("t", 1), PartitionRecord(-1, 1, (1,), 1).to_json()),
        ],
        1,
    )
    reader = InMemoryMetricReader()
    watch_controller(controller, MeterProvider(metric_readers=[reader]).get_meter("test"))
    data = reader.get_metrics_data()
    values = {
        m.name: m.data.data_points[0].value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert values["strom.controller.active"] == 0
    assert values["strom.controller.brokers"] == 1
    assert values["strom.controller.partitions"] == 2
    assert values["strom.controller.offline_partitions"] == 1
    assert values["strom.controller.under_replicated_partitions"] == 1
    assert values["strom.controller.unclean_leader_elections"] == 0
