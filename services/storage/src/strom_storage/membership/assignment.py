"""What a node should host, computed from the controller's metadata (pure; no etcd here).

Input: the decoded values of ``P/topics/<name>`` and ``P/partitions/<topic>/<p>``
(strom_server.etcd.keys). Output: for every partition whose replica list holds this node,
its role (leader or follower), leader epoch and the topic's config overrides (the caller applies
them over the broker defaults of ``P/config/brokers``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PartitionAssignment", "assignments_for"]

NO_LEADER = -1


@dataclass(frozen=True)
class PartitionAssignment:
    """One partition as the controller assigned it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


def assignments_for(
    node_id: int,
    topics: Mapping[str, Mapping[str, Any]],
    states: Mapping[tuple[str, int], Mapping[str, Any]],
) -> dict[tuple[str, int], PartitionAssignment]:
    """The partitions ``node_id`` must host, keyed by (topic, partition)."""
    hosted: dict[tuple[str, int], PartitionAssignment] = {}
    for name, topic in topics.items():
        configs = dict(topic.get("configs", {}))
        for index_text, replicas in topic.get("partitions", {}).items():
            replica_ids = tuple(int(r) for r in replicas)
            if node_id not in replica_ids:
                continue
            index = int(index_text)
            state = states.get((name, index), {})
            hosted[(name, index)] = PartitionAssignment(
                topic=name,
                partition=index,
                replicas=replica_ids,
                leader=int(state.get("leader", NO_LEADER)),
                leader_epoch=int(state.get("leader_epoch", 0)),
                isr=tuple(int(r) for r in state.get("isr", ())),
                partition_epoch=int(state.get("partition_epoch", -1)),
                configs=configs,
            )
    return hosted
