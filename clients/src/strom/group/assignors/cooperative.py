"""The "cooperative-sticky" assignor: the sticky assignment, handed out in two rounds.

A partition that moves from one member to another is first left out: the owner sees it
missing from its assignment, revokes it and rejoins, and the follow-up rebalance gives it to
its new member. So no partition is ever owned by two members at once, and members keep
consuming everything that does not move.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from strom.group.assignors.base import PartitionAssignor, RebalanceProtocol
from strom.group.assignors.sticky_eager import NO_GENERATION, assign_sticky
from strom.group.protocol import Assignment, Subscription
from strom.types import TopicPartition

__all__ = ["CooperativeStickyAssignor"]

_GENERATION = struct.Struct(">i")


class CooperativeStickyAssignor(PartitionAssignor):
    """Sticky, for the cooperative protocol (usable by eager members too)."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def __init__(self) -> None:
        self._generation = NO_GENERATION

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        # Like Kafka: the generation rides in the user data too, for members whose
        # subscription version predates the generation_id field.
        return _GENERATION.pack(self._generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._generation = generation_id

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        claims = {m: (list(s.owned_partitions), _generation(s)) for m, s in subscriptions.items()}
        result = assign_sticky(partitions_per_topic, subscriptions, claims)
        owners: dict[TopicPartition, set[str]] = {}
        for member, sub in subscriptions.items():
            for tp in sub.owned_partitions:
                owners.setdefault(tp, set()).add(member)
        return {
            member: Assignment([tp for tp in tps if not owners.get(tp, set()) - {member}])
            for member, tps in result.items()
        }


def _generation(subscription: Subscription) -> int:
    if subscription.generation_id != NO_GENERATION:
        return subscription.generation_id
    data = subscription.user_data
    if data is not None and len(data) == _GENERATION.size:
        generation: int = _GENERATION.unpack(data)[0]
        return generation
    return NO_GENERATION
