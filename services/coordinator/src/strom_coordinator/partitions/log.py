"""What the coordinator's domain needs from the writer of an internal topic (implemented by the
runtime: ``strom_coordinator.runtime.writer.InternalTopicWriter``, one per internal topic)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["PartitionLog", "Record"]

#: (key, value) of one record; a None value is a tombstone.
Record = tuple[bytes, bytes | None]


class PartitionLog(Protocol):
    """Durable, fenced appends to the partitions of one internal topic.

    Called from the event loop only; concurrent appends to one partition are allowed and are
    written in call order: an append takes its place before its first suspension (the
    transaction manager relies on this to queue a record under a lock and await it after)."""

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Write the records (key, value; None value = tombstone) to ``partition`` as ONE batch
        with acks=all; return once acknowledged. Raises NotCoordinatorError when this instance
        no longer owns the partition (fenced), another StromError otherwise."""
        ...
