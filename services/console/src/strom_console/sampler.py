"""The console's view of the cluster, sampled in the background: the listings (nodes and
controllers, topics, groups), end offsets (message counts, record rates), log directories
(disk use, partition sizes, byte rates), groups' committed offsets (lag, its history, records
out) and each topic's ``min.insync.replicas`` (the under-min-ISR counts).

Pages serve the latest ``Snapshot`` and never fan out to the cluster themselves: whatever the
number of tabs, the cluster sees one sample per ``interval_s``. A sample builds a new snapshot
(never changed in place) with the overview and the topic rows already computed, so a page
only searches, pages and renders. The sampler runs on its own event loop in its own thread,
with its own ``strom.aio.Admin``, so that decoding answers about thousands of partitions does
not hold up the pages' loop.

Refresh is incremental: the topic listing, end offsets, log directories and group offsets
every sample; the node and controller listing and the log start offsets every
``SLOW_EVERY`` samples (and for partitions not seen before); up to 50 DescribeConfigs per
sample for topics whose ``min.insync.replicas`` is not known yet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from strom.admin.log_dirs import BrokerLogDirs
from strom.aio import Admin
from strom.cluster import BackgroundLoop
from strom.errors import StromError
from strom.group.offsets_plan import lag_rows, total_lag
from strom.types import ClusterDescription, ConsumerGroupListing, TopicDescription, TopicPartition
from strom_console import disk, rates
from strom_console.disk import NodeDisk
from strom_console.lag import LagHistory
from strom_console.overview import Overview, summarize
from strom_console.topics import TopicRow, topic_rows
from strom_server.runtime.logs import get_logger

__all__ = ["SLOW_EVERY", "Sampler", "Snapshot", "in_turn"]

log = get_logger(__name__)


async def _made(make_admin: Callable[[], Admin]) -> Admin:
    """The admin created on the loop that will use it (its channels belong to that loop)."""
    return make_admin()


_CONFIG_LOOKUPS_PER_SAMPLE = 50
_GROUP_CONCURRENCY = 16
#: The node listing and the log start offsets are asked every this many samples.
SLOW_EVERY = 6


@dataclass
class Snapshot:
    """One sample (the empty one until the first: ``taken`` 0)."""

    taken: float = 0.0
    cluster: ClusterDescription = field(default_factory=lambda: ClusterDescription("", None, ()))
    topics: list[TopicDescription] = field(default_factory=list)
    groups: list[ConsumerGroupListing] = field(default_factory=list)
    starts: dict[TopicPartition, int] = field(default_factory=dict)
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)
    #: partition -> node id -> replica size; a partition's size is its leader's replica
    replica_sizes: dict[TopicPartition, dict[int, int]] = field(default_factory=dict)
    sizes: dict[TopicPartition, int] = field(default_factory=dict)
    topic_sizes: dict[str, int] = field(default_factory=dict)
    disks: dict[int, NodeDisk] = field(default_factory=dict)
    log_dirs_error: str = ""
    bytes_in: dict[str, float] = field(default_factory=dict)
    rates_out: dict[str, float] = field(default_factory=dict)
    bytes_out: dict[str, float] = field(default_factory=dict)
    group_offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    #: when each group's offsets above were asked (groups are asked in turn)
    group_asked: dict[str, float] = field(default_factory=dict)
    group_lag: dict[str, int] = field(default_factory=dict)
    overview: Overview | None = None
    rows: list[TopicRow] = field(default_factory=list)


class Sampler:
    def __init__(
        self,
        make_admin: Callable[[], Admin],
        *,
        interval_s: float,
        window_s: float,
        max_groups: int,
        groups_per_sample: int = 250,
    ) -> None:
        self._background = BackgroundLoop("strom-console-sampler")
        self.admin = self._background.run(_made(make_admin))
        self.interval_s = interval_s
        self.max_groups = max_groups
        self.groups_per_sample = groups_per_sample
        self._group_turn = 0  # where the next sample's groups start among the followed ones
        self.history = LagHistory(window_s)
        self.snapshot = Snapshot()
        self.min_isr: dict[str, int] = {}
        self.samples = 0
        self.last_error = ""
        self.last_duration_s = 0.0  # how long the last completed sample took
        self._running: concurrent.futures.Future[None] | None = None
        self._wake = asyncio.Event()  # used on the sampler's loop only
        #: Futures (of any loop) resolved by the next completed sample.
        self._waiters: list[concurrent.futures.Future[None]] = []

    def start(self) -> None:
        self._running = self._background.submit(self._run())

    def wake(self) -> None:
        """Sample now (after a change the user wants to see, e.g. an offset reset)."""
        self._background.loop.call_soon_threadsafe(self._wake.set)

    async def next_sample(self, timeout_s: float) -> Snapshot:
        """The snapshot of a sample started after this call (one is started now); the latest
        one when none completes within ``timeout_s``."""
        waiter: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._background.loop.call_soon_threadsafe(self._waiters.append, waiter)
        self.wake()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.wrap_future(waiter), timeout_s)
        return self.snapshot

    async def close(self) -> None:
        if self._running is not None:
            self._running.cancel()
        await asyncio.wrap_future(self._background.submit(self.admin.close()))
        self._background.stop()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            waiters, self._waiters = self._waiters, []
            started = time.monotonic()
            try:
                await self.sample()
                self.last_error = ""
                self.last_duration_s = time.monotonic() - started
                log.debug("sample taken", seconds=round(self.last_duration_s, 3))
            except (StromError, OSError) as exc:
                self.last_error = str(exc)
                log.warning("sample failed", error=str(exc))
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
            if self._waiters:
                continue  # asked for during this sample: another one at once
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)

    async def sample(self) -> None:
        """Take one sample now."""
        previous = self.snapshot
        slow = self.samples % SLOW_EVERY == 0 or not previous.taken
        topics, groups = await asyncio.gather(
            self.admin.describe_topics(), self.admin.list_consumer_groups()
        )
        cluster = await self.admin.describe_cluster() if slow else previous.cluster
        tps = [
            TopicPartition(t.name, p.partition)
            for t in topics
            if not t.is_internal
            for p in t.partitions
            if p.leader >= 0
        ]
        now = time.time()
        wanted_starts = tps if slow else [tp for tp in tps if tp not in previous.starts]
        ends_found, starts_found, found_dirs = await asyncio.gather(
            self.admin.list_offsets(dict.fromkeys(tps, "latest")),
            self.admin.list_offsets(dict.fromkeys(wanted_starts, "earliest")),
            self._log_dirs(),
        )
        ends = {tp: o.offset for tp, o in ends_found.items()}
        starts = {} if slow else {tp: o for tp, o in previous.starts.items() if tp in ends}
        starts.update((tp, o.offset) for tp, o in starts_found.items())
        messages: dict[str, int] = {}
        for tp, end in ends.items():
            messages[tp.topic] = messages.get(tp.topic, 0) + max(end - starts.get(tp, 0), 0)
        log_dirs, log_dirs_error = found_dirs
        replica_sizes = disk.replica_sizes(log_dirs)
        sizes = disk.partition_sizes(replica_sizes, topics)
        topic_sizes = rates.by_topic(sizes)
        followed = sorted(g.group_id for g in groups)[: self.max_groups]
        asked, self._group_turn = in_turn(followed, self._group_turn, self.groups_per_sample)
        fresh = await self._group_offsets(asked)
        group_offsets, group_asked = {}, {}
        for g in followed:  # the groups not asked this time keep their last offsets
            if g in fresh:
                group_offsets[g], group_asked[g] = fresh[g], now
            elif g in previous.group_offsets:
                group_offsets[g] = previous.group_offsets[g]
                group_asked[g] = previous.group_asked[g]
        group_lag = {g: total_lag(lag_rows(offsets, ends)) for g, offsets in group_offsets.items()}
        self.history.record(now, {g: group_lag[g] for g in fresh})
        seconds = now - previous.taken if previous.taken else 0.0
        records_out = rates.records_out(
            {g: o for g, o in previous.group_offsets.items() if g in fresh},
            fresh,
            {g: now - previous.group_asked[g] for g in fresh if g in previous.group_asked},
        )
        snap = Snapshot(
            taken=now,
            cluster=cluster,
            topics=topics,
            groups=groups,
            starts=starts,
            ends=ends,
            messages=messages,
            rates=rates.per_second(rates.by_topic(previous.ends), rates.by_topic(ends), seconds),
            replica_sizes=replica_sizes,
            sizes=sizes,
            topic_sizes=topic_sizes,
            disks=disk.node_disks(log_dirs),
            log_dirs_error=log_dirs_error,
            bytes_in=rates.per_second(previous.topic_sizes, topic_sizes, seconds),
            rates_out=records_out,
            bytes_out=rates.bytes_out(records_out, topic_sizes, messages),
            group_offsets=group_offsets,
            group_asked=group_asked,
            group_lag=group_lag,
        )
        await self._refresh_min_isr([t.name for t in topics if not t.is_internal])
        self.snapshot = derive(snap, self.min_isr)
        self.samples += 1

    async def _log_dirs(self) -> tuple[list[BrokerLogDirs], str]:
        """Every node's log dirs, and why there are none (a cluster without the call)."""
        try:
            return await self.admin.describe_log_dirs(), ""
        except StromError as exc:
            return [], str(exc)

    async def _group_offsets(self, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
        limit = asyncio.Semaphore(_GROUP_CONCURRENCY)
        found: dict[str, dict[TopicPartition, int]] = {}

        async def one(group: str) -> None:
            async with limit:
                try:
                    committed = await self.admin.list_consumer_group_offsets(group)
                except StromError:
                    return  # deleted meanwhile or its coordinator is moving: next sample
                found[group] = {tp: o.offset for tp, o in committed.items()}

        await asyncio.gather(*(one(g) for g in groups))
        return found

    async def _refresh_min_isr(self, names: list[str]) -> None:
        present = set(names)  # a set: thousands of topics, each looked up once per sample
        for name in list(self.min_isr):  # a copy: a page may drop an entry meanwhile
            if name not in present:
                self.min_isr.pop(name, None)
        missing = [n for n in names if n not in self.min_isr][:_CONFIG_LOOKUPS_PER_SAMPLE]
        limit = asyncio.Semaphore(_GROUP_CONCURRENCY)

        async def one(name: str) -> None:
            async with limit:
                try:
                    configs = await self.admin.describe_configs(name)
                except StromError:
                    return  # deleted meanwhile, or the controller is moving: next sample
            value = configs.get("min.insync.replicas")
            self.min_isr[name] = int(value.value) if value is not None else 1

        await asyncio.gather(*(one(n) for n in missing))


def in_turn(followed: Sequence[str], start: int, count: int) -> tuple[list[str], int]:
    """The groups one sample asks: all of ``followed`` when they are at most ``count``, else
    ``count`` of them from ``start`` (wrapping around); and where the next turn starts."""
    if len(followed) <= count:
        return list(followed), 0
    start %= len(followed)
    chosen = list(followed[start : start + count])
    chosen += followed[: count - len(chosen)]
    return chosen, (start + count) % len(followed)


def derive(snap: Snapshot, min_isr: dict[str, int]) -> Snapshot:
    """``snap`` with its overview and topic rows computed (in the sampler's thread, so that
    pages do not)."""
    snap.overview = summarize(
        snap.cluster,
        snap.topics,
        snap.groups,
        min_isr=min_isr,
        rates=snap.rates or None,
        disks=snap.disks,
        bytes_in=snap.bytes_in or None,
        rates_out=snap.rates_out or None,
        bytes_out=snap.bytes_out or None,
        log_dirs_error=snap.log_dirs_error,
    )
    snap.rows = topic_rows(
        snap.topics,
        min_isr=min_isr,
        messages=snap.messages,
        rates=snap.rates,
        sizes=snap.topic_sizes,
        bytes_in=snap.bytes_in,
        rates_out=snap.rates_out,
        bytes_out=snap.bytes_out,
    )
    return snap
