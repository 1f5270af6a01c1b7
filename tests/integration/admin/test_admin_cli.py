"""`strom topics|leaders|reassign` against a real local cluster (real processes, real gRPC).

Tests run in file order on one module-scoped cluster: the topic life cycle and rejections first,
then reassignment, then the leader tests that stop and restart a storage node."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cluster_testkit import (
    CliResult,
    LocalCluster,
    assert_ok,
    assert_one_line_error,
    free_port,
    run_strom,
    wait_until,
)

from strom.types import PartitionDescription

pytestmark = pytest.mark.integration


def _configs(cluster: LocalCluster, topic: str) -> dict[str, dict[str, object]]:
    (described,) = assert_ok(cluster.strom("topics", "describe", topic, "--json")).json()
    return described["configs"]


# -- topic life cycle ---------------------------------------------------------------------------


def test_topic_life_cycle(cluster: LocalCluster) -> None:
    created = assert_ok(
        cluster.strom(
            "topics",
            "create",
            "orders",
            "--partitions",
            "6",
            "--replication-factor",
            "2",
            "--config",
            "retention.ms=3600000",
            "--json",
        )
    )
    assert created.json() == {"topic": "orders", "created": True}

    assert "orders" in assert_ok(cluster.strom("topics", "list")).stdout.splitlines()
    assert "orders" in assert_ok(cluster.strom("topics", "list", "--json")).json()

    table = assert_ok(cluster.strom("topics", "describe", "orders")).stdout
    header = table.splitlines()[0]
    assert "Topic: orders" in header and "PartitionCount: 6" in header, table
    assert "ReplicationFactor: 2" in header and "Configs: retention.ms=3600000" in header, table

    (described,) = assert_ok(cluster.strom("topics", "describe", "orders", "--json")).json()
    assert described["name"] == "orders" and not described["is_internal"]
    partitions = described["partitions"]
    assert [p["partition"] for p in partitions] == list(range(6))
    for p in partitions:
        assert len(p["replicas"]) == 2 and len(set(p["replicas"])) == 2, p
        assert p["leader"] == p["replicas"][0], p  # the preferred replica leads
        assert sorted(p["isr"]) == sorted(p["replicas"]), p
        assert p["leader_epoch"] == 0 and p["error"] == "", p
    assert {p["leader"] for p in partitions} == {1, 2, 3}  # leaders spread over every node
    leaders = [p["leader"] for p in partitions]
    assert all(leaders.count(node) == 2 for node in (1, 2, 3)), leaders
    retention = described["configs"]["retention.ms"]
    assert retention == {
        "name": "retention.ms", "value": "3600000", "source": "TOPIC", "read_only": False
    }  # fmt: skip
    assert described["configs"]["cleanup.policy"]["source"] in ("DEFAULT", "BROKER_DEFAULT")

    # every replica has a partition directory on its node
    for node in (1, 2, 3):
        hosted = {f"orders-{p['partition']}" for p in partitions if node in p["replicas"]}
        wait_until(
            lambda node=node, hosted=hosted: cluster.partition_dirs(node, "orders") == hosted,
            20,
            f"storage-{node} to host {sorted(hosted)}",
        )

    # configs: set, then delete (back to the inherited value)
    assert_ok(
        cluster.strom(
            "topics",
            "alter",
            "orders",
            "--add-config",
            "cleanup.policy=compact",
            "--add-config",
            "retention.ms=7200000",
        )
    )
    configs = _configs(cluster, "orders")
    assert (configs["cleanup.policy"]["value"], configs["cleanup.policy"]["source"]) == (
        "compact",
        "TOPIC",
    )
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == (
        "7200000",
        "TOPIC",
    )
    altered = assert_ok(
        cluster.strom(
            "topics",
            "alter",
            "orders",
            "--delete-config",
            "cleanup.policy",
            "--delete-config",
            "retention.ms",
            "--json",
        )
    )
    assert altered.json() == {"topic": "orders", "altered": True}
    configs = _configs(cluster, "orders")
    assert configs["cleanup.policy"]["source"] in ("DEFAULT", "BROKER_DEFAULT")
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["retention.ms"]["source"] in ("DEFAULT", "BROKER_DEFAULT")
    assert configs["retention.ms"]["value"] == "604800000"
    header = assert_ok(cluster.strom("topics", "describe", "orders")).stdout.splitlines()[0]
    assert header.endswith("Configs: "), header

    # partitions: raise, then a decrease and an unchanged count are refused
    assert_ok(cluster.strom("topics", "alter", "orders", "--partitions", "8"))
    grown = cluster.describe("orders")
    assert [p.partition for p in grown.partitions] == list(range(8))
    assert all(len(p.replicas) == 2 and p.leader == p.replicas[0] for p in grown.partitions)
    assert_one_line_error(
        cluster.strom("topics", "alter", "orders", "--partitions", "4"),
        "orders",
        "cannot be decreased",
    )
    assert_one_line_error(
        cluster.strom("topics", "alter", "orders", "--partitions", "8"), "orders", "8 partitions"
    )
    assert len(cluster.describe("orders").partitions) == 8

    # delete: gone from the list, and every storage node removes its partition directories
    assert any(cluster.partition_dirs(node, "orders") for node in (1, 2, 3))
    deleted = assert_ok(cluster.strom("topics", "delete", "orders", "--json"))
    assert deleted.json() == {"deleted": ["orders"]}
    assert "orders" not in assert_ok(cluster.strom("topics", "list", "--json")).json()
    wait_until(
        lambda: not any(cluster.partition_dirs(node, "orders") for node in (1, 2, 3)),
        20,
        "the storage nodes to remove the orders-* directories",
    )


def test_log_dirs_describe(cluster: LocalCluster) -> None:
    assert_ok(cluster.strom("topics", "create", "dirs", "--partitions", "1",
                            "--replication-factor", "2"))  # fmt: skip
    wait_until(
        lambda: len(cluster.strom("log-dirs", "describe", "--topic", "dirs", "--json").json()
                    ["brokers"][0]["logDirs"]) == 1,
        30,
        "the node's log dir",
    )  # fmt: skip

    def both_replicas() -> dict[str, object] | None:
        found = cluster.strom("log-dirs", "describe", "--topic", "dirs", "--broker", "1,2,3",
                              "--json").json()  # fmt: skip
        held = [p for b in found["brokers"] for d in b["logDirs"] for p in d["partitions"]]
        return found if len(held) == 2 else None

    found = wait_until(both_replicas, 30, "both replicas of dirs-0")
    assert [b["broker"] for b in found["brokers"]] == [1, 2, 3]
    for broker in found["brokers"]:
        (log_dir,) = broker["logDirs"]
        assert broker["error"] is None and log_dir["error"] is None
        assert log_dir["totalBytes"] >= log_dir["usableBytes"] > 0
        for partition in log_dir["partitions"]:
            assert partition["partition"] == "dirs-0"
            assert partition["size"] == 0 and partition["isFuture"] is False
    text = assert_ok(cluster.strom("log-dirs", "describe", "--topic", "dirs")).stdout
    assert "TOTAL-BYTES" in text and "dirs" in text
    missing = cluster.strom("log-dirs", "describe", "--broker", "42")
    assert missing.returncode == 1 and "BROKER_NOT_AVAILABLE" in missing.stdout
    bad = cluster.strom("log-dirs", "describe", "--broker", "x")
    assert_one_line_error(bad, "broker ids")


def test_validate_only_creates_nothing(cluster: LocalCluster) -> None:
    result = assert_ok(
        cluster.strom(
            "topics",
            "create",
            "dry-run",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--validate-only",
        )
    )
    assert "would be created" in result.stdout
    assert "dry-run" not in assert_ok(cluster.strom("topics", "list", "--json")).json()
    assert_one_line_error(
        cluster.strom(
            "topics", "create", "dry-run", "--partitions", "1", "--replication-factor", "4",
            "--validate-only",
        ),
        "replication factor 4",
    )  # fmt: skip


def test_explicit_replica_assignment(cluster: LocalCluster) -> None:
    assert_ok(cluster.strom("topics", "create", "placed", "--replica-assignment", "3:1,1:2,2:3"))
    described = cluster.describe("placed")
    assert [p.replicas for p in described.partitions] == [(3, 1), (1, 2), (2, 3)]
    assert [p.leader for p in described.partitions] == [3, 1, 2]
    assert_ok(cluster.strom("topics", "delete", "placed"))


# -- rejections: one line on stderr, non-zero exit ----------------------------------------------

LONG_NAME = "x" * 250


#: (id, ``strom topics`` arguments, fragments the one error line must contain)
REJECTIONS: list[tuple[str, list[str], list[str]]] = [
    ("slash-in-name", ["create", "bad/name", "--partitions", "1", "--replication-factor", "1"],
     ["bad/name", "illegal characters"]),
    ("250-char-name", ["create", LONG_NAME, "--partitions", "1", "--replication-factor", "1"],
     ["250 characters", "249"]),
    ("dot-name", ["create", ".", "--partitions", "1", "--replication-factor", "1"], ["'.'"]),
    ("dot-dot-name", ["create", "..", "--partitions", "1", "--replication-factor", "1"], ["'..'"]),
    ("rf-above-live-nodes",
     ["create", "too-many", "--partitions", "1", "--replication-factor", "4"],
     ["too-many", "replication factor 4", "live brokers (3)"]),
    ("zero-partitions",
     ["create", "no-partitions", "--partitions", "0", "--replication-factor", "1"],
     ["no-partitions", "partitions"]),
    ("unknown-config",
     ["create", "bad-config", "--partitions", "1", "--config", "no.such.option=1"],
     ["bad-config", "no.such.option"]),
    ("config-out-of-range",
     ["create", "bad-config", "--partitions", "1", "--config", "min.insync.replicas=0"],
     ["bad-config", "min.insync.replicas", "0"]),
    ("config-not-a-number",
     ["create", "bad-config", "--partitions", "1", "--config", "retention.ms=soon"],
     ["bad-config", "retention.ms", "soon"]),
    ("malformed-config", ["create", "bad-config", "--partitions", "1", "--config", "retention.ms"],
     ["--config", "name=value", "retention.ms"]),
    ("unknown-broker-in-assignment", ["create", "bad-placement", "--replica-assignment", "1:2,2:9"],
     ["bad-placement", "[9]", "not registered"]),
    ("malformed-assignment", ["create", "bad-placement", "--replica-assignment", "1:x"],
     ["broker ids", "1,x"]),
    ("describe-unknown", ["describe", "no-such-topic"],
     ["no-such-topic", "UNKNOWN_TOPIC_OR_PARTITION"]),
    ("delete-unknown", ["delete", "no-such-topic"], ["no-such-topic", "does not exist"]),
    ("alter-partitions-unknown", ["alter", "no-such-topic", "--partitions", "3"],
     ["no-such-topic", "does not exist"]),
    ("alter-config-unknown", ["alter", "no-such-topic", "--add-config", "retention.ms=1"],
     ["no-such-topic", "does not exist"]),
    ("alter-nothing", ["alter", "no-such-topic"], ["nothing to alter"]),
    ("malformed-add-config", ["alter", "no-such-topic", "--add-config", "retention.ms"],
     ["--add-config", "name=value"]),
]  # fmt: skip


@pytest.fixture(scope="module")
def rejected(cluster: LocalCluster) -> dict[str, CliResult]:
    """Every command of REJECTIONS, run concurrently (each is an independent process)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            case: pool.submit(cluster.strom, "topics", *args) for case, args, _ in REJECTIONS
        }
        return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize(
    ("case", "fragments"),
    [(case, fragments) for case, _, fragments in REJECTIONS],
    ids=[case for case, _, _ in REJECTIONS],
)
def test_topics_rejections(rejected: dict[str, CliResult], case: str, fragments: list[str]) -> None:
    assert_one_line_error(rejected[case], *fragments)


def test_rejections_created_nothing(cluster: LocalCluster, rejected: dict[str, CliResult]) -> None:
    names = set(assert_ok(cluster.strom("topics", "list", "--json")).json())
    assert not names & {"too-many", "no-partitions", "bad-config", "bad-placement"}, names


def test_duplicate_and_colliding_names(cluster: LocalCluster) -> None:
    assert_ok(cluster.strom("topics", "create", "dup_1", "--partitions", "1"))
    assert_one_line_error(
        cluster.strom("topics", "create", "dup_1", "--partitions", "2"), "dup_1", "already exists"
    )
    assert_one_line_error(
        cluster.strom("topics", "create", "dup.1", "--partitions", "1"), "dup.1", "collides"
    )
    assert len(cluster.describe("dup_1").partitions) == 1  # the first one is untouched
    assert_ok(cluster.strom("topics", "delete", "dup_1"))


def test_unreachable_gateway(tmp_path: Path) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    for args in (
        ["topics", "list"],
        ["topics", "describe", "x"],
        ["topics", "create", "x", "--partitions", "1"],
        ["leaders", "elect"],
    ):
        result = run_strom(*args, "--bootstrap-server", nobody, "--timeout-ms", "5000")
        assert_one_line_error(result, nobody, "UNAVAILABLE")
    plan = tmp_path / "missing.json"
    assert_one_line_error(
        run_strom("reassign", "verify", str(plan), "--bootstrap-server", nobody),
        "cannot read reassignment plan",
    )


# -- reassignment ---------------------------------------------------------------------------------


def _verify(cluster: LocalCluster, plan: Path) -> tuple[int, dict[str, str]]:
    result = cluster.strom("reassign", "verify", str(plan), "--json")
    assert "Traceback" not in result.stderr, result.explain()
    return result.returncode, json.loads(result.stdout)


def test_reassignment_to_new_replicas(cluster: LocalCluster, tmp_path: Path) -> None:
    assert_ok(cluster.strom("topics", "create", "moving", "--replica-assignment", "2:3"))
    before = cluster.describe("moving").partitions[0]
    assert (before.replicas, before.leader, sorted(before.isr)) == ((2, 3), 2, [2, 3])
    wait_until(lambda: cluster.partition_dirs(2, "moving") == {"moving-0"}, 20, "moving-0 on 2")
    payload = [bytes([i % 251]) * 1000 for i in range(200)]
    for _ in range(25):  # 5 MB for the new replica to copy under the throttle
        assert cluster.produce("moving", 0, payload).error_code == 0
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"partitions": [{"topic": "moving", "partition": 0, "replicas": [3, 1]}]})
    )

    started = time.monotonic()
    executed = assert_ok(cluster.strom("reassign", "execute", str(plan), "--throttle", "500000"))
    assert "Reassignment of 1 partitions started" in executed.stdout
    assert_one_line_error(  # a second one on the same partition is refused until this one ends
        cluster.strom("reassign", "execute", str(plan)), "moving-0", "cancel it first"
    )
    during = cluster.describe("moving").partitions[0]
    assert during.replicas == (3, 1, 2), during  # target first, then the replica being removed
    with cluster.admin() as admin:
        ongoing = admin.list_partition_reassignments()
    (key,) = ongoing
    assert ongoing[key] == {"replicas": (3, 1, 2), "adding": (1,), "removing": (2,)}
    # Node 1 copies ~5 MB at 500 kB/s: verify reports progress meanwhile.
    assert _verify(cluster, plan) == (1, {"moving:0": "in progress"})

    def verified() -> dict[str, str] | None:
        code, status = _verify(cluster, plan)
        return status if code == 0 else None

    # The reassignment completes when node 1 caught up and its leader added it to the ISR.
    status = wait_until(verified, 60, "reassign verify to report complete")
    elapsed = time.monotonic() - started
    print(f"reassignment of ~5 MB at 500 kB/s: execute -> verify complete in {elapsed:.2f} s")
    assert status == {"moving:0": "complete"}
    assert elapsed > 2.0, "the throttle did not hold the copy back"
    after = cluster.describe("moving").partitions[0]
    assert after.replicas == (3, 1) and after.leader == 3, after  # leadership moved into target
    assert after.leader_epoch == before.leader_epoch + 1 and sorted(after.isr) == [1, 3], after
    with cluster.admin() as admin:
        assert admin.list_partition_reassignments() == {}
    # the removed replica's node deletes its copy; the added one hosts it
    wait_until(lambda: cluster.partition_dirs(2, "moving") == set(), 20, "node 2 to drop moving-0")
    wait_until(lambda: cluster.partition_dirs(1, "moving") == {"moving-0"}, 20, "moving-0 on 1")
    assert_ok(cluster.strom("topics", "delete", "moving"))


def test_reassignment_within_the_isr_completes_by_itself(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    assert_ok(cluster.strom("topics", "create", "shrinking", "--replica-assignment", "1:2:3"))
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"partitions": [{"topic": "shrinking", "partition": 0, "replicas": [3, 2]}]})
    )
    started = time.monotonic()
    assert_ok(cluster.strom("reassign", "execute", str(plan)))
    wait_until(lambda: _verify(cluster, plan)[0] == 0, 30, "reassign verify to report complete")
    print(f"reassignment within the ISR: complete after {time.monotonic() - started:.2f} s")
    after = cluster.describe("shrinking").partitions[0]
    assert after.replicas == (3, 2) and after.leader == 3 and sorted(after.isr) == [2, 3], after
    assert_ok(cluster.strom("topics", "delete", "shrinking"))


def test_reassign_generate_proposes_a_plan_over_the_given_brokers(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    assert_ok(cluster.strom("topics", "create", "spread", "--replica-assignment", "1:2,1:2,1:2"))
    plan = tmp_path / "proposed.json"
    result = assert_ok(
        cluster.strom(
            "reassign",
            "generate",
            "--topics",
            "spread",
            "--brokers",
            "2,3",
            "--output",
            str(plan),
            "--json",
        )
    )
    shown = json.loads(result.stdout)
    assert [p["replicas"] for p in shown["current"]["partitions"]] == [[1, 2]] * 3
    proposed = json.loads(plan.read_text())["partitions"]
    assert proposed == shown["proposed"]["partitions"]
    assert {p["partition"] for p in proposed} == {0, 1, 2}  # every partition had node 1
    for entry in proposed:
        assert sorted(entry["replicas"]) == [2, 3]  # same replication factor, only 2 and 3
    assert_one_line_error(
        cluster.strom("reassign", "generate", "--topics", "spread", "--brokers", "2,9"),
        "no live broker with id [9]",
    )
    assert_ok(cluster.strom("topics", "delete", "spread"))


def test_reassign_rejections(cluster: LocalCluster, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "x"}]}')
    assert_one_line_error(
        cluster.strom("reassign", "execute", str(bad)), "cannot read reassignment plan"
    )
    unknown = tmp_path / "unknown.json"
    unknown.write_text(
        json.dumps({"partitions": [{"topic": "no-such-topic", "partition": 0, "replicas": [1]}]})
    )
    assert_one_line_error(
        cluster.strom("reassign", "execute", str(unknown)), "no-such-topic-0", "does not exist"
    )
    assert_ok(cluster.strom("topics", "create", "planned", "--replica-assignment", "1"))
    for replicas in ("12", [], [2, 2]):  # a string, an empty list (a cancel), a broker twice
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps({"partitions": [{"topic": "planned", "partition": 0, "replicas": replicas}]})
        )
        assert_one_line_error(cluster.strom("reassign", "execute", str(plan)), "planned")
    empty = tmp_path / "empty.json"
    empty.write_text('{"partitions": []}')
    assert_one_line_error(cluster.strom("reassign", "execute", str(empty)), "no partitions")
    assert_one_line_error(cluster.strom("reassign", "verify", str(empty)), "no partitions")
    with cluster.admin() as admin:
        assert admin.list_partition_reassignments() == {}
    assert cluster.describe("planned").partitions[0].replicas == (1,)
    assert_ok(cluster.strom("topics", "delete", "planned"))


# -- leaders ---------------------------------------------------------------------------------------


def test_preferred_election_not_needed(cluster: LocalCluster) -> None:
    assert_ok(cluster.strom("topics", "create", "steady", "--partitions", "3"))
    result = assert_ok(
        cluster.strom(
            "leaders", "elect", "--partition", "steady:0", "--partition", "steady:2", "--json"
        )
    )
    assert result.json() == {"steady:0": "ELECTION_NOT_NEEDED", "steady:2": "ELECTION_NOT_NEEDED"}
    text = assert_ok(cluster.strom("leaders", "elect", "--partition", "steady:1")).stdout
    assert text.strip() == "steady:1\tELECTION_NOT_NEEDED"
    assert_one_line_error(cluster.strom("leaders", "elect", "--partition", "steady"), "steady")
    # a failed partition: its outcome on stdout, and one error line on stderr
    mixed = cluster.strom("leaders", "elect", "--partition", "steady:0", "--partition", "steady:9")
    assert mixed.returncode == 1, mixed.explain()
    assert mixed.stdout.splitlines() == [
        "steady:0\tELECTION_NOT_NEEDED",
        "steady:9\tUNKNOWN_TOPIC_OR_PARTITION",
    ]
    assert mixed.stderr.splitlines() == [
        "strom: error: election failed for 1 partition(s): steady:9 (UNKNOWN_TOPIC_OR_PARTITION)"
    ]
    assert_ok(cluster.strom("topics", "delete", "steady"))


def test_failover_and_preferred_election(cluster: LocalCluster) -> None:
    assert_ok(cluster.strom("topics", "create", "failover", "--replica-assignment", "1:2,2:3,3:1"))
    before = cluster.describe("failover").partitions
    assert [p.leader for p in before] == [1, 2, 3]

    cluster.stop("storage-3")
    try:
        started = time.monotonic()

        def led_by_1() -> PartitionDescription | None:
            partition = cluster.describe("failover").partitions[2]
            return partition if partition.leader == 1 else None

        moved = wait_until(led_by_1, 20, "failover-2 to be led by node 1")
        print(f"leader of failover-2 moved 3 -> 1 after {time.monotonic() - started:.2f} s")
        assert moved.leader_epoch == before[2].leader_epoch + 1, moved
        assert moved.isr == (1,), moved  # the dead node left the ISR
        table = assert_ok(cluster.strom("topics", "describe", "failover")).stdout
        assert "Partition: 2\tLeader: 1\tLeaderEpoch: 1\tReplicas: 3,1\tIsr: 1" in table, table
        others = cluster.describe("failover").partitions
        assert (others[0].leader, others[1].leader) == (1, 2)  # partitions led elsewhere stay
        # nothing to elect while the preferred replica is down
        result = cluster.strom("leaders", "elect", "--partition", "failover:2", "--json")
        assert result.returncode == 1, result.explain()
        assert json.loads(result.stdout) == {"failover:2": "PREFERRED_LEADER_NOT_AVAILABLE"}
        assert len(result.stderr.splitlines()) == 1, result.explain()
        assert "failover:2 (PREFERRED_LEADER_NOT_AVAILABLE)" in result.stderr
    finally:
        cluster.restart("storage-3")
    cluster.wait_for_brokers()

    # returning does not move leadership by itself
    assert cluster.describe("failover").partitions[2].leader == 1
    # node 3 catches up as a follower and its leader adds it back to the ISR
    wait_until(
        lambda: 3 in cluster.describe("failover").partitions[2].isr, 30, "node 3 back in the ISR"
    )
    result = assert_ok(cluster.strom("leaders", "elect", "--partition", "failover:2", "--json"))
    assert result.json() == {"failover:2": "NONE"}
    back = cluster.describe("failover").partitions[2]
    assert back.leader == 3 and back.leader_epoch == moved.leader_epoch + 1, back
    again = assert_ok(cluster.strom("leaders", "elect", "--partition", "failover:2", "--json"))
    assert again.json() == {"failover:2": "ELECTION_NOT_NEEDED"}
    assert_ok(cluster.strom("topics", "delete", "failover"))


def test_crashed_node_loses_leadership_after_its_session_timeout(cluster: LocalCluster) -> None:
    """SIGKILL: no goodbye, so the controller sees the node leave when its etcd lease (the
    broker session timeout, 9 s by default) expires."""
    assert_ok(cluster.strom("topics", "create", "crash", "--replica-assignment", "2:1,1:2"))
    process = cluster.processes["storage-2"]
    assert process.popen is not None
    process.popen.kill()
    process.popen.wait()
    started = time.monotonic()
    try:

        def failed_over() -> PartitionDescription | None:
            partition = cluster.describe("crash").partitions[0]
            return partition if partition.leader == 1 else None

        moved = wait_until(failed_over, 25, "crash-0 to be led by node 1")
        elapsed = time.monotonic() - started
        print(f"leader of crash-0 moved 2 -> 1 after {elapsed:.2f} s (SIGKILL)")
        assert elapsed < 9 + 5, elapsed  # the session timeout, plus slack for a busy machine
        assert moved.leader_epoch == 1 and moved.isr == (1,), moved
        assert cluster.describe("crash").partitions[1].leader == 1  # led elsewhere: unchanged
    finally:
        cluster.restart("storage-2")
    cluster.wait_for_brokers()
    assert_ok(cluster.strom("topics", "delete", "crash"))
