"""Staged transactions on a real cluster (issue 21): producers stage their transactions
(``prepare_transaction``), an admin in a third client commits them as one decision of the
coordinator; replayed sequences, members not open, prefix listing, aborts by identity, and the
coordinator owning the decision dying right after writing it (its successor finishes it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_testkit import LocalCluster, assert_ok, read_values
from strom_testkit import wait_until

from strom import NewTopic, Producer
from strom.errors import InvalidTxnStateError
from strom.protocol.v1 import coordinator_pb2, gateway_pb2_grpc
from strom.types import StagedTransaction

pytestmark = pytest.mark.integration

#: The commit id whose coordinator exits right after writing its decision (the test hook of
#: strom_coordinator.txn.staged_commits).
HALT_ENV = "STROM_TESTING_HALT_AFTER_STAGED_DECISION"
HALT_COMMIT_ID = "staged-halt"


@pytest.fixture(scope="module")
def halt_hook() -> Iterator[None]:
    """The coordinators of this module's cluster inherit the hook from the environment."""
    os.environ[HALT_ENV] = HALT_COMMIT_ID
    try:
        yield
    finally:
        os.environ.pop(HALT_ENV, None)


@pytest.fixture(scope="module")
def cluster(halt_hook: None, cluster: LocalCluster) -> LocalCluster:
    """The transactions conftest's cluster (two coordinators), started with the hook set."""
    return cluster


def make_topic(cluster: LocalCluster, name: str) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, 2, 3, topic_configs={"min.insync.replicas": "2"})])
    wait_until(
        lambda: all(p.leader >= 0 and len(p.isr) == 3 for p in cluster.describe(name).partitions),
        30,
        f"{name}: leaders and full ISRs",
    )
    for p in range(2):
        cluster.wait_hosted(name, p)


def stage(cluster: LocalCluster, txn_id: str, topic: str, values: list[str]) -> StagedTransaction:
    """What a Spark task does: begin, write, prepare_transaction(), close (left open)."""
    producer = Producer(
        bootstrap_servers=cluster.gateway, transactional_id=txn_id, transaction_timeout_ms=60_000
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.send(topic, value.encode(), partition=i % 2)
        staged = producer.prepare_transaction()
        with pytest.raises(InvalidTxnStateError, match="prepare_transaction"):
            producer.send(topic, b"late", partition=0)
        with pytest.raises(InvalidTxnStateError, match="prepare_transaction"):
            producer.abort_transaction()
    finally:
        producer.close(timeout=10)  # does not abort the staged transaction
    assert staged.transactional_id == txn_id
    return staged


def committed(cluster: LocalCluster, topic: str) -> list[str]:
    return sorted(read_values(cluster, topic, isolation_level="read_committed"))


def coordinator_of(cluster: LocalCluster, key: str) -> str:
    with grpc.insecure_channel(cluster.gateway) as channel:
        response = gateway_pb2_grpc.GatewayStub(channel).FindCoordinator(
            coordinator_pb2.FindCoordinatorRequest(
                group_id=key, key_type=coordinator_pb2.TRANSACTION
            ),
            timeout=20,
        )
    assert response.error_code == 0, response.error_message
    return f"coordinator-{response.coordinator.node_id}"


def ids_near_and_far(cluster: LocalCluster, prefix: str, commit_id: str) -> tuple[str, str]:
    """A transactional id on the coordinator of ``commit_id`` and one on another."""
    home = coordinator_of(cluster, commit_id)
    near = far = ""
    for i in range(100):
        tid = f"{prefix}{i}"
        if coordinator_of(cluster, tid) == home:
            near = near or tid
        else:
            far = far or tid
        if near and far:
            return near, far
    raise AssertionError(f"no ids with {prefix!r} on both sides of {home}")


def test_staged_members_commit_as_one_decision_and_replays_commit_nothing(
    cluster: LocalCluster,
) -> None:
    make_topic(cluster, "st-one")
    # one member served by the decision's own coordinator, one by the other coordinator
    local_id, remote_id = ids_near_and_far(cluster, "st-one-w-", "st-one")
    first = stage(cluster, local_id, "st-one", ["a-0", "a-1", "a-2"])
    second = stage(cluster, remote_id, "st-one", ["b-0", "b-1"])
    with cluster.admin() as admin:  # a third client
        listed = admin.list_transactions(transactional_id_prefix="st-one-w-")
        assert [(t.transactional_id, t.state) for t in listed] == sorted(
            [(local_id, "Ongoing"), (remote_id, "Ongoing")]
        )
        result = admin.commit_staged_transactions("st-one", 0, [first, second], b'{"batch": 0}')
        assert not result.already_committed
        assert result.commit.state == "Committed" and result.commit.sequence == 0
        assert set(result.commit.members) == {first, second}
        assert result.commit.failed_members == () and result.commit.metadata == b'{"batch": 0}'
        assert admin.describe_staged_commit("st-one") == result.commit
        assert admin.describe_staged_commit("st-none") is None
        shown = assert_ok(cluster.strom("transactions", "describe-commit", "--commit-id",
                                        "st-one", "--json")).json()  # fmt: skip
        assert (shown["sequence"], shown["state"], shown["metadata"]) == (
            0,
            "Committed",
            '{"batch": 0}',
        )
        assert {m["transactional_id"] for m in shown["members"]} == {local_id, remote_id}
        # the same call again (a lost answer): recognised, answered alike
        assert admin.commit_staged_transactions("st-one", 0, [second, first], b"") == result
        wait_until(lambda: len(committed(cluster, "st-one")) == 5, 30, "both members visible")
        assert committed(cluster, "st-one") == ["a-0", "a-1", "a-2", "b-0", "b-1"]

        # a replayed batch with new members: nothing of it is committed, the caller aborts them
        replayed = stage(cluster, "st-one-retry", "st-one", ["dup-0", "dup-1"])
        again = admin.commit_staged_transactions("st-one", 0, [replayed], b"")
        assert again.already_committed and again.commit == result.commit
        admin.abort_staged_transactions([replayed])
        admin.abort_staged_transactions([replayed, first])  # ended ones: not an error
        # the next batch goes on
        third = stage(cluster, "st-one-next", "st-one", ["c-0"])
        nxt = admin.commit_staged_transactions("st-one", 1, [third], b'{"batch": 1}')
        assert not nxt.already_committed and nxt.commit.sequence == 1
    wait_until(lambda: "c-0" in committed(cluster, "st-one"), 30, "batch 1 visible")
    assert committed(cluster, "st-one") == ["a-0", "a-1", "a-2", "b-0", "b-1", "c-0"]
    assert {"dup-0", "dup-1"} <= set(
        read_values(cluster, "st-one", isolation_level="read_uncommitted")
    )


def test_a_member_not_open_refuses_the_decision_and_commits_nothing(cluster: LocalCluster) -> None:
    make_topic(cluster, "st-refused")
    kept = stage(cluster, "st-refused-0", "st-refused", ["k-0", "k-1"])
    gone = stage(cluster, "st-refused-1", "st-refused", ["g-0", "g-1"])
    with cluster.admin() as admin:
        admin.abort_staged_transactions([gone])  # e.g. aborted by the driver meanwhile
        with pytest.raises(InvalidTxnStateError, match="st-refused-1"):
            admin.commit_staged_transactions("st-refused", 0, [kept, gone])
        assert admin.describe_staged_commit("st-refused") is None
        # nothing committed: the other member is still open, untouched
        assert admin.describe_transactions(["st-refused-0"])["st-refused-0"].state == "Ongoing"
        admin.abort_staged_transactions([kept])
    assert committed(cluster, "st-refused") == []


def test_the_new_owner_finishes_a_decision_whose_coordinator_died(cluster: LocalCluster) -> None:
    make_topic(cluster, "st-halt")
    victim = coordinator_of(cluster, HALT_COMMIT_ID)
    members = [
        stage(cluster, f"st-halt-{i}", "st-halt", [f"h{i}-0", f"h{i}-1", f"h{i}-2"])
        for i in range(2)
    ]
    try:
        with cluster.admin() as admin:
            # The owner writes the decision and exits before committing any member; the
            # admin's call is retried by the gateway and the admin until the other coordinator
            # owns the partition, finishes the decision and recognises the retry.
            result = admin.commit_staged_transactions(HALT_COMMIT_ID, 7, members, b"m")
            assert cluster.processes[victim].exit_code() == 70  # the hook fired
            assert not result.already_committed and result.commit.state == "Committed"
            assert result.commit.sequence == 7 and result.commit.failed_members == ()
        # ... and it was the successor that finished the dead owner's decision (not a new one)
        finished_by = [
            name
            for name, process in cluster.processes.items()
            if name.startswith("coordinator-")
            and name != victim
            and _logged(process.log_path, "finishing a staged commit", HALT_COMMIT_ID)
        ]
        assert finished_by, "no other coordinator finished the decision"
        wait_until(lambda: len(committed(cluster, "st-halt")) == 6, 30, "members visible")
        assert committed(cluster, "st-halt") == sorted(
            f"h{i}-{j}" for i in range(2) for j in range(3)
        )
    finally:
        if cluster.processes[victim].exit_code() is not None:
            cluster.restart(victim)


def _logged(path: Path, *fragments: str) -> bool:
    text = path.read_text(encoding="utf-8", errors="replace")
    return any(all(f in line for f in fragments) for line in text.splitlines())
