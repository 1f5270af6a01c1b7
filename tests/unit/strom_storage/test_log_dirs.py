"""Log-dir reports (DescribeLogDirs' domain side): each directory's replicas and their sizes,
the topic filter, a directory whose filesystem cannot be read, and the node's answer built
from the reports."""

from __future__ import annotations

from pathlib import Path

from storage_batches import simple_batch

from strom.protocol.v1 import common_pb2
from strom_server.runtime.clock import ManualClock
from strom_storage.convert import log_dirs_response
from strom_storage.log.log_dirs import (
    FilesystemUsage,
    LogDirReport,
    ReplicaSize,
    describe_log_dirs,
    filesystem_usage,
)
from strom_storage.log.log_manager import LogManager


def test_replicas_by_directory_with_sizes_and_lag(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, clock=clock)
    manager.startup()
    for topic, partition in (("orders", 0), ("orders", 1), ("audit", 0)):
        manager.get_or_create_log(topic, partition)
    orders_0 = manager.get_log("orders", 0)
    assert orders_0 is not None
    orders_0.append_as_leader(simple_batch(3))
    orders_0.update_high_watermark(3)
    reports = describe_log_dirs(manager.log_dirs, manager.logs())
    assert [r.path for r in reports] == [str(d) for d in dirs]
    sizes = {(r.topic, r.partition): r for report in reports for r in report.replicas}
    assert sorted(sizes) == [("audit", 0), ("orders", 0), ("orders", 1)]
    assert sizes["orders", 0].size_bytes == len(simple_batch(3)) == orders_0.size_in_bytes
    assert sizes["orders", 1].size_bytes == 0
    assert all(r.offset_lag == 0 and not r.is_future for r in sizes.values())
    for report in reports:
        assert report.usage is not None and report.usage.total_bytes >= report.usage.usable_bytes
        assert report.replicas == sorted(report.replicas, key=lambda r: (r.topic, r.partition))
        held = {p.name for p in Path(report.path).iterdir() if p.is_dir()}
        assert held == {f"{r.topic}-{r.partition}" for r in report.replicas}

    only = describe_log_dirs(manager.log_dirs, manager.logs(), ["audit"])
    assert [(r.topic, r.partition) for d in only for r in d.replicas] == [("audit", 0)]
    manager.close()


def test_an_unreadable_filesystem_is_reported_with_the_replicas(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.get_or_create_log("t", 0)

    def broken(path: Path) -> FilesystemUsage:
        raise OSError(5, "Input/output error")

    (report,) = describe_log_dirs(manager.log_dirs, manager.logs(), usage=broken)
    assert report.usage is None and "Input/output error" in report.error
    assert [(r.topic, r.partition) for r in report.replicas] == [("t", 0)]
    manager.close()


def test_filesystem_usage_of_a_real_directory(tmp_path: Path) -> None:
    usage = filesystem_usage(tmp_path)
    assert usage.total_bytes > 0 and 0 <= usage.usable_bytes <= usage.total_bytes


def test_the_answer_groups_replicas_by_topic_and_marks_an_unreadable_directory() -> None:
    replicas = [ReplicaSize("audit", 0, 7, 0), ReplicaSize("orders", 0, 5, 1)]
    replicas.append(ReplicaSize("orders", 2, 3, 0))
    reports = [
        LogDirReport("/a", FilesystemUsage(100, 40), replicas),
        LogDirReport("/b", None, [ReplicaSize("orders", 1, 9, 0)], "/b: Input/output error"),
    ]
    (node,) = log_dirs_response(4, reports).brokers
    assert node.node_id == 4 and [d.path for d in node.log_dirs] == ["/a", "/b"]
    good, bad = node.log_dirs
    assert (good.error_code, good.total_bytes, good.usable_bytes) == (0, 100, 40)
    shown = [(t.name, [(p.partition, p.size_bytes, p.offset_lag) for p in t.partitions])
             for t in good.topics]  # fmt: skip
    assert shown == [("audit", [(0, 7, 0)]), ("orders", [(0, 5, 1), (2, 3, 0)])]
    assert bad.error_code == common_pb2.KAFKA_STORAGE_ERROR
    assert (bad.total_bytes, bad.usable_bytes) == (-1, -1)
    assert bad.error_message == "/b: Input/output error"
    assert [(t.name, [p.partition for p in t.partitions]) for t in bad.topics] == [("orders", [1])]
