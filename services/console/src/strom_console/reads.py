"""Offset reads several pages share: offsets by spec, log bounds, where a page read starts.

Thin calls on the console's ``Admin``; where a read starts is ``browse.start_positions``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from strom.types import TopicPartition
from strom_console import browse
from strom_console.web import Console

__all__ = ["log_bounds", "offsets", "read_plan"]


async def offsets(
    console: Console,
    tps: Iterable[TopicPartition],
    spec: str | int,
    isolation: str = "read_uncommitted",
) -> dict[TopicPartition, int]:
    """The offset ``spec`` names (earliest, latest, a timestamp in ms) of each of ``tps``."""
    wanted = dict.fromkeys(tps, spec)
    if not wanted:
        return {}
    found = await console.admin.list_offsets(wanted, isolation_level=isolation)
    return {tp: o.offset for tp, o in found.items()}


async def log_bounds(
    console: Console, tps: Iterable[TopicPartition], isolation: str = "read_uncommitted"
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Log start and end of each of ``tps``, asked at once; read_committed ends at the last
    stable offset (an open transaction's records wait)."""
    wanted = list(tps)
    return await asyncio.gather(
        offsets(console, wanted, "earliest"), offsets(console, wanted, "latest", isolation)
    )


async def read_plan(
    console: Console,
    name: str,
    partitions: Iterable[int],
    spec: browse.StartSpec,
    count: int,
    *,
    isolation: str = "read_uncommitted",
) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Where a read of ``count`` records per partition of ``name`` starts (``spec``), and
    each partition's log start and end: ``(positions, starts, ends)`` by partition."""
    tps = {p: TopicPartition(name, p) for p in partitions}
    found_starts, found_ends = await log_bounds(console, tps.values(), isolation)
    starts = {p: found_starts[tp] for p, tp in tps.items()}
    ends = {p: found_ends[tp] for p, tp in tps.items()}
    by_time = None
    if spec.mode == "timestamp":
        found = await offsets(console, tps.values(), spec.value)
        by_time = {p: found[tp] for p, tp in tps.items()}
    return browse.start_positions(spec, count, starts, ends, by_time), starts, ends
