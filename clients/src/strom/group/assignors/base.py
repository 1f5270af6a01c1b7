"""The client-side partition assignor interface (Kafka's ConsumerPartitionAssignor)."""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping

from strom.group.protocol import Assignment, Subscription

__all__ = ["PartitionAssignor", "RebalanceProtocol"]


class RebalanceProtocol(enum.Enum):
    """EAGER: every member revokes everything before rejoining. COOPERATIVE: members keep
    their partitions across a rebalance and only give up the ones moving elsewhere."""

    EAGER = "eager"
    COOPERATIVE = "cooperative"


class PartitionAssignor(abc.ABC):
    """Runs on the group leader: turns every member's subscription into its assignment."""

    name: str
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """Opaque bytes this member sends in its subscription (None by default)."""
        return None

    @abc.abstractmethod
    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """member id -> assignment for every member in ``subscriptions`` (possibly empty).
        Topics missing from ``partitions_per_topic`` are skipped."""

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:  # noqa: B027
        """Called on every member with what it got from the leader in this generation."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
