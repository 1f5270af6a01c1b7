"""The algorithm shared by the "sticky" and "cooperative-sticky" assignors.

Goals, in order: (1) balance — no partition could move to an eligible member that has at
least two fewer partitions than its current one, so members with the same subscription end up
within one partition of each other; (2) stickiness — keep as many partitions as possible with
their previous owner.

Steps: keep every valid previous ownership; hand the remaining partitions (those with the
fewest eligible members first) to the eligible member holding the fewest; then rebalance.
With identical subscriptions, move one partition at a time from the fullest member to the
emptiest: this moves exactly the minimum number of partitions (a member only gives up
partitions while it is above its fair share, and no partition moves twice). With different
subscriptions a full member may reach an empty one only through others, so partitions shift
along the cheapest chain of members, where handing on a partition the giver did not own before
is free and giving up an owned one costs 1; this keeps a cooperative follow-up rebalance from
revoking again.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping

from strom.types import TopicPartition

__all__ = ["resolve_previous_owners", "sticky_assign"]


def resolve_previous_owners(
    claims: Mapping[str, tuple[Iterable[TopicPartition], int]],
    partitions_per_topic: Mapping[str, int],
    member_topics: Mapping[str, set[str]],
) -> dict[TopicPartition, str]:
    """Who owned each partition before: ``claims`` is member -> (partitions it says it owns,
    the generation it got them in). Claims of unsubscribed topics or missing partitions are
    dropped; when several members claim one partition the highest generation wins, and a tie
    at the highest generation leaves it without a previous owner."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for member in sorted(claims):
        partitions, generation = claims[member]
        for tp in partitions:
            if tp.topic not in member_topics.get(member, ()):
                continue
            if not 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                continue
            current = best.get(tp)
            if current is None or generation > current[0]:
                best[tp] = (generation, member)
            elif generation == current[0] and current[1] != member:
                best[tp] = (generation, None)
    return {tp: owner for tp, (_, owner) in best.items() if owner is not None}


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    member_topics: Mapping[str, set[str]],
    previous_owners: Mapping[TopicPartition, str],
) -> dict[str, list[TopicPartition]]:
    """member -> sorted partitions for every member of ``member_topics``. Only topics in
    ``partitions_per_topic`` are assigned; ``previous_owners`` as ``resolve_previous_owners``
    returns it (entries that are no longer valid are ignored)."""
    return _Balancer(partitions_per_topic, member_topics, previous_owners).run()


class _Balancer:
    def __init__(
        self,
        partitions_per_topic: Mapping[str, int],
        member_topics: Mapping[str, set[str]],
        previous_owners: Mapping[TopicPartition, str],
    ) -> None:
        self.members = sorted(member_topics)
        self.topics = {
            m: {t for t in member_topics[m] if t in partitions_per_topic} for m in self.members
        }
        self.eligible: dict[str, list[str]] = {}
        for m in self.members:
            for t in self.topics[m]:
                self.eligible.setdefault(t, []).append(m)
        self.partitions_per_topic = partitions_per_topic
        self.potential = {
            m: sum(partitions_per_topic[t] for t in self.topics[m]) for m in self.members
        }
        self.previous = previous_owners
        self.assignment: dict[str, set[TopicPartition]] = {m: set() for m in self.members}
        # Per member, how many of its partitions belong to each topic: finds a movable
        # partition without scanning the member's whole assignment.
        self.topic_counts: dict[str, Counter[str]] = {m: Counter() for m in self.members}
        # The same, counting only partitions the member did not own before: cheap to move.
        self.fresh_counts: dict[str, Counter[str]] = {m: Counter() for m in self.members}

    def run(self) -> dict[str, list[TopicPartition]]:
        unassigned: list[TopicPartition] = []
        for topic in sorted(self.eligible):
            for p in range(self.partitions_per_topic[topic]):
                tp = TopicPartition(topic, p)
                owner = self.previous.get(tp)
                if owner in self.assignment and topic in self.topics[owner]:
                    self._add(owner, tp)
                else:
                    unassigned.append(tp)
        unassigned.sort(key=lambda tp: (len(self.eligible[tp.topic]), tp))
        identical = len({frozenset(t) for t in self.topics.values()}) <= 1
        for tp in unassigned:
            self._add(self._target(tp), tp)
        rebalance = self._move_one if identical else self._shift_along_path
        while rebalance():
            pass
        return {m: sorted(self.assignment[m]) for m in self.members}

    def _target(self, tp: TopicPartition) -> str:
        """The eligible member holding the fewest partitions; among equals the one with the
        fewest partitions to choose from (the others have more alternatives)."""
        return min(
            self.eligible[tp.topic],
            key=lambda m: (len(self.assignment[m]), self.potential[m], m),
        )

    def _add(self, member: str, tp: TopicPartition) -> None:
        self.assignment[member].add(tp)
        self.topic_counts[member][tp.topic] += 1
        if self.previous.get(tp) != member:
            self.fresh_counts[member][tp.topic] += 1

    def _remove(self, member: str, tp: TopicPartition) -> None:
        self.assignment[member].remove(tp)
        self.topic_counts[member][tp.topic] -= 1
        if self.previous.get(tp) != member:
            self.fresh_counts[member][tp.topic] -= 1

    def _move_one(self) -> bool:
        """Move one partition from the fullest member that can give one to the emptiest
        eligible member with at least two fewer; False when the assignment is balanced."""
        counts = {m: len(self.assignment[m]) for m in self.members}
        by_size = sorted(self.members, key=lambda m: (counts[m], m))
        for donor in reversed(by_size):
            for receiver in by_size:
                if counts[receiver] + 2 > counts[donor]:
                    break
                shared = sorted(self.topics[receiver])
                # A partition the donor did not own before moves first, from any topic.
                for counts_by_topic in (self.fresh_counts, self.topic_counts):
                    for t in shared:
                        if counts_by_topic[donor][t]:
                            self._move(donor, receiver, t)
                            return True
        return False

    def _shift_along_path(self) -> bool:
        """With different subscriptions a member may only reach a much emptier one through
        others: move one partition along the cheapest chain (each link hands one partition to
        the next, so only the two ends change size). False when no chain exists."""
        counts = {m: len(self.assignment[m]) for m in self.members}
        lowest = min(counts.values(), default=0)
        for donor in sorted(self.members, key=lambda m: (-counts[m], m)):
            if counts[donor] < lowest + 2:
                return False
            found = self._cheapest_path(donor, counts)
            if found is not None:
                for giver, taker, topic in reversed(found[1]):
                    self._move(giver, taker, topic)
                return True
        return False

    def _cheapest_path(
        self, donor: str, counts: Mapping[str, int]
    ) -> tuple[int, list[tuple[str, str, str]]] | None:
        """(cost, links (giver, taker, topic)) from ``donor`` to a member with at least two
        fewer partitions: the cheapest path, then the emptiest target. A link costs 1 when the
        giver must give up a partition it owned before the rebalance, 0 otherwise (0-1
        breadth-first search: members come off the queue cheapest first)."""
        cost = {donor: 0}
        via: dict[str, tuple[str, str]] = {}
        done: set[str] = set()
        queue = deque([donor])
        best: tuple[int, int, str] | None = None
        while queue:
            giver = queue.popleft()
            if giver in done:
                continue
            if best is not None and cost[giver] > best[0]:
                break
            done.add(giver)
            if giver != donor and counts[giver] + 2 <= counts[donor]:
                candidate = (cost[giver], counts[giver], giver)
                best = candidate if best is None else min(best, candidate)
            # Free links first: a taker reached for free is not offered a costly link.
            for step, counts_by_topic in ((0, self.fresh_counts), (1, self.topic_counts)):
                for topic, held in sorted(counts_by_topic[giver].items()):
                    if not held:
                        continue
                    for taker in self.eligible[topic]:
                        if taker not in done and cost[giver] + step < cost.get(taker, 1 << 30):
                            cost[taker] = cost[giver] + step
                            via[taker] = (giver, topic)
                            if step:
                                queue.append(taker)
                            else:
                                queue.appendleft(taker)
        return None if best is None else (best[0], self._path(donor, best[2], via))

    @staticmethod
    def _path(
        donor: str, target: str, via: Mapping[str, tuple[str, str]]
    ) -> list[tuple[str, str, str]]:
        path = []
        member = target
        while member != donor:
            giver, topic = via[member]
            path.append((giver, member, topic))
            member = giver
        path.reverse()
        return path

    def _move(self, giver: str, taker: str, topic: str) -> None:
        # Prefer a partition the giver did not own before this rebalance (nobody is consuming
        # it yet), then the smallest.
        tp = min(
            (tp for tp in self.assignment[giver] if tp.topic == topic),
            key=lambda tp: (self.previous.get(tp) == giver, tp),
        )
        self._remove(giver, tp)
        self._add(taker, tp)
