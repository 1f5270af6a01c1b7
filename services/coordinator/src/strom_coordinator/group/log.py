"""What the group manager needs from the __consumer_offsets writer (implemented by the process)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["GroupLog"]


class GroupLog(Protocol):
    """Durable, fenced appends to the partitions of __consumer_offsets."""

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Write the records (key, value; None value = tombstone) to __consumer_offsets-<partition>
        as ONE batch with acks=all; return once acknowledged. Raises NotCoordinatorError when this
        instance no longer owns the partition (fenced), another StromError otherwise."""
        ...
