"""The transactional clients against a real cluster: the asyncio producer and consumer, records
queued at an abort, fencing seen through the API, offsets committed only with the
transaction, consumer lag to the last stable offset, the admin calls and the ``strom
transactions`` / ``strom consume --isolation-level`` commands. (Atomic visibility across
leaders, coordinator kills and KIP-890 are tests/integration/transactions/.)"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_testkit import LocalCluster, assert_ok, read_values, start_local_cluster
from strom_testkit import wait_until

from strom import Consumer, NewTopic, Producer, TopicPartition
from strom.aio import Consumer as AioConsumer
from strom.aio import Producer as AioProducer
from strom.errors import InvalidProducerEpochError, ProducerFencedError
from strom.producer import TransactionAbortedError
from strom.types import OffsetAndMetadata

pytestmark = pytest.mark.integration

FENCED = (ProducerFencedError, InvalidProducerEpochError)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("txn-clients"),
        coordinator_flags=(
            "--group.initial.rebalance.delay.ms", "0",
            "--offsets.topic.num.partitions", "3",
            "--transaction.state.log.num.partitions", "3",
        ),
    )  # fmt: skip


def make_topic(cluster: LocalCluster, name: str, partitions: int = 3) -> list[TopicPartition]:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, partitions, 3)])
    wait_until(lambda: all(p.leader >= 0 for p in cluster.describe(name).partitions), 30, "leaders")
    for p in range(partitions):
        cluster.wait_hosted(name, p)
    return [TopicPartition(name, p) for p in range(partitions)]


def test_aio_commit_is_visible_whole_and_lag_is_measured_to_the_lso(cluster: LocalCluster) -> None:
    tps = make_topic(cluster, "aio-commit")
    values = [f"v{i}" for i in range(30)]

    async def run() -> None:
        async with (
            AioProducer(cluster.gateway, transactional_id="t-aio") as producer,
            AioConsumer(
                bootstrap_servers=cluster.gateway,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
            ) as committed,
            AioConsumer(
                bootstrap_servers=cluster.gateway,
                auto_offset_reset="earliest",
                isolation_level="read_uncommitted",
            ) as uncommitted,
        ):
            await producer.init_transactions()
            await producer.begin_transaction()
            for i, value in enumerate(values):
                await producer.send("aio-commit", value.encode(), partition=i % 3)
            await producer.flush()
            # The open transaction holds the last stable offset at its first offset.
            assert set((await committed.end_offsets(tps)).values()) == {0}
            assert set((await uncommitted.end_offsets(tps)).values()) == {10}
            committed.assign(tps)
            assert await committed.poll(timeout_ms=1000) == {}
            assert all(committed.lag(tp) == 0 for tp in tps)
            await producer.commit_transaction()
            got: list[str] = []
            deadline = time.monotonic() + 20
            while len(got) < len(values) and time.monotonic() < deadline:
                found = await committed.poll(timeout_ms=200)
                got += [r.value.decode() for rs in found.values() for r in rs]
            assert sorted(got) == sorted(values)
            # Past the data and the COMMIT marker: nothing left, positions at the log end.
            await committed.poll(timeout_ms=500)
            ends = await uncommitted.end_offsets(tps)
            assert all(ends[tp] == 11 for tp in tps)  # 10 records + the marker
            assert {tp: await committed.position(tp) for tp in tps} == ends
            assert all(committed.lag(tp) == 0 for tp in tps)

    asyncio.run(run())


def test_abort_fails_queued_records_and_hides_sent_ones(cluster: LocalCluster) -> None:
    make_topic(cluster, "aborted", partitions=1)
    with Producer(cluster.gateway, transactional_id="t-abort-queued", linger_ms=60000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        sent = producer.send("aborted", b"sent", partition=0)
        producer.flush()
        assert sent.result(timeout=10).offset == 0
        queued = producer.send("aborted", b"queued", partition=0)  # lingers: never sent
        producer.abort_transaction()
        with pytest.raises(TransactionAbortedError):
            queued.result(timeout=10)
        producer.begin_transaction()
        producer.send("aborted", b"kept", partition=0)
        producer.commit_transaction()
    assert read_values(cluster, "aborted", isolation_level="read_committed") == ["kept"]
    assert read_values(cluster, "aborted", isolation_level="read_uncommitted") == ["sent", "kept"]


def test_an_older_producer_is_fenced_for_good(cluster: LocalCluster) -> None:
    make_topic(cluster, "fenced", partitions=1)
    old = Producer(cluster.gateway, transactional_id="t-fenced")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send("fenced", b"old", partition=0)
        old.flush()
        with Producer(cluster.gateway, transactional_id="t-fenced") as new:
            new.init_transactions()  # aborts old's transaction, bumps the epoch
            with pytest.raises(FENCED):
                old.commit_transaction()
            with pytest.raises(FENCED):
                old.begin_transaction()  # fatal: the producer stays unusable
            with pytest.raises(FENCED):
                old.send("fenced", b"later", partition=0)
            new.begin_transaction()
            new.send("fenced", b"new", partition=0)
            new.commit_transaction()
    finally:
        old.close(timeout=5)
    assert read_values(cluster, "fenced", isolation_level="read_committed") == ["new"]


def test_offsets_sent_to_a_transaction_commit_only_with_it(cluster: LocalCluster) -> None:
    inputs = make_topic(cluster, "ctp-in", partitions=1)
    make_topic(cluster, "ctp-out", partitions=1)
    cluster.produce("ctp-in", 0, [f"in-{i}".encode() for i in range(10)])
    group = "ctp-offsets"

    def committed() -> int | None:
        with cluster.admin() as admin:
            found = admin.list_consumer_group_offsets(group)
        return found[inputs[0]].offset if inputs[0] in found else None

    with (
        Consumer(
            bootstrap_servers=cluster.gateway,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
        ) as consumer,
        Producer(cluster.gateway, transactional_id="t-ctp-offsets") as producer,
    ):
        consumer.subscribe(["ctp-in"])
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 10 and time.monotonic() < deadline:
            records += [r for rs in consumer.poll(timeout_ms=200).values() for r in rs]
        assert len(records) == 10
        metadata = consumer.group_metadata()
        assert metadata.group_id == group and metadata.generation_id >= 1 and metadata.member_id
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("ctp-out", b"aborted", partition=0)
        producer.send_offsets_to_transaction({inputs[0]: OffsetAndMetadata(5)}, metadata)
        producer.abort_transaction()
        assert committed() is None
        producer.begin_transaction()
        producer.send("ctp-out", b"committed", partition=0)
        producer.send_offsets_to_transaction(
            {inputs[0]: OffsetAndMetadata(10, "done")}, consumer.group_metadata()
        )
        producer.commit_transaction()
        wait_until(lambda: committed() == 10, 20, "the transaction's offset committed")
    assert read_values(cluster, "ctp-out", isolation_level="read_committed") == ["committed"]


def test_admin_lists_describes_and_aborts_an_open_transaction(cluster: LocalCluster) -> None:
    (tp,) = make_topic(cluster, "admin-txn", partitions=1)
    producer = Producer(cluster.gateway, transactional_id="t-admin")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("admin-txn", b"open", partition=0)
        producer.flush()
        with cluster.admin() as admin:
            listed = admin.list_transactions(states=["Ongoing"])
            assert "t-admin" in [t.transactional_id for t in listed]
            described = admin.describe_transactions(["t-admin"])["t-admin"]
            assert described.state == "Ongoing"
            assert described.partitions == (tp,)
            assert described.transaction_start_time_ms is not None
            (state,) = [
                p
                for p in admin.describe_producers([tp])[tp]
                if p.producer_id == described.producer_id
            ]
            assert state.current_txn_start_offset == 0
            # Open and known to its coordinator: not hanging, however old.
            assert admin.find_hanging_transactions([tp], max_transaction_timeout_ms=0) == []
            after = admin.abort_transaction("t-admin")
            assert after.state in ("CompleteAbort", "Empty")
            assert after.producer_epoch > described.producer_epoch
        with pytest.raises(FENCED):
            producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    assert read_values(cluster, "admin-txn", isolation_level="read_committed") == []
    assert read_values(cluster, "admin-txn", isolation_level="read_uncommitted") == ["open"]


def test_the_transactions_and_consume_commands(cluster: LocalCluster, tmp_path: Path) -> None:
    make_topic(cluster, "cli-txn", partitions=1)
    with Producer(cluster.gateway, transactional_id="t-cli") as producer:
        producer.init_transactions()
        for value, commit in (("gone", False), ("kept", True)):
            producer.begin_transaction()
            producer.send("cli-txn", value.encode(), partition=0)
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()
                producer.abort_transaction()
    listed = assert_ok(cluster.strom("transactions", "list", "--json")).json()
    assert {"transactional_id": "t-cli", "state": "CompleteCommit"}.items() <= next(
        t for t in listed if t["transactional_id"] == "t-cli"
    ).items()
    described = assert_ok(
        cluster.strom("transactions", "describe", "--transactional-id", "t-cli", "--json")
    ).json()
    assert described["state"] == "CompleteCommit" and described["partitions"] == []
    producers = assert_ok(
        cluster.strom(
            "transactions", "describe-producers", "--topic", "cli-txn", "--partition", "0",
            "--json",
        )
    ).json()  # fmt: skip
    assert [p["current_txn_start_offset"] for p in producers] == [None]
    hanging = assert_ok(
        cluster.strom("transactions", "find-hanging", "--topic", "cli-txn", "--json")
    ).json()
    assert hanging == []
    aborted = assert_ok(
        cluster.strom("transactions", "abort", "--transactional-id", "t-cli", "--json")
    ).json()
    assert aborted["state"] == "CompleteCommit"  # nothing open: nothing done
    # gone(0) ABORT(1) kept(2) COMMIT(3): control records are never printed.
    base = ("consume", "cli-txn", "--from-beginning", "--idle-timeout-ms", "2000")
    committed = assert_ok(cluster.strom(*base, "--isolation-level", "read_committed"))
    assert committed.stdout.splitlines() == ["kept"]
    everything = assert_ok(cluster.strom(*base, "--print-offset"))
    assert [line.split()[-1] for line in everything.stdout.splitlines()] == ["gone", "kept"]


EXAMPLE = Path(__file__).parents[3] / "clients" / "examples" / "transform.py"


def test_the_consume_transform_produce_example_is_exactly_once(cluster: LocalCluster) -> None:
    make_topic(cluster, "example-in", partitions=2)
    make_topic(cluster, "example-out", partitions=2)
    inputs = [f"word-{i}" for i in range(2000)]
    for p in range(2):
        cluster.produce("example-in", p, [v.encode() for v in inputs[p::2]])

    def start() -> subprocess.Popen[bytes]:
        argv = [
            sys.executable, str(EXAMPLE), "example-in", "example-out",
            "--bootstrap-server", cluster.gateway, "--group", "example",
            "--transactional-id", "example-1",
        ]  # fmt: skip
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def outputs() -> list[str]:
        return read_values(cluster, "example-out", isolation_level="read_committed")

    def epoch() -> int:
        with cluster.admin() as admin:
            return admin.describe_transactions(["example-1"])["example-1"].producer_epoch

    first = start()
    try:
        wait_until(lambda: len(outputs()) > 0, 60, "the first committed transaction")
    finally:
        first.kill()  # mid-run: what it left open is aborted by the next incarnation
        first.wait(10)
    killed_at = epoch()
    second = start()
    try:
        wait_until(lambda: epoch() > killed_at, 60, "the second incarnation fenced the first")
        wait_until(lambda: len(outputs()) >= len(inputs), 120, "every input transformed")
    finally:
        second.send_signal(signal.SIGTERM)
        _, stderr = second.communicate(timeout=60)
    assert second.returncode == 0, stderr.decode()[-2000:]
    assert sorted(outputs()) == sorted(v.upper() for v in inputs)


def test_perf_produce_in_transactions_and_consume_read_committed(cluster: LocalCluster) -> None:
    make_topic(cluster, "perf-txn", partitions=2)
    produced = assert_ok(
        cluster.strom(
            "perf", "produce", "--topic", "perf-txn", "--num-records", "3000",
            "--record-size", "50", "--throughput", "3000", "--transactional-id", "t-perf",
            "--transaction-duration-ms", "200", "--json",
        ),
    )  # fmt: skip
    summary = [json.loads(line) for line in produced.stdout.splitlines()][-1]
    assert summary["records"] == 3000 and summary["failed"] == 0
    assert summary["transactions"] >= 3  # about a second of sending, 200 ms each
    consumed = assert_ok(
        cluster.strom(
            "perf", "consume", "--topic", "perf-txn", "--messages", "3000",
            "--isolation-level", "read_committed", "--json",
        )
    )  # fmt: skip
    assert [json.loads(line) for line in consumed.stdout.splitlines()][-1]["records"] == 3000
    with cluster.admin() as admin:
        (described,) = admin.describe_transactions(["t-perf"]).values()
    assert described.state == "CompleteCommit"


def test_the_abort_command_by_producer_id(cluster: LocalCluster) -> None:
    make_topic(cluster, "cli-abort", partitions=2)
    producer = Producer(cluster.gateway, transactional_id="t-cli-abort")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("cli-abort", b"open", partition=0)
        producer.flush()
        with cluster.admin() as admin:
            pid = admin.describe_transactions(["t-cli-abort"])["t-cli-abort"].producer_id
        by_pid = ("transactions", "abort", "--topic", "cli-abort", "--producer-id", str(pid))
        # Partition 1 is not in its transaction: refused, nothing done.
        refused = cluster.strom(*by_pid, "--partition", "1")
        assert refused.returncode == 1 and "no ongoing transaction on cli-abort-1" in (
            refused.stderr
        ), refused.explain()
        done = assert_ok(cluster.strom(*by_pid, "--partition", "0", "--json")).json()
        assert done["transactional_id"] == "t-cli-abort"
        assert done["state"] in ("CompleteAbort", "Empty")
        with pytest.raises(FENCED):
            producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    assert read_values(cluster, "cli-abort", isolation_level="read_committed") == []


def test_the_transaction_context_manager(cluster: LocalCluster) -> None:
    make_topic(cluster, "context", partitions=1)
    with Producer(cluster.gateway, transactional_id="t-context") as producer:
        producer.init_transactions()
        with producer.transaction():
            producer.send("context", b"committed", partition=0)
        with pytest.raises(RuntimeError), producer.transaction():
            producer.send("context", b"aborted", partition=0)
            producer.flush()
            raise RuntimeError("the application failed mid-transaction")
    assert read_values(cluster, "context", isolation_level="read_committed") == ["committed"]
    assert read_values(cluster, "context", isolation_level="read_uncommitted") == [
        "committed",
        "aborted",
    ]
