"""What the console derives from log dirs and two samples: disk use per node, partition and
topic sizes, in/out rates, the overview's controllers; and its size formatting."""

from __future__ import annotations

from strom.admin.log_dirs import BrokerLogDirs, LogDirDescription, ReplicaInfo
from strom.types import ClusterDescription, NodeInfo, PartitionDescription, TopicDescription
from strom.types import TopicPartition as TP
from strom_console.disk import node_disks, partition_sizes, replica_sizes
from strom_console.overview import summarize
from strom_console.rates import by_topic, bytes_out, per_second, records_out
from strom_console.sampler import in_turn
from strom_console.web import _size

GiB = 1 << 30


def _dir(path: str, replicas: dict[TP, int], total: int = 100 * GiB, usable: int = 60 * GiB,
         error: str = "") -> LogDirDescription:  # fmt: skip
    return LogDirDescription(
        path, total, usable, {tp: ReplicaInfo(size, 0) for tp, size in replicas.items()}, error
    )


FOUND = [
    BrokerLogDirs(1, "h:1", (_dir("/a", {TP("t", 0): 500, TP("t", 1): 40}),
                             _dir("/b", {TP("u", 0): 7}, total=10 * GiB, usable=GiB))),
    BrokerLogDirs(2, "h:2", (_dir("/a", {TP("t", 0): 480}),
                             _dir("/c", {}, total=-1, usable=-1, error="KAFKA_STORAGE_ERROR"))),
    BrokerLogDirs(3, "h:3", (), "BROKER_NOT_AVAILABLE", "node 3 is not a live storage node"),
]  # fmt: skip
TOPICS = [
    TopicDescription("t", "id", False, (PartitionDescription(0, 2, 0, (2, 1), (2, 1)),
                                        PartitionDescription(1, -1, 0, (1,), ()))),
    TopicDescription("u", "id", False, (PartitionDescription(0, 1, 0, (1,), (1,)),)),
    TopicDescription("unreported", "id", False, (PartitionDescription(0, 3, 0, (3,), (3,)),)),
]  # fmt: skip


def test_node_disks_sum_readable_directories_and_name_problems() -> None:
    disks = node_disks(FOUND)
    one, two, three = disks[1], disks[2], disks[3]
    assert (one.used_bytes, one.total_bytes, one.usable_bytes, one.dirs) == (
        547,
        110 * GiB,
        61 * GiB,
        2,
    )
    assert one.error == "" and round(one.used_fraction or 0, 3) == round(1 - 61 / 110, 3)
    assert (two.used_bytes, two.total_bytes, two.dirs) == (480, 100 * GiB, 2)
    assert two.error == "/c: KAFKA_STORAGE_ERROR"
    assert three.total_bytes is None and three.used_fraction is None
    assert three.error.startswith("BROKER_NOT_AVAILABLE")


def test_a_partitions_size_is_its_leaders_replica_else_its_largest() -> None:
    replicas = replica_sizes(FOUND)
    assert replicas[TP("t", 0)] == {1: 500, 2: 480}
    sizes = partition_sizes(replicas, TOPICS)
    assert sizes == {TP("t", 0): 480, TP("t", 1): 40, TP("u", 0): 7}  # leader 2; no leader
    assert by_topic(sizes) == {"t": 520, "u": 7}


def test_rates_in_and_out() -> None:
    assert per_second({"t": 100, "u": 50}, {"t": 300, "u": 20, "new": 5}, 2.0) == {
        "t": 100.0, "u": 0.0}  # fmt: skip
    assert per_second({"t": 1}, {"t": 2}, 0) == {}
    before = {"g1": {TP("t", 0): 10, TP("t", 1): 5}, "gone": {TP("t", 0): 0}}
    after = {"g1": {TP("t", 0): 30, TP("t", 1): 5, TP("u", 0): 9}, "g2": {TP("t", 0): 99}}
    out = records_out(before, after, 4.0)
    assert out == {"t": 5.0}  # only g1 sampled twice; u's partition is new to it
    assert bytes_out(out, {"t": 2000}, {"t": 100}) == {"t": 100.0}  # 20 B per record
    assert bytes_out(out, {"t": 2000}, {"t": 0}) == {}
    # Groups asked in turn: each group's records over the time since it was last asked.
    after["g3"], before["g3"] = {TP("t", 0): 60}, {TP("t", 0): 0}
    assert records_out(before, after, {"g1": 4.0, "g3": 20.0}) == {"t": 8.0}  # 5 + 3


def test_a_sample_asks_the_groups_in_turn_when_they_do_not_fit() -> None:
    groups = [f"g{i}" for i in range(5)]
    assert in_turn(groups, 3, 5) == (groups, 0)  # all fit: all, every time
    seen, start = [], 0
    for _ in range(5):
        asked, start = in_turn(groups, start, 2)
        assert len(asked) == len(set(asked)) == 2
        seen += asked
    assert seen == groups * 2  # in order, wrapping around: each asked as often
    assert in_turn(groups, 99, 2)[0] == ["g4", "g0"]  # a start past the end (groups went)


def test_overview_lists_controllers_active_first_and_disk_use() -> None:
    active = NodeInfo(5, "h", 9005)
    cluster = ClusterDescription(
        "c", active, (NodeInfo(1, "h", 1), NodeInfo(2, "h", 2)),
        (NodeInfo(4, "h", 9004), NodeInfo(5, "h", 9005)),
    )  # fmt: skip
    o = summarize(cluster, TOPICS, [], disks=node_disks(FOUND), bytes_in={"t": 10.0, "u": 2.5})
    assert [(c.node_id, c.active) for c in o.controllers] == [(5, True), (4, False)]
    assert o.used_bytes == 547 + 480 and o.bytes_in == 12.5 and o.rate_out is None
    assert [n.disk.used_bytes if n.disk else None for n in o.nodes] == [547, 480]
    older = ClusterDescription("c", active, ())  # a gateway that lists no controllers
    assert [(c.node_id, c.active) for c in summarize(older, [], []).controllers] == [(5, True)]


def test_sizes_for_people() -> None:
    assert [_size(v) for v in (None, -1, 0, 1023, 1024, 5 * 1024 * 1024 + 1, 3 * GiB)] == [
        "-", "-", "0 B", "1,023 B", "1.0 KiB", "5.0 MiB", "3.0 GiB"]  # fmt: skip
