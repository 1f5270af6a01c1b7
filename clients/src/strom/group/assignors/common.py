"""Helpers the assignors share."""

from __future__ import annotations

from collections.abc import Mapping

from strom.group.protocol import Assignment, Subscription
from strom.types import TopicPartition


def empty_assignments(subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
    return {member: [] for member in subscriptions}


def to_assignments(result: Mapping[str, list[TopicPartition]]) -> dict[str, Assignment]:
    return {member: Assignment(sorted(tps)) for member, tps in result.items()}


def members_by_topic(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> dict[str, list[str]]:
    """Topic (sorted, only those with a known partition count) -> its sorted subscribers."""
    by_topic: dict[str, list[str]] = {}
    for member in sorted(subscriptions):
        for topic in set(subscriptions[member].topics):
            if topic in partitions_per_topic:
                by_topic.setdefault(topic, []).append(member)
    return {topic: by_topic[topic] for topic in sorted(by_topic)}


def subscribed_partitions(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> list[TopicPartition]:
    """Every partition of every topic some member subscribes to, sorted."""
    topics = sorted(members_by_topic(partitions_per_topic, subscriptions))
    return [TopicPartition(t, p) for t in topics for p in range(partitions_per_topic[t])]
