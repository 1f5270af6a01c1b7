"""The cluster overview: nodes, leadership spread and partition health in one summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strom.types import ClusterDescription, ConsumerGroupListing, TopicDescription
from strom_console.topics import health

__all__ = ["NodeRow", "Overview", "summarize"]


@dataclass(frozen=True, slots=True)
class NodeRow:
    node_id: int
    address: str
    rack: str
    leaders: int
    replicas: int


@dataclass(frozen=True, slots=True)
class Overview:
    cluster_id: str
    controller: str  # the active controller's address, "" when none is known
    nodes: list[NodeRow]
    topics: int
    internal_topics: int
    partitions: int
    under_replicated: int
    offline: int
    under_min_isr: int
    rate_in: float | None
    groups: int
    group_states: dict[str, int]


def summarize(
    cluster: ClusterDescription,
    topics: Sequence[TopicDescription],
    groups: Sequence[ConsumerGroupListing],
    *,
    min_isr: Mapping[str, int] | None = None,
    rates: Mapping[str, float] | None = None,
) -> Overview:
    leaders: Counter[int] = Counter()
    replicas: Counter[int] = Counter()
    partitions = under = offline = under_min = 0
    for topic in topics:
        wanted = (min_isr or {}).get(topic.name, 1)
        for p in topic.partitions:
            partitions += 1
            state = health(p, wanted)
            under += state.under_replicated
            offline += state.offline
            under_min += state.under_min_isr
            if p.leader >= 0:
                leaders[p.leader] += 1
            replicas.update(p.replicas)
    nodes = [
        NodeRow(b.node_id, b.address, b.rack, leaders[b.node_id], replicas[b.node_id])
        for b in sorted(cluster.brokers, key=lambda b: b.node_id)
    ]
    return Overview(
        cluster_id=cluster.cluster_id,
        controller=cluster.controller.address if cluster.controller is not None else "",
        nodes=nodes,
        topics=sum(not t.is_internal for t in topics),
        internal_topics=sum(t.is_internal for t in topics),
        partitions=partitions,
        under_replicated=under,
        offline=offline,
        under_min_isr=under_min,
        rate_in=sum(rates.values()) if rates else None,
        groups=len(groups),
        group_states=dict(sorted(Counter(g.state for g in groups).items())),
    )
