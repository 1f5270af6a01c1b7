"""Read every key under an etcd prefix, then follow the prefix with a watch.

``EtcdStore.watch_prefix`` already reconnects and resumes after the last revision it
delivered; what is left to every owner of a mirrored prefix is the loop around it: read the
prefix, watch from the next revision, and when the watch needs revisions etcd has compacted
away, read the whole prefix again and watch on from there. ``PrefixFollower`` is that loop.

Thread-safety: one event loop; callbacks run on it, one at a time, in revision order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from strom_server.etcd.store import EtcdStore, KeyValue, WatchBatch, WatchCompactedError

__all__ = ["PrefixFollower"]

SnapshotCallback = Callable[[list[KeyValue], int], None]
"""Every key under the prefix and the revision they were read at."""
BatchCallback = Callable[[WatchBatch], None]
CompactedCallback = Callable[[WatchCompactedError], None]


class PrefixFollower:
    """Mirrors one etcd prefix into callbacks: a full snapshot, then every watch batch.

    ``on_snapshot`` gets the whole prefix at start, on ``reload`` and after a compacted watch
    (the receiver replaces what it holds); ``on_batch`` gets each watch batch in order.
    ``on_compacted``, when given, hears of a compacted watch before the prefix is read again.
    Errors (etcd unavailable past its retries, a failing callback) end the follow; the store
    is never closed here: its owner does that.
    """

    def __init__(
        self,
        store: EtcdStore,
        prefix: str,
        *,
        on_snapshot: SnapshotCallback,
        on_batch: BatchCallback,
        on_compacted: CompactedCallback | None = None,
    ) -> None:
        self._store = store
        self._prefix = prefix
        self._on_snapshot = on_snapshot
        self._on_batch = on_batch
        self._on_compacted = on_compacted
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read the prefix once, then follow it in a background task."""
        revision = await self.reload()
        self._task = asyncio.ensure_future(self._follow(revision + 1))

    async def run(self) -> None:
        """Read the prefix, then follow it in the calling task (until cancelled, or the store
        is closed)."""
        await self._follow(await self.reload() + 1)

    async def reload(self) -> int:
        """Read the whole prefix now and hand it to ``on_snapshot``; returns its revision."""
        kvs, revision = await self._store.get_prefix(self._prefix)
        self._on_snapshot(kvs, revision)
        return revision

    async def close(self) -> None:
        """Stop following (the task started by ``start``); leaves the store open."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _follow(self, revision: int) -> None:
        while True:
            try:
                async for batch in self._store.watch_prefix(self._prefix, revision):
                    self._on_batch(batch)
                    revision = batch.revision + 1
                return  # the watch only ends when the store was closed
            except WatchCompactedError as exc:
                if self._on_compacted is not None:
                    self._on_compacted(exc)
                revision = await self.reload() + 1
