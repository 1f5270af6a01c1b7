"""The cluster overview: controllers, nodes (leadership spread, disk use), partition health
and rates in one summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strom.types import ClusterDescription, ConsumerGroupListing, TopicDescription
from strom_console.disk import NodeDisk
from strom_console.topics import health

__all__ = ["ControllerRow", "NodeRow", "Overview", "summarize"]


@dataclass(frozen=True, slots=True)
class NodeRow:
    node_id: int
    address: str
    rack: str
    leaders: int
    replicas: int
    disk: NodeDisk | None = None  # None: log dirs not sampled (yet)


@dataclass(frozen=True, slots=True)
class ControllerRow:
    node_id: int
    address: str
    active: bool


@dataclass(frozen=True, slots=True)
class Overview:
    cluster_id: str
    controller: str  # the active controller's address, "" when none is known
    controllers: list[ControllerRow]  # every running one (the active first), when reported
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
    bytes_in: float | None = None
    rate_out: float | None = None
    bytes_out: float | None = None
    used_bytes: int | None = None  # every replica on every node
    log_dirs_error: str = ""  # why disk use is not shown


def _total(values: Mapping[str, float] | None) -> float | None:
    return sum(values.values()) if values else None


def _controllers(cluster: ClusterDescription) -> list[ControllerRow]:
    active = cluster.controller
    rows = [
        ControllerRow(c.node_id, c.address, active is not None and c.address == active.address)
        for c in cluster.controllers
    ]
    if active is not None and not any(r.active for r in rows):
        rows.append(ControllerRow(active.node_id, active.address, True))
    return sorted(rows, key=lambda r: (not r.active, r.node_id))


def summarize(
    cluster: ClusterDescription,
    topics: Sequence[TopicDescription],
    groups: Sequence[ConsumerGroupListing],
    *,
    min_isr: Mapping[str, int] | None = None,
    rates: Mapping[str, float] | None = None,
    disks: Mapping[int, NodeDisk] | None = None,
    bytes_in: Mapping[str, float] | None = None,
    rates_out: Mapping[str, float] | None = None,
    bytes_out: Mapping[str, float] | None = None,
    log_dirs_error: str = "",
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
    found = disks or {}
    nodes = [
        NodeRow(
            b.node_id,
            b.address,
            b.rack,
            leaders[b.node_id],
            replicas[b.node_id],
            found.get(b.node_id),
        )
        for b in sorted(cluster.brokers, key=lambda b: b.node_id)
    ]
    return Overview(
        cluster_id=cluster.cluster_id,
        controller=cluster.controller.address if cluster.controller is not None else "",
        controllers=_controllers(cluster),
        nodes=nodes,
        topics=sum(not t.is_internal for t in topics),
        internal_topics=sum(t.is_internal for t in topics),
        partitions=partitions,
        under_replicated=under,
        offline=offline,
        under_min_isr=under_min,
        rate_in=_total(rates),
        groups=len(groups),
        group_states=dict(sorted(Counter(g.state for g in groups).items())),
        bytes_in=_total(bytes_in),
        rate_out=_total(rates_out),
        bytes_out=_total(bytes_out),
        used_bytes=sum(d.used_bytes for d in found.values()) if found else None,
        log_dirs_error=log_dirs_error,
    )
