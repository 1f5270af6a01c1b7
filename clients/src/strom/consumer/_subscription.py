"""What a consumer reads and where it stands: per-partition positions and buffered data.

``SubscriptionState`` is shared by the consumer (which drains it in ``poll``) and the fetcher
(which fills it); both run on one event loop, so no locks. Per partition it keeps two
offsets: ``position``, the next offset ``poll`` returns, and ``fetch_offset``, the next offset
to request; raw fetched bytes between the two wait in ``raw`` and are decoded only when
``poll`` reaches them. ``generation`` changes on every seek or reset, so that a fetch sent
before it is discarded when it comes back.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from strom.consumer.config import check_auto_offset_reset
from strom.errors import ConfigurationError, StromError
from strom.types import ConsumerRecord, TopicPartition

__all__ = ["PartitionState", "SubscriptionState"]


@dataclass(slots=True, eq=False)
class PartitionState:
    """One assigned partition (see the module docstring)."""

    position: int | None = None
    fetch_offset: int | None = None
    #: "earliest" / "latest" while a ListOffsets must set the position, else None.
    reset: str | None = None
    #: A reset to run once the data fetched before an out-of-range answer is delivered.
    reset_after_buffer: str | None = None
    generation: int = 0
    paused: bool = False
    #: A Fetch or ListOffsets for this partition is in flight.
    inflight: bool = False
    #: Not fetched before this loop time (after a retriable error).
    backoff_until: float = 0.0
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    #: Raised by the next poll (then cleared).
    error: StromError | None = None
    raw: deque[bytes] = field(default_factory=deque)
    #: Beside each ``raw`` chunk: its aborted transactions (pid, first offset), or None.
    raw_aborted: deque[list[tuple[int, int]] | None] = field(default_factory=deque)
    raw_bytes: int = 0
    records: list[ConsumerRecord] = field(default_factory=list)
    index: int = 0
    #: The offset after the batches ``records`` came from (compaction may leave a gap).
    records_next: int = 0
    #: Newly assigned by the group: the position comes from the committed offset (OffsetFetch)
    #: before ``auto_offset_reset`` applies; neither fetched nor reset meanwhile.
    awaiting_committed: bool = False
    #: The leader epoch of the record before ``position`` (-1: unknown), committed with it.
    position_epoch: int = -1

    @property
    def has_valid_position(self) -> bool:
        return self.position is not None and self.reset is None

    def buffered(self) -> bool:
        return self.index < len(self.records) or bool(self.raw)

    def clear_buffer(self) -> None:
        self.raw.clear()
        self.raw_aborted.clear()
        self.raw_bytes = 0
        self.records = []
        self.index = 0

    def seek(self, offset: int) -> None:
        self.generation += 1
        self.clear_buffer()
        self.position = self.fetch_offset = offset
        self.position_epoch = -1
        self.reset = self.reset_after_buffer = None
        self.awaiting_committed = False
        self.error = None
        self.backoff_until = 0.0

    def request_reset(self, strategy: str) -> None:
        self.generation += 1
        self.clear_buffer()
        self.position = self.fetch_offset = None
        self.position_epoch = -1
        self.reset = strategy
        self.reset_after_buffer = None
        self.awaiting_committed = False
        self.error = None
        self.backoff_until = 0.0


class SubscriptionState:
    """Assigned partitions, or a subscription (topics or pattern) waiting for an assignment."""

    def __init__(self, auto_offset_reset: str) -> None:
        check_auto_offset_reset(auto_offset_reset)
        self.default_reset = auto_offset_reset
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.listener: Any = None
        #: "assign", "subscribe" or None (nothing yet).
        self.mode: str | None = None
        self.on_change: Callable[[], None] = lambda: None

    # -- what to read --------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self.mode == "subscribe":
            raise ConfigurationError("assign() after subscribe(): call unsubscribe() first")
        wanted = list(dict.fromkeys(partitions))
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"assign() takes TopicPartition objects, got {tp!r}")
        self.mode = "assign" if wanted else None
        self._set_assignment(wanted)

    def subscribe(
        self, topics: Iterable[str] | None, pattern: str | re.Pattern[str] | None, listener: Any
    ) -> None:
        if self.mode == "assign":
            raise ConfigurationError("subscribe() after assign(): call unsubscribe() first")
        if (topics is None) == (pattern is None):
            raise ConfigurationError("subscribe() takes either topics or pattern, not both")
        if pattern is not None:
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self.topics = frozenset()
        else:
            if isinstance(topics, str):
                topics = [topics]
            self.topics = frozenset(topics or ())
            self.pattern = None
            if not self.topics:
                self.unsubscribe()
                return
        self.listener = listener
        self.mode = "subscribe"
        self.on_change()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(topic) is not None
        return topic in self.topics

    def unsubscribe(self) -> None:
        self.mode = None
        self.topics = frozenset()
        self.pattern = None
        self.listener = None
        self._set_assignment([])

    def set_subscribed_assignment(
        self, partitions: Iterable[TopicPartition], *, await_committed: bool = False
    ) -> None:
        """The assignment a subscription resolved to (all partitions, or a group's share).
        ``await_committed``: new partitions wait for their committed offsets."""
        self._set_assignment(list(partitions), await_committed)

    def _set_assignment(
        self, partitions: list[TopicPartition], await_committed: bool = False
    ) -> None:
        old = self.assignment
        self.assignment = {tp: old.get(tp) or self._new_state(await_committed) for tp in partitions}
        self.on_change()

    def _new_state(self, await_committed: bool = False) -> PartitionState:
        if await_committed:
            return PartitionState(awaiting_committed=True)
        # With "none" there is no reset to run: poll raises until seek() gives a position.
        reset = None if self.default_reset == "none" else self.default_reset
        return PartitionState(reset=reset)

    # -- lookups -------------------------------------------------------------------------------

    def state(self, tp: TopicPartition) -> PartitionState:
        found = self.assignment.get(tp)
        if found is None:
            raise ConfigurationError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return found

    def fetchable(self, now: float, max_buffer: int) -> list[TopicPartition]:
        """Partitions to include in the next fetch: positioned, not paused, not in flight or
        backing off, with less than ``max_buffer`` bytes waiting to be decoded."""
        return [
            tp
            for tp, st in self.assignment.items()
            if st.fetch_offset is not None
            and st.reset is None
            and st.reset_after_buffer is None
            and not st.paused
            and not st.inflight
            and st.error is None
            and st.backoff_until <= now
            and st.raw_bytes < max_buffer
        ]

    def buffered_bytes(self) -> int:
        return sum(st.raw_bytes for st in self.assignment.values())
