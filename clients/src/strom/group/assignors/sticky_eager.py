"""The eager "sticky" assignor: balanced, and keeps partitions where they were.

With the eager protocol members revoke everything before joining, so each member remembers
its last assignment and generation and sends them as subscription user data, in the layout
of Kafka's StickyAssignor (no version prefix; v0 lacks the generation)::

    user_data := previous_assignment:[topic:string partitions:[int32]] generation:int32
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from strom.errors import InconsistentGroupProtocolError
from strom.group._wire import Reader, Writer
from strom.group.assignors.base import PartitionAssignor
from strom.group.assignors.sticky import resolve_previous_owners, sticky_assign
from strom.group.protocol import (
    Assignment,
    Subscription,
    read_topic_partitions,
    write_topic_partitions,
)
from strom.types import TopicPartition

__all__ = ["StickyAssignor", "decode_sticky_user_data", "encode_sticky_user_data"]

log = logging.getLogger(__name__)

NO_GENERATION = -1


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    w = Writer()
    write_topic_partitions(w, sorted(partitions))
    w.int32(generation)
    return w.getvalue()


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    """(previous assignment, generation); the generation is -1 for version 0 data.
    Raises InconsistentGroupProtocolError when ``data`` is neither version."""
    r = Reader(data, "sticky assignor user data")
    partitions = read_topic_partitions(r, "previous_assignment")
    if r.remaining == 0:
        return partitions, NO_GENERATION
    generation = r.int32("generation")
    r.expect_end()
    return partitions, generation


def member_claims(
    subscriptions: Mapping[str, Subscription], *, from_user_data: bool
) -> dict[str, tuple[list[TopicPartition], int]]:
    """member -> (partitions it owned, generation): from the sticky user data when asked and
    present, else from the subscription's owned partitions and generation."""
    claims: dict[str, tuple[list[TopicPartition], int]] = {}
    for member, sub in subscriptions.items():
        if from_user_data and sub.user_data:
            try:
                claims[member] = decode_sticky_user_data(sub.user_data)
                continue
            except InconsistentGroupProtocolError as exc:
                log.warning("ignoring the previous assignment of member %s: %s", member, exc)
                claims[member] = ([], NO_GENERATION)
                continue
        claims[member] = (list(sub.owned_partitions), sub.generation_id)
    return claims


def assign_sticky(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    claims: Mapping[str, tuple[list[TopicPartition], int]],
) -> dict[str, list[TopicPartition]]:
    member_topics = {m: set(s.topics) for m, s in subscriptions.items()}
    previous = resolve_previous_owners(claims, partitions_per_topic, member_topics)
    return sticky_assign(partitions_per_topic, member_topics, previous)


class StickyAssignor(PartitionAssignor):
    """Eager and sticky: a balanced assignment that moves as few partitions as possible."""

    name = "sticky"

    def __init__(self) -> None:
        self._last: list[TopicPartition] | None = None
        self._generation = NO_GENERATION

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        if self._last is None:
            return None
        return encode_sticky_user_data(self._last, self._generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._last = list(assignment.partitions)
        self._generation = generation_id

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        claims = member_claims(subscriptions, from_user_data=True)
        result = assign_sticky(partitions_per_topic, subscriptions, claims)
        return {m: Assignment(tps) for m, tps in result.items()}
