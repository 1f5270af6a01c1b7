"""``strom.TransactionalLoop`` on a real cluster: a loop process killed with SIGKILL mid-run and
restarted with the same transactional id, two loops sharing a group through rebalances (one
joins, one leaves), and the asyncio loop stopped by a failing transform and resumed; a
read_committed reader of the output finds every input exactly once."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cluster_testkit import LocalCluster, read_values
from strom_testkit import wait_until

from strom import NewTopic, OutputRecord
from strom.aio import TransactionalLoop as AioTransactionalLoop
from strom.eos import LoopStats
from strom.types import ConsumerRecord

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("txn_loop_worker.py")
PARTITIONS = 4


def make_topics(cluster: LocalCluster, *names: str) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, PARTITIONS, 3) for name in names])
    for name in names:
        wait_until(
            lambda name=name: all(p.leader >= 0 for p in cluster.describe(name).partitions),
            30,
            f"{name}: leaders",
        )
        for p in range(PARTITIONS):
            cluster.wait_hosted(name, p)


def feed(cluster: LocalCluster, topic: str, values: list[str]) -> None:
    for p in range(PARTITIONS):
        if values[p::PARTITIONS]:
            cluster.produce(topic, p, [v.encode() for v in values[p::PARTITIONS]])


def start(
    cluster: LocalCluster, group: str, topic: str, txn_id: str, logs: Path, *flags: str
) -> subprocess.Popen[str]:
    """A loop process (its stderr in ``logs/<txn_id>.log``; flags: txn_loop_worker.py)."""
    argv = [sys.executable, str(WORKER), cluster.gateway, group, f"{topic}-in", f"{topic}-out",
            txn_id, *flags]  # fmt: skip
    with open(logs / f"{txn_id}.log", "a") as log:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)


def stop(loop: subprocess.Popen[str], logs: Path, txn_id: str) -> dict[str, int]:
    """SIGTERM: the loop commits what it holds, leaves the group and prints its stats."""
    loop.send_signal(signal.SIGTERM)
    try:
        out, _ = loop.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        loop.kill()
        out, _ = loop.communicate()
    assert loop.returncode == 0, (logs / f"{txn_id}.log").read_text()[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def committed_output(cluster: LocalCluster, topic: str) -> list[str]:
    return read_values(cluster, f"{topic}-out", isolation_level="read_committed")


def done_inputs(cluster: LocalCluster, group: str, topic: str) -> int:
    with cluster.admin() as admin:
        offsets = admin.list_consumer_group_offsets(group)
    return sum(o.offset for tp, o in offsets.items() if tp.topic == f"{topic}-in")


def test_a_loop_killed_mid_run_and_restarted_is_exactly_once(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    make_topics(cluster, "kill-in", "kill-out")
    inputs = [f"k-{i}" for i in range(1000)]
    feed(cluster, "kill-in", inputs)
    # Static members: the restarted process takes the killed one's place in the group at once.
    first = start(cluster, "kill-group", "kill", "kill-loop", tmp_path, "static")
    try:
        wait_until(lambda: done_inputs(cluster, "kill-group", "kill") > 0, 60, "a commit")
    finally:
        first.kill()  # mid-run: the transaction it had open is left to the next incarnation
        first.communicate(timeout=10)
    assert done_inputs(cluster, "kill-group", "kill") < len(inputs), "killed too late"
    second = start(cluster, "kill-group", "kill", "kill-loop", tmp_path, "static")
    try:
        wait_until(
            lambda: done_inputs(cluster, "kill-group", "kill") >= len(inputs), 90, "every input"
        )
    finally:
        stats = stop(second, tmp_path, "kill-loop")
    assert stats["records_consumed"] > 0
    assert sorted(committed_output(cluster, "kill")) == sorted(inputs)


def test_two_loops_share_the_input_through_rebalances(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    make_topics(cluster, "share-in", "share-out")
    inputs = [f"s-{i}" for i in range(2000)]
    feed(cluster, "share-in", inputs[:500])
    # a's transactions last 1.5 s: b's arrival revokes a's partitions with one open, which a
    # aborts; the new owners redo its input from the committed offsets.
    a = start(cluster, "share-group", "share", "share-a", tmp_path, "long")
    b: subprocess.Popen[str] | None = None
    try:
        wait_until(lambda: done_inputs(cluster, "share-group", "share") > 0, 60, "a's commit")
        feed(cluster, "share-in", inputs[500:1000])
        b = start(cluster, "share-group", "share", "share-b", tmp_path)  # a rebalance

        def both_assigned() -> bool:
            with cluster.admin() as admin:
                group = admin.describe_consumer_groups(["share-group"])["share-group"]
            return len(group.members) == 2 and all(
                m.assignment.topic_partitions for m in group.members
            )

        wait_until(both_assigned, 60, "both loops own partitions")
        feed(cluster, "share-in", inputs[1000:1500])  # input for both
        wait_until(lambda: done_inputs(cluster, "share-group", "share") >= 1500, 90, "1500 inputs")
        stats_a = stop(a, tmp_path, "share-a")  # a leaves: b takes every partition
        feed(cluster, "share-in", inputs[1500:])
        wait_until(
            lambda: done_inputs(cluster, "share-group", "share") >= len(inputs), 90, "every input"
        )
        stats_b = stop(b, tmp_path, "share-b")
    finally:
        for loop in (a, b):
            if loop is not None and loop.poll() is None:
                loop.kill()
                loop.communicate()
    assert stats_a["records_consumed"] > 0
    assert stats_b["records_consumed"] > 0
    assert sorted(committed_output(cluster, "share")) == sorted(inputs)


def test_the_asyncio_loop_aborts_on_a_failing_transform_and_resumes(cluster: LocalCluster) -> None:
    make_topics(cluster, "aio-in", "aio-out")
    inputs = [f"a-{i}" for i in range(400)]
    feed(cluster, "aio-in", inputs)

    def loop(transform: Any) -> AioTransactionalLoop:
        return AioTransactionalLoop(
            cluster.gateway,
            input_topics="aio-in",
            group_id="aio-group",
            transactional_id="aio-loop",
            transform=transform,
            max_batch_records=100,
            consumer_options={"auto_offset_reset": "earliest"},
        )

    def failing(record: ConsumerRecord) -> list[OutputRecord]:
        if record.value == b"a-201":
            raise ValueError("a bug in the transform")
        return [OutputRecord("aio-out", record.value)]

    async def copy(record: ConsumerRecord) -> list[OutputRecord]:
        await asyncio.sleep(0)
        return [OutputRecord("aio-out", record.value)]

    before: list[int] = []

    async def scenario() -> LoopStats:
        with pytest.raises(ValueError, match="a bug in the transform"):
            await loop(failing).run()  # its open transaction is aborted before it raises
        before.append(done_inputs(cluster, "aio-group", "aio"))
        assert before[0] < len(inputs)
        resumed = loop(copy)
        running = asyncio.ensure_future(resumed.run())
        while await asyncio.to_thread(done_inputs, cluster, "aio-group", "aio") < len(inputs):
            assert not running.done(), running.exception()
            await asyncio.sleep(0.2)
        resumed.stop()
        await running
        return resumed.stats

    stats = asyncio.run(asyncio.wait_for(scenario(), 120))
    # The resumed loop starts from the committed offsets: it consumes at least what was left
    # (how much the failing loop committed first depends on how its polls were cut).
    assert stats.records_consumed >= len(inputs) - before[0] > 0
    assert sorted(committed_output(cluster, "aio")) == sorted(inputs)
