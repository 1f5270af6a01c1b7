"""An in-memory PartitionLog and join helpers for the group manager's unit tests (no network)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from strom_coordinator.group.api import JoinRequest, JoinResult
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.manager import GroupManager

T = TypeVar("T")

FAST = GroupConfig(
    group_min_session_timeout_ms=10,
    group_max_session_timeout_ms=60_000,
    group_initial_rebalance_delay_ms=0,
)
PROTOCOLS = (("range", b"meta-range"),)


@dataclass
class MemoryLog:
    """Keeps every appended batch (in the order they complete); can fail appends or hold them
    until released: all of them (``gate``) or the next one (``hold_next``)."""

    batches: list[tuple[int, list[tuple[bytes, bytes | None]]]] = field(default_factory=list)
    fail_with: BaseException | None = None
    gate: asyncio.Event | None = None
    held: list[tuple[asyncio.Event, BaseException | None]] = field(default_factory=list)

    def hold_next(self, fail_with: BaseException | None = None) -> asyncio.Event:
        """Hold the next append until the returned event is set; it then fails with
        ``fail_with`` when given."""
        release = asyncio.Event()
        self.held.append((release, fail_with))
        return release

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        if self.held:
            release, failure = self.held.pop(0)
            await release.wait()
            if failure is not None:
                raise failure
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        self.batches.append((partition, list(records)))

    def records(self, partition: int | None = None) -> list[tuple[bytes, bytes | None]]:
        return [r for p, batch in self.batches if partition in (None, p) for r in batch]


@dataclass
class RecordingStats:
    rebalances: list[tuple[str, float]] = field(default_factory=list)
    commits: list[tuple[str, int]] = field(default_factory=list)

    def on_rebalance(self, group_id: str, duration_s: float) -> None:
        self.rebalances.append((group_id, duration_s))

    def on_commit(self, group_id: str, partitions: int) -> None:
        self.commits.append((group_id, partitions))


def serving_manager(
    log: MemoryLog | None = None,
    config: GroupConfig = FAST,
    *,
    partitions: int = 1,
    stats: RecordingStats | None = None,
    clock: list[int] | None = None,
) -> GroupManager:
    """A manager that owns and serves every partition of a ``partitions``-partition topic."""
    wall = clock if clock is not None else [1_000_000]
    m = GroupManager(log or MemoryLog(), config, stats=stats, wall_clock_ms=lambda: wall[0])
    m.partition_count = partitions
    for p in range(partitions):
        m.begin_loading(p)
        m.finish_loading(p)
    return m


def request(
    group: str = "g",
    member_id: str = "",
    *,
    session_ms: int = 1000,
    rebalance_ms: int = 1000,
    instance: str | None = None,
    protocols: Sequence[tuple[str, bytes]] = PROTOCOLS,
    protocol_type: str = "consumer",
    client_id: str = "c",
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        protocol_type=protocol_type,
        protocols=protocols,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        group_instance_id=instance,
        client_id=client_id,
        client_host="/127.0.0.1",
    )


async def member_id(m: GroupManager, group: str = "g", **kw: Any) -> str:
    """The id a dynamic member gets from its first (MEMBER_ID_REQUIRED) join."""
    first = await m.join_group(request(group, **kw))
    assert first.error is not None and first.error.code_name == "MEMBER_ID_REQUIRED"
    return first.member_id


async def join(m: GroupManager, group: str = "g", member: str = "", **kw: Any) -> JoinResult:
    """Join (asking for a member id first when ``member`` is empty) and wait for the result."""
    if not member and kw.get("instance") is None:
        member = await member_id(m, group, **kw)
    return await m.join_group(request(group, member, **kw))


def start(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    return asyncio.ensure_future(coro)


async def settle(rounds: int = 5) -> None:
    """Let scheduled callbacks and tasks run."""
    for _ in range(rounds):
        await asyncio.sleep(0)
