"""What the runtime hosts: one ``CoordinatorShard`` per internal topic (the group manager over
``__consumer_offsets``, the transaction manager over ``__transaction_state``), as Kafka's
CoordinatorRuntime hosts its CoordinatorShards.

A shard is plain domain state: it is given the records of each partition the runtime takes
over (``begin_loading``, ``replay`` up to the high watermark, ``finish_loading``), forgets a
partition the runtime gives up (``unload``), says which partition holds a key
(``partition_for``), refuses every key while the process's etcd session may have lapsed
(``use_session``) and stops its own background work in ``close``. It writes through the
``PartitionLog`` the runtime built for it (``ShardContext.log``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from strom_coordinator.partitions.log import PartitionLog
from strom_coordinator.runtime.ownership import PartitionHost
from strom_server.etcd.session_lease import SessionLease

__all__ = ["CoordinatorShard", "ShardContext", "Tick"]


class CoordinatorShard(PartitionHost, Protocol):
    """One internal topic's state, hosted by the runtime (see the module docstring)."""

    def partition_for(self, key: str) -> int:
        """The partition of the topic that holds ``key`` (Kafka's formula)."""
        ...

    def use_session(self, session: SessionLease) -> None:
        """Answer NOT_COORDINATOR for every key while ``session`` may have expired."""
        ...

    async def close(self) -> None:
        """Stop the shard's own background work (the process is stopping)."""
        ...


@dataclass(frozen=True)
class ShardContext:
    """What the runtime hands a shard it builds."""

    #: The fenced acks=all writer of the shard's topic.
    log: PartitionLog
    #: This instance's owner epoch of a partition (None when it does not own it).
    owner_epoch: Callable[[int], int | None]
    #: Give a partition up: the shard saw a newer owner (a marker refused as fenced).
    fenced: Callable[[int], None]


@dataclass(frozen=True)
class Tick:
    """A periodic job (expiry, timeouts): ``loop()`` runs from start until the runtime closes."""

    name: str
    loop: Callable[[], Coroutine[Any, Any, None]]
