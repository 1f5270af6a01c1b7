"""PrefixFollower against a real etcd: the snapshot at start, puts and deletes in order, reload,
and a compacted watch answered by a fresh snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import etcd3
import pytest

from strom_server.etcd.prefix_follower import PrefixFollower
from strom_server.etcd.process import EtcdProcess
from strom_server.etcd.store import EtcdStore, KeyValue, WatchBatch, WatchCompactedError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdProcess]:
    with EtcdProcess() as process:
        yield process


class Recorder:
    """What the follower handed over, in order."""

    def __init__(self) -> None:
        self.snapshots: list[tuple[dict[str, bytes], int]] = []
        self.events: list[tuple[str, str, bytes]] = []
        self.compactions: list[WatchCompactedError] = []

    def snapshot(self, kvs: list[KeyValue], revision: int) -> None:
        self.snapshots.append(({kv.key: kv.value for kv in kvs}, revision))

    def batch(self, batch: WatchBatch) -> None:
        assert all(e.kv.mod_revision <= batch.revision for e in batch.events)
        self.events.extend((e.kind, e.kv.key, e.kv.value) for e in batch.events)


async def eventually(condition: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def test_snapshot_then_puts_and_deletes_in_order_then_reload(etcd: EtcdProcess) -> None:
    prefix = "/test-follower/a/"

    async def scenario() -> None:
        store = EtcdStore([etcd.endpoint])
        await store.put(prefix + "k1", b"v1")
        await store.put("/test-follower/other", b"not followed")
        seen = Recorder()
        follower = PrefixFollower(store, prefix, on_snapshot=seen.snapshot, on_batch=seen.batch)
        await follower.start()
        try:
            assert len(seen.snapshots) == 1
            snapshot, revision = seen.snapshots[0]
            assert snapshot == {prefix + "k1": b"v1"}
            assert revision >= 2
            await store.put(prefix + "k2", b"v2")
            await store.put(prefix + "k1", b"v1b")
            await store.put("/test-follower/other", b"still not followed")
            await store.delete(prefix + "k2")
            await eventually(lambda: len(seen.events) == 3, "three events")
            assert seen.events == [
                ("put", prefix + "k2", b"v2"),
                ("put", prefix + "k1", b"v1b"),
                ("delete", prefix + "k2", b""),
            ]
            reloaded = await follower.reload()
            assert seen.snapshots[-1] == ({prefix + "k1": b"v1b"}, reloaded)
            assert reloaded > revision
            # Still following after a reload.
            await store.put(prefix + "k3", b"v3")
            await eventually(lambda: len(seen.events) == 4, "the event after reload")
            assert seen.events[-1] == ("put", prefix + "k3", b"v3")
        finally:
            await follower.close()
            await follower.close()  # harmless twice; the store stays open
            assert await store.get(prefix + "k1") is not None
            await store.close()

    asyncio.run(scenario())


def test_compacted_watch_reads_a_fresh_snapshot(etcd: EtcdProcess) -> None:
    prefix = "/test-follower/b/"
    client = etcd3.client(etcd.host, etcd.port, timeout=5)

    async def scenario() -> None:
        store = EtcdStore([etcd.endpoint])
        await store.put(prefix + "k1", b"v1")
        seen = Recorder()

        def snapshot(kvs: list[KeyValue], revision: int) -> None:
            seen.snapshot(kvs, revision)
            if len(seen.snapshots) == 1:
                # Before the watch starts: change the prefix and compact those revisions away,
                # so the watch from the snapshot's next revision finds them gone.
                client.put(prefix + "k2", "v2")
                client.delete(prefix + "k1")
                current = client.put(prefix + "k3", "v3").header.revision
                client.compact(current, physical=True)

        follower = PrefixFollower(
            store,
            prefix,
            on_snapshot=snapshot,
            on_batch=seen.batch,
            on_compacted=seen.compactions.append,
        )
        await follower.start()
        try:
            assert seen.snapshots[0][0] == {prefix + "k1": b"v1"}
            await eventually(lambda: len(seen.snapshots) == 2, "the snapshot after compaction")
            assert len(seen.compactions) == 1
            assert seen.compactions[0].compact_revision > seen.snapshots[0][1]
            assert seen.snapshots[1][0] == {prefix + "k2": b"v2", prefix + "k3": b"v3"}
            assert seen.snapshots[1][1] >= seen.compactions[0].compact_revision
            assert seen.events == []  # the compacted changes came in the snapshot, not as events
            # Following resumes after the new snapshot's revision.
            await store.put(prefix + "k4", b"v4")
            await eventually(lambda: seen.events == [("put", prefix + "k4", b"v4")], "k4")
        finally:
            await follower.close()
            await store.close()

    try:
        asyncio.run(scenario())
    finally:
        client.close()
