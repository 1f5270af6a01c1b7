"""Reading a page of messages: where each partition starts, and at most a page per partition.

``start_positions`` is plain (the offsets come from the caller); ``read_page`` reads with a
``strom.aio.Consumer`` that belongs to no group, assigned the chosen partitions, and pauses
each partition as soon as it has its page, so a page costs ``page_size`` records per
partition (plus what one fetch brings) whatever the topic's size. Each record is turned into
what the page keeps (``shape``: e.g. cut for display) as it arrives, so a page of large
values never holds more than one fetch of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from strom.aio import Consumer
from strom.types import ConsumerRecord, TopicPartition

__all__ = [
    "ISOLATION_LEVELS",
    "START_MODES",
    "BrowseError",
    "StartSpec",
    "consumer_options",
    "next_positions",
    "read_page",
    "start_positions",
]

START_MODES = ("earliest", "latest", "offset", "timestamp")
#: Bytes per partition per fetch while browsing: small, since a page is small.
_PARTITION_FETCH_BYTES = 256 * 1024


_Kept = TypeVar("_Kept")


class _HasOffset(Protocol):
    @property
    def offset(self) -> int: ...


class BrowseError(ValueError):
    """Bad browser parameters; the message names the one."""


@dataclass(frozen=True, slots=True)
class StartSpec:
    mode: str  # one of START_MODES
    value: int = 0  # the offset or the timestamp (ms)

    @classmethod
    def parse(cls, mode: str, value: str = "") -> StartSpec:
        if mode not in START_MODES:
            raise BrowseError(f"start must be one of {', '.join(START_MODES)}, not {mode!r}")
        if mode in ("earliest", "latest"):
            return cls(mode)
        try:
            number = int(value.strip())
        except ValueError:
            raise BrowseError(f"{mode}: expected an integer, got {value!r}") from None
        if number < 0:
            raise BrowseError(f"{mode} must be >= 0, got {number}")
        return cls(mode, number)


def start_positions(
    spec: StartSpec,
    page_size: int,
    starts: Mapping[int, int],
    ends: Mapping[int, int],
    by_timestamp: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """The first offset to show per partition, within ``[start, end]``: ``latest`` shows the
    last ``page_size`` records; ``timestamp`` the first at or after it (-1: none, the end)."""
    positions = {}
    for partition, start in starts.items():
        end = ends[partition]
        if spec.mode == "earliest":
            wanted = start
        elif spec.mode == "latest":
            wanted = end - page_size
        elif spec.mode == "offset":
            wanted = spec.value
        else:
            found = (by_timestamp or {}).get(partition, -1)
            wanted = end if found < 0 else found
        positions[partition] = min(max(wanted, start), end)
    return positions


ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def consumer_options(
    request_timeout_ms: int, isolation_level: str = "read_uncommitted"
) -> dict[str, object]:
    """Options of the console's reading consumers: no group, no commits, small fetches."""
    return {
        "isolation_level": isolation_level,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "client_id": "strom-console",
        "fetch_max_wait_ms": 100,
        "max_partition_fetch_bytes": _PARTITION_FETCH_BYTES,
        "fetch_max_bytes": 8 * _PARTITION_FETCH_BYTES,
        "request_timeout_ms": request_timeout_ms,
    }


async def read_page(
    connection: Mapping[str, Any],
    topic: str,
    positions: Mapping[int, int],
    ends: Mapping[int, int],
    page_size: int,
    *,
    shape: Callable[[ConsumerRecord], _Kept],
    timeout_s: float,
    request_timeout_ms: int,
    isolation_level: str = "read_uncommitted",
) -> dict[int, list[_Kept]]:
    """Up to ``page_size`` records per partition from ``positions``, below ``ends``, each as
    ``shape`` makes it (it must keep the offset); returns what arrived within ``timeout_s`` (a
    partition whose leader is down comes back short). ``connection``: ``bootstrap_servers``
    and the security options."""
    found: dict[int, list[_Kept]] = {p: [] for p in positions}
    wanted = [p for p in sorted(positions) if positions[p] < ends[p]]
    if not wanted:
        return found
    options = consumer_options(request_timeout_ms, isolation_level)
    consumer = Consumer(**connection, **options)  # type: ignore[arg-type]
    try:
        tps = {p: TopicPartition(topic, p) for p in wanted}
        consumer.assign(tps.values())
        for p, tp in tps.items():
            consumer.seek(tp, positions[p])
        open_ = set(wanted)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while open_ and loop.time() < deadline:
            batches = await consumer.poll(timeout_ms=100, max_records=page_size * len(open_))
            for tp, records in batches.items():
                p = tp.partition
                if p not in open_:
                    continue
                room = page_size - len(found[p])
                found[p].extend(shape(r) for r in records[:room] if r.offset < ends[p])
            del batches  # the raw records: only the shaped ones are kept
            for p in list(open_):
                # The position is known locally once seeked: no call to the cluster.
                if len(found[p]) >= page_size or await consumer.position(tps[p]) >= ends[p]:
                    open_.discard(p)
                    consumer.pause(tps[p])
        return found
    finally:
        await consumer.close()


def next_positions(
    positions: Mapping[int, int], records: Mapping[int, Sequence[_HasOffset]]
) -> dict[int, int]:
    """Where the next page starts: after each partition's last shown record."""
    return {p: (records[p][-1].offset + 1 if records.get(p) else o) for p, o in positions.items()}
