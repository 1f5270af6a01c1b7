"""What the console samples in the background: end offsets (message counts and rates per
topic), groups' committed offsets (lag and its history) and each topic's
``min.insync.replicas`` (for the under-min-ISR counts).

One sample every ``interval_s``; pages read the latest snapshot and never wait for it. The
sampler runs on its own event loop in its own thread, with its own ``strom.aio.Admin``, so
that decoding answers about thousands of partitions does not hold up the pages' loop; the
listings the pages share (``cache.Cached``) are fetched there too (``call``). The calls to
the cluster are bounded: one Metadata, two ListOffsets rounds, one ListGroups, an
OffsetFetch per followed group (``max_groups``, 16 at a time) and up to 50 DescribeConfigs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from strom.aio import Admin
from strom.cluster import BackgroundLoop
from strom.errors import StromError
from strom.types import TopicDescription, TopicPartition
from strom_console.lag import LagHistory, total_lag
from strom_server.runtime.logs import get_logger

__all__ = ["Sampler", "Snapshot"]

log = get_logger(__name__)
T = TypeVar("T")


async def _made(make_admin: Callable[[], Admin]) -> Admin:
    """The admin created on the loop that will use it (its channels belong to that loop)."""
    return make_admin()


_CONFIG_LOOKUPS_PER_SAMPLE = 50
_GROUP_CONCURRENCY = 16


@dataclass
class Snapshot:
    """The latest sample (empty until the first one)."""

    taken: float = 0.0
    starts: dict[TopicPartition, int] = field(default_factory=dict)
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)
    group_lag: dict[str, int] = field(default_factory=dict)


class Sampler:
    def __init__(
        self,
        make_admin: Callable[[], Admin],
        *,
        interval_s: float,
        window_s: float,
        max_groups: int,
    ) -> None:
        self._background = BackgroundLoop("strom-console-sampler")
        self.admin = self._background.run(_made(make_admin))
        self.interval_s = interval_s
        self.max_groups = max_groups
        self.history = LagHistory(window_s)
        self.snapshot = Snapshot()
        self.min_isr: dict[str, int] = {}
        self.samples = 0
        self.last_error = ""
        #: Called with each sample's topic descriptions (the pages' cache takes them).
        self.on_topics: Callable[[list[TopicDescription]], None] | None = None
        self._running: concurrent.futures.Future[None] | None = None
        self._wake = asyncio.Event()  # used on the sampler's loop only

    def start(self) -> None:
        self._running = self._background.submit(self._run())

    def wake(self) -> None:
        """Sample now (after a change the user wants to see, e.g. an offset reset)."""
        self._background.loop.call_soon_threadsafe(self._wake.set)

    async def call(self, fn: Callable[[Admin], Awaitable[T]]) -> T:
        """``fn(admin)`` run on the sampler's loop, awaited from the caller's."""

        async def run() -> T:
            return await fn(self.admin)

        return await asyncio.wrap_future(self._background.submit(run()))

    async def close(self) -> None:
        if self._running is not None:
            self._running.cancel()
        await asyncio.wrap_future(self._background.submit(self.admin.close()))
        self._background.stop()

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
                self.last_error = ""
            except (StromError, OSError) as exc:
                self.last_error = str(exc)
                log.warning("sample failed", error=str(exc))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)

    async def sample(self) -> None:
        """Take one sample now."""
        topics = await self.admin.describe_topics()
        if self.on_topics is not None:
            self.on_topics(topics)
        tps = [
            TopicPartition(t.name, p.partition)
            for t in topics
            if not t.is_internal
            for p in t.partitions
            if p.leader >= 0
        ]
        now = time.time()
        ends_found = await self.admin.list_offsets(dict.fromkeys(tps, "latest"))
        starts_found = await self.admin.list_offsets(dict.fromkeys(tps, "earliest"))
        ends = {tp: o.offset for tp, o in ends_found.items()}
        starts = {tp: o.offset for tp, o in starts_found.items()}
        messages: dict[str, int] = {}
        totals: dict[str, int] = {}
        for tp, end in ends.items():
            totals[tp.topic] = totals.get(tp.topic, 0) + end
            messages[tp.topic] = messages.get(tp.topic, 0) + max(end - starts.get(tp, 0), 0)
        previous = self.snapshot
        rates: dict[str, float] = {}
        if previous.taken and now > previous.taken:
            before: dict[str, int] = {}
            for tp, end in previous.ends.items():
                before[tp.topic] = before.get(tp.topic, 0) + end
            for topic, total in totals.items():
                if topic in before:
                    rates[topic] = max(total - before[topic], 0) / (now - previous.taken)
        group_lag = await self._group_lag(ends)
        self.history.record(now, group_lag)
        self.snapshot = Snapshot(now, starts, ends, messages, rates, group_lag)
        self.samples += 1
        await self._refresh_min_isr([t.name for t in topics if not t.is_internal])

    async def _group_lag(self, ends: dict[TopicPartition, int]) -> dict[str, int]:
        groups = [g.group_id for g in await self.admin.list_consumer_groups()][: self.max_groups]
        limit = asyncio.Semaphore(_GROUP_CONCURRENCY)
        lags: dict[str, int] = {}

        async def one(group: str) -> None:
            async with limit:
                try:
                    committed = await self.admin.list_consumer_group_offsets(group)
                except StromError:
                    return  # deleted meanwhile or its coordinator is moving: next sample
                lags[group] = total_lag({tp: o.offset for tp, o in committed.items()}, ends)

        await asyncio.gather(*(one(g) for g in groups))
        return lags

    async def _refresh_min_isr(self, names: list[str]) -> None:
        for name in list(self.min_isr):
            if name not in names:
                del self.min_isr[name]
        missing = [n for n in names if n not in self.min_isr][:_CONFIG_LOOKUPS_PER_SAMPLE]
        for name in missing:
            try:
                configs = await self.admin.describe_configs(name)
            except StromError:
                continue
            value = configs.get("min.insync.replicas")
            self.min_isr[name] = int(value.value) if value is not None else 1
