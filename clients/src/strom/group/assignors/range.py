"""The "range" assignor: each topic is cut into contiguous ranges, one per subscribed member."""

from __future__ import annotations

from collections.abc import Mapping

from strom.group.assignors.base import PartitionAssignor
from strom.group.assignors.common import empty_assignments, members_by_topic, to_assignments
from strom.group.protocol import Assignment, Subscription
from strom.types import TopicPartition


class RangeAssignor(PartitionAssignor):
    """Per topic, the members subscribed to it (sorted by member id) get contiguous ranges of
    its partitions; the first ``partitions % members`` of them get one more."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        result = empty_assignments(subscriptions)
        for topic, members in members_by_topic(partitions_per_topic, subscriptions).items():
            per_member, extra = divmod(partitions_per_topic[topic], len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                result[member].extend(
                    TopicPartition(topic, p) for p in range(start, start + length)
                )
        return to_assignments(result)
