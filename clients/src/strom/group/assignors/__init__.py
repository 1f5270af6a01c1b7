"""Client-side partition assignors: the group leader runs one to split the partitions.

``range`` and ``roundrobin`` are stateless; ``sticky`` keeps partitions where they were
(eager protocol); ``cooperative-sticky`` does the same for the cooperative protocol, leaving
moving partitions out until their owner has revoked them. See docs/assignors.md.
"""

from __future__ import annotations

from strom.errors import ConfigurationError
from strom.group.assignors.base import PartitionAssignor, RebalanceProtocol
from strom.group.assignors.cooperative import CooperativeStickyAssignor
from strom.group.assignors.range import RangeAssignor
from strom.group.assignors.roundrobin import RoundRobinAssignor
from strom.group.assignors.sticky_eager import StickyAssignor

__all__ = [
    "ASSIGNORS",
    "CooperativeStickyAssignor",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assignor_for",
]

ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    cls.name: cls
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def assignor_for(name_or_instance: str | PartitionAssignor) -> PartitionAssignor:
    """A new assignor for a known name, or the given instance itself."""
    if isinstance(name_or_instance, PartitionAssignor):
        return name_or_instance
    cls = ASSIGNORS.get(name_or_instance)
    if cls is None:
        raise ConfigurationError(
            f"unknown partition assignor {name_or_instance!r}; known: {', '.join(ASSIGNORS)}"
        )
    return cls()
