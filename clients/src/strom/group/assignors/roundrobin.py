"""The "roundrobin" assignor: all partitions dealt out one by one over all members."""

from __future__ import annotations

from collections.abc import Mapping

from strom.group.assignors.base import PartitionAssignor
from strom.group.assignors.common import (
    empty_assignments,
    subscribed_partitions,
    to_assignments,
)
from strom.group.protocol import Assignment, Subscription


class RoundRobinAssignor(PartitionAssignor):
    """Every partition of every subscribed topic, sorted, goes to the next member (sorted by
    member id, in a circle) that subscribes to its topic."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        result = empty_assignments(subscriptions)
        members = sorted(subscriptions)
        topics = {m: set(subscriptions[m].topics) for m in members}
        cursor = 0
        for tp in subscribed_partitions(partitions_per_topic, subscriptions):
            while tp.topic not in topics[members[cursor]]:
                cursor = (cursor + 1) % len(members)
            result[members[cursor]].append(tp)
            cursor = (cursor + 1) % len(members)
        return to_assignments(result)
