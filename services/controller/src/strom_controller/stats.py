"""Controller metrics through OpenTelemetry (exported on the Prometheus endpoint).

Gauges, computed from the metadata cache when scraped: whether this controller is active, live
brokers, topics, partitions, offline partitions (no leader), under-replicated partitions (ISR
smaller than the replica list) and partitions not led by their preferred replica (Kafka's
PreferredReplicaImbalanceCount); counters of unclean leader elections and of the preferred
elections the automatic leader rebalance ran. Request latency histograms come from
strom_server's interceptor.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from strom_controller.controller import Controller

__all__ = ["watch_controller"]


def _gauge(value: Callable[[], int]) -> Callable[[CallbackOptions], list[Observation]]:
    def callback(_options: CallbackOptions) -> list[Observation]:
        return [Observation(value())]

    return callback


def watch_controller(controller: Controller, meter: metrics.Meter | None = None) -> None:
    """Register the controller's instruments (values read at each scrape)."""
    meter = meter or metrics.get_meter("strom.controller")
    cache = controller.cache

    def offline() -> int:
        return sum(1 for s in cache.partitions.values() if s.leader == -1)

    def under_replicated() -> int:
        return sum(
            1
            for (topic, p), s in cache.partitions.items()
            if topic in cache.topics and len(s.isr) < len(cache.topics[topic].partitions.get(p, ()))
        )

    def preferred_imbalance() -> int:
        count = 0
        for (topic, p), s in cache.partitions.items():
            record = cache.topics.get(topic)
            replicas = record.partitions.get(p, ()) if record else ()
            count += bool(replicas) and s.leader != replicas[0]
        return count

    gauges: list[tuple[str, str, Callable[[], int]]] = [
        ("strom.controller.active", "1 when this controller is the active one",
         lambda: int(controller.is_active)),
        ("strom.controller.brokers", "registered (live) brokers", lambda: len(cache.brokers)),
        ("strom.controller.topics", "topics", lambda: len(cache.topics)),
        ("strom.controller.partitions", "partitions", lambda: len(cache.partitions)),
        ("strom.controller.offline_partitions", "partitions without a leader", offline),
        ("strom.controller.under_replicated_partitions",
         "partitions whose ISR is smaller than their replica list", under_replicated),
        ("strom.controller.preferred_replica_imbalance",
         "partitions not led by their preferred replica", preferred_imbalance),
    ]  # fmt: skip
    for name, description, value in gauges:
        meter.create_observable_gauge(name, callbacks=[_gauge(value)], description=description)
    counters: list[tuple[str, str, Callable[[], int]]] = [
        ("strom.controller.unclean_leader_elections",
         "leaders chosen outside the ISR by this controller",
         lambda: controller.replication.unclean_elections),
        ("strom.controller.auto_leader_rebalance_elections",
         "preferred leader elections run by this controller's automatic leader rebalance",
         lambda: controller.leader_balancer.elections),
    ]  # fmt: skip
    for name, description, value in counters:
        meter.create_observable_counter(name, callbacks=[_gauge(value)], description=description)
