"""Which partitions of an internal topic this instance hosts, and which partition a key is in.

A key (a group id, a transactional id) belongs to partition
``abs(hashCode(key)) % partitions`` of its topic (Java's ``String.hashCode``, as Kafka).
``HostedPartitions`` knows the partitions being loaded and those being served: a request for a
key whose partition is loading answers COORDINATOR_LOAD_IN_PROGRESS, one for a partition hosted
elsewhere NOT_COORDINATOR, and so does every key while ``session`` (the process's etcd
session lease) may have expired: another coordinator may have taken the partition over.
It also runs the load life cycle the runtime drives when it takes a partition over or gives
it up (``begin_loading``, ``replay`` of every record up to the high watermark,
``finish_loading``; ``unload``: ``strom_coordinator.runtime.ownership.PartitionHost``) and
hands each step to a ``PartitionState``, the in-memory state those records rebuild (groups and
committed offsets for ``__consumer_offsets``).

Safety: not thread-safe, call it from the event loop; no method awaits, so each one is atomic
with respect to other coroutines.
"""

from __future__ import annotations

from typing import Protocol

from strom.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from strom_server.etcd.session_lease import SessionLease

__all__ = ["HostedPartitions", "HostedShard", "PartitionState", "java_string_hash", "key_partition"]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit wrap-around)."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def key_partition(key: str, partitions: int) -> int:
    """The partition of ``key`` among ``partitions``: ``abs(hashCode(key)) % partitions``, as
    Kafka's coordinators (Java's ``Integer.MIN_VALUE`` counts as 0)."""
    h = java_string_hash(key)
    return (0 if h == -(2**31) else abs(h)) % partitions


class PartitionState(Protocol):
    """The in-memory state rebuilt from the records of the hosted partitions."""

    def drop_partition(self, partition: int) -> None:
        """Forget everything of ``partition`` (it is being reloaded or given up)."""
        ...

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> None:
        """Apply one record of ``partition`` read while loading it, in offset order."""
        ...

    def partition_loaded(self, partition: int) -> None:
        """Every record of ``partition`` below its high watermark was replayed: serve it."""
        ...


class HostedPartitions:
    """The loading and served partitions of ``topic`` (see the module docstring).

    ``key_kind`` names the keys in NOT_COORDINATOR messages ("group")."""

    def __init__(self, state: PartitionState, *, topic: str, key_kind: str) -> None:
        self.topic = topic
        self._state = state
        self._key_kind = key_kind
        #: None until the process knows how many partitions the topic has.
        self.partition_count: int | None = None
        self._loading: set[int] = set()
        self._served: set[int] = set()
        #: The process's etcd session; None: not checked (no etcd, as in unit tests).
        self.session: SessionLease | None = None

    # -- routing -----------------------------------------------------------------------------

    def partition_for(self, key: str) -> int:
        """The partition of ``key`` (Kafka's formula); COORDINATOR_NOT_AVAILABLE while the
        partition count is unknown."""
        if not self.partition_count:
            raise CoordinatorNotAvailableError(f"the {self.topic} partition count is unknown")
        return key_partition(key, self.partition_count)

    def route(self, key: str) -> int:
        """The partition of ``key`` if this instance serves it; raises
        COORDINATOR_LOAD_IN_PROGRESS while it loads, NOT_COORDINATOR if it is not hosted here."""
        partition = self.partition_for(key)
        session = self.session
        if session is not None and session.expired() and partition in self.owned_partitions():
            raise NotCoordinatorError(
                f"this coordinator {session.lapse()}: another coordinator may own "
                f"{self.topic}-{partition} now"
            )
        if partition in self._loading:
            raise CoordinatorLoadInProgressError(f"loading {self.topic}-{partition}")
        if partition not in self._served:
            raise NotCoordinatorError(f"this coordinator does not own {self._key_kind} {key}")
        return partition

    def is_served(self, partition: int) -> bool:
        """Whether ``partition`` is loaded and served (not merely loading)."""
        return partition in self._served

    def owned_partitions(self) -> set[int]:
        """Partitions being loaded or served."""
        return self._served | self._loading

    # -- load life cycle (called by the process) ---------------------------------------------

    def begin_loading(self, partition: int) -> None:
        """Start reading ``partition`` (its state is dropped first); its keys answer
        COORDINATOR_LOAD_IN_PROGRESS until ``finish_loading``."""
        self._state.drop_partition(partition)
        self._served.discard(partition)
        self._loading.add(partition)

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> None:
        """Apply one record of ``partition`` read during loading."""
        self._state.replay(partition, key, value, timestamp_ms)

    def finish_loading(self, partition: int) -> None:
        """Serve ``partition``: every record up to its high watermark was replayed."""
        self._loading.discard(partition)
        self._served.add(partition)
        self._state.partition_loaded(partition)

    def unload(self, partition: int) -> None:
        """Stop serving ``partition`` and drop its state."""
        self._loading.discard(partition)
        self._served.discard(partition)
        self._state.drop_partition(partition)


class HostedShard:
    """What a shard (the group or the transaction manager) answers the runtime about its
    partitions, from its ``HostedPartitions`` (``_partitions``): written once for both."""

    _partitions: HostedPartitions

    @property
    def partition_count(self) -> int | None:
        """Partitions of the shard's topic; None until the process knows."""
        return self._partitions.partition_count

    @partition_count.setter
    def partition_count(self, count: int | None) -> None:
        self._partitions.partition_count = count

    def use_session(self, session: SessionLease) -> None:
        """Answer NOT_COORDINATOR for every key while ``session`` may have expired."""
        self._partitions.session = session

    def partition_for(self, key: str) -> int:
        """The partition of ``key`` (a group id, a transactional id): Kafka's formula."""
        return self._partitions.partition_for(key)

    def begin_loading(self, partition: int) -> None:
        """Start reading ``partition``; its keys answer COORDINATOR_LOAD_IN_PROGRESS."""
        self._partitions.begin_loading(partition)

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> None:
        """Apply one record of ``partition`` read during loading (malformed ones are skipped)."""
        self._partitions.replay(partition, key, value, timestamp_ms)

    def finish_loading(self, partition: int) -> None:
        """Serve ``partition``."""
        self._partitions.finish_loading(partition)

    def unload(self, partition: int) -> None:
        """Stop serving ``partition``."""
        self._partitions.unload(partition)

    def owned_partitions(self) -> set[int]:
        """Partitions being loaded or served."""
        return self._partitions.owned_partitions()
