"""Two coordinators share __consumer_offsets through etcd: created on first use, partitions split
by rendezvous hashing, commits survive kill -9 of their coordinator, a paused former owner is
fenced, and a restarted coordinator gets its partitions back.

The steps build on each other (one cluster for the module), in order."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from cluster_testkit import LocalCluster
from coordsvc_testkit import (
    LEASE_S,
    LOAD_IN_PROGRESS,
    NONE,
    NOT_COORDINATOR,
    OFFSETS,
    PARTITIONS,
    commit,
    fetch,
    find_coordinator,
    live_coordinators,
    owners,
)
from strom_testkit import free_port, wait_until

from strom_coordinator.partitions.hosting import key_partition
from strom_coordinator.runtime.ownership import preferred

pytestmark = pytest.mark.integration

TOPIC = "orders"


def partition_of(group: str) -> int:
    return key_partition(group, PARTITIONS)


def group_served_by(coordinator_id: int) -> str:
    """A group whose offsets partition the coordinator is preferred for (both live)."""
    for i in range(1000):
        group = f"group-{i}"
        if preferred({1, 2}, partition_of(group)) == coordinator_id:
            return group
    raise AssertionError("no such group")


def balanced(cluster: LocalCluster, live: set[int]) -> dict[int, int] | None:
    """The ownership map once every partition is owned by its preferred live coordinator."""
    found = owners(cluster)
    wanted = {p: preferred(live, p) for p in range(PARTITIONS)}
    return found if found == wanted and live_coordinators(cluster) == live else None


def test_first_find_creates_the_offsets_topic_and_the_instances_split_it(
    coordinated: LocalCluster,
) -> None:
    with coordinated.admin() as admin:
        assert OFFSETS not in admin.list_topics(include_internal=True)
    first = coordinated.coordinator_address(1)
    coordinator_id, address = find_coordinator(first, "group-a")
    with coordinated.admin() as admin:
        (topic,) = admin.describe_topics([OFFSETS])
        configs = admin.describe_configs(OFFSETS)
    assert len(topic.partitions) == PARTITIONS
    assert all(len(p.replicas) == 3 for p in topic.partitions)  # 5 capped by 3 live nodes
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.insync.replicas"].value == "2"
    assert configs["segment.bytes"].value == str(100 * 1024 * 1024)
    split = wait_until(lambda: balanced(coordinated, {1, 2}), 30, "the partitions split")
    assert set(split.values()) == {1, 2}
    assert coordinator_id == split[partition_of("group-a")]
    assert address == coordinated.coordinator_address(coordinator_id)
    # Either instance names the same coordinator.
    assert find_coordinator(coordinated.coordinator_address(2), "group-a") == (
        coordinator_id,
        address,
    )


def test_commit_then_fetch_and_not_coordinator_elsewhere(coordinated: LocalCluster) -> None:
    for owner in (1, 2):
        group = group_served_by(owner)
        coordinator_id, address = find_coordinator(coordinated.coordinator_address(1), group)
        assert coordinator_id == owner
        assert commit(address, group, {(TOPIC, 0): 5, (TOPIC, 1): 7}) == {0: NONE, 1: NONE}
        assert fetch(address, group, TOPIC, [0, 1, 2]) == (NONE, {0: 5, 1: 7, 2: -1})
        other = coordinated.coordinator_address(3 - owner)
        assert commit(other, group, {(TOPIC, 0): 6}) == {0: NOT_COORDINATOR}


def test_kill_9_of_the_coordinator_loses_no_committed_offset(coordinated: LocalCluster) -> None:
    group = group_served_by(2)
    _, address = find_coordinator(coordinated.coordinator_address(1), group)
    offsets = {(TOPIC, p): 100 + p for p in range(4)}
    assert set(commit(address, group, offsets).values()) == {NONE}
    survivor = coordinated.coordinator_address(1)
    killed_at = time.monotonic()
    coordinated.kill("coordinator-2")

    def served_by_survivor() -> bool:
        return find_coordinator(survivor, group)[0] == 1 and fetch(
            survivor, group, TOPIC, [0, 1, 2, 3]
        ) == (NONE, {p: 100 + p for p in range(4)})

    wait_until(served_by_survivor, 4 * LEASE_S + 20, "the survivor serving the group")
    # The lease TTL, plus etcd's expiry granularity and the take-over itself.
    assert time.monotonic() - killed_at < 2 * LEASE_S + 10
    assert set(wait_until(lambda: balanced(coordinated, {1}), 30, "all on 1").values()) == {1}
    # The survivor commits on: the take-over fenced nothing it needs.
    assert commit(survivor, group, {(TOPIC, 0): 200}) == {0: NONE}


def test_restart_rebalances_ownership_back(coordinated: LocalCluster) -> None:
    coordinated.restart("coordinator-2")
    wait_until(lambda: balanced(coordinated, {1, 2}), 30, "ownership moved back")
    group = group_served_by(2)
    coordinator_id, address = find_coordinator(coordinated.coordinator_address(1), group)
    assert coordinator_id == 2

    def loaded() -> bool:
        code, offsets = fetch(address, group, TOPIC, [0, 1, 2, 3])
        return code == NONE and offsets == {0: 200, 1: 101, 2: 102, 3: 103}

    wait_until(loaded, 30, "coordinator-2 serving the offsets committed meanwhile")


def test_a_paused_former_owner_is_fenced(coordinated: LocalCluster) -> None:
    group = group_served_by(2)
    paused = coordinated.coordinator_address(2)
    survivor = coordinated.coordinator_address(1)
    assert commit(paused, group, {(TOPIC, 0): 300}) == {0: NONE}
    coordinated.signal("coordinator-2", signal.SIGSTOP)
    try:
        wait_until(lambda: find_coordinator(survivor, group)[0] == 1, 4 * LEASE_S + 20,
                   "the survivor taking over")  # fmt: skip
        wait_until(lambda: fetch(survivor, group, TOPIC, [0]) == (NONE, {0: 300}), 30,
                   "the survivor loaded the group")  # fmt: skip
        assert commit(survivor, group, {(TOPIC, 0): 301}) == {0: NONE}
    finally:
        coordinated.signal("coordinator-2", signal.SIGCONT)
    # The former owner still believes it owns the group: its write is refused (fenced by the
    # survivor's producer epoch) or it has noticed its lost lease and unloaded. Only if it has
    # meanwhile registered again and legitimately taken the partition back (with a new epoch,
    # after reading the survivor's commit) may the commit succeed.
    (code,) = commit(paused, group, {(TOPIC, 0): 999}, retry=False).values()
    assert code in (NOT_COORDINATOR, LOAD_IN_PROGRESS, NONE)
    expected = 999 if code == NONE else 301
    # It registers again and gets its partitions back, with the survivor's commit.
    wait_until(lambda: balanced(coordinated, {1, 2}), 30, "ownership moved back")

    def back() -> bool:
        coordinator_id, address = find_coordinator(survivor, group)
        return coordinator_id == 2 and fetch(address, group, TOPIC, [0]) == (NONE, {0: expected})

    wait_until(back, 30, "coordinator-2 serving the group again")
    log = coordinated.processes["coordinator-2"].log_path.read_text()
    assert "registration lease lost" in log or "fenced" in log


def test_a_second_instance_with_a_taken_id_refuses_to_start(coordinated: LocalCluster) -> None:
    spec = coordinated.spec
    argv = [
        sys.executable, "-m", "strom_coordinator",
        "--coordinator-id", "1",
        "--listen", f"{spec.host}:{free_port()}",
        "--etcd-endpoints", f"{spec.host}:{spec.etcd_client_port}",
        "--bootstrap-servers", coordinated.gateway,
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "coordinator id 1 is already registered" in done.stdout + done.stderr
    assert live_coordinators(coordinated) == {1, 2}
