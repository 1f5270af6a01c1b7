"""Automatic preferred-leader rebalancing: which partitions to hand back to their preferred
replica (Kafka's ``auto.leader.rebalance.enable`` and ``leader.imbalance.*``).

Every partition has a preferred replica, the first of its replica list; placement spreads
them evenly, so leadership is balanced while preferred replicas lead. Failover moves leaders
away, and a returning broker gets nothing back by itself. Per live broker the imbalance ratio
is (partitions it is preferred for but does not lead) / (partitions it is preferred for); a
broker whose ratio exceeds ``leader.imbalance.per.broker.percentage`` gets back every such
partition where it is alive and in the ISR (a preferred election each). Partitions being
reassigned are left alone: their replica list is in flux and completion moves leadership.

Pure: reads the cache, decides; the runtime (``strom_controller.controller``) elects through
``ReplicationManager.elect``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strom_controller.metadata_cache import MetadataCache

__all__ = ["BrokerImbalance", "leader_imbalance", "preferred_elections_due"]


@dataclass
class BrokerImbalance:
    """One broker's share of preferred leadership."""

    broker: int
    preferred: int = 0
    """Partitions whose preferred replica this broker is."""
    not_leading: list[tuple[str, int]] = field(default_factory=list)
    """Those of them that another broker (or nobody) leads, in topic/partition order."""

    @property
    def ratio(self) -> float:
        return len(self.not_leading) / self.preferred if self.preferred else 0.0


def leader_imbalance(cache: MetadataCache) -> dict[int, BrokerImbalance]:
    """Per live broker that is the preferred replica of some partition, its imbalance."""
    live = cache.live_brokers()
    out: dict[int, BrokerImbalance] = {}
    for topic, record in sorted(cache.topics.items()):
        for p, replicas in sorted(record.partitions.items()):
            state = cache.partitions.get((topic, p))
            if not replicas or state is None or (topic, p) in cache.reassignments:
                continue
            preferred = replicas[0]
            if preferred not in live:
                continue
            entry = out.setdefault(preferred, BrokerImbalance(preferred))
            entry.preferred += 1
            if state.leader != preferred:
                entry.not_leading.append((topic, p))
    return out


def preferred_elections_due(
    cache: MetadataCache, *, enabled: bool, percentage: int
) -> list[tuple[BrokerImbalance, list[tuple[str, int]]]]:
    """Brokers over the threshold, each with the partitions it can take back now (its
    preferred partitions it does not lead, where it is in the ISR); none when ``enabled`` is
    false. Brokers with nothing eligible are left out."""
    if not enabled:
        return []
    due = []
    for broker, imbalance in sorted(leader_imbalance(cache).items()):
        # ratio > percentage / 100, in integers (0.1 * 100 is not exactly 10 in floats)
        if len(imbalance.not_leading) * 100 <= percentage * imbalance.preferred:
            continue
        eligible = [tp for tp in imbalance.not_leading if broker in cache.partitions[tp].isr]
        if eligible:
            due.append((imbalance, eligible))
    return due
