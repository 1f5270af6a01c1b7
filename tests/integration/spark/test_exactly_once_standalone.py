"""exactly_once batch writes on a real Spark standalone cluster of two hosts (standalone_spark):
a speculative copy that wins while the first attempt stalls mid-write, and an executor
SIGKILLed mid-write whose task Spark runs again on the other host. Each row must be visible
once to read_committed readers, and no transaction of the write may stay open."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from eos_standalone_driver import PAD, PARTITIONS
from spark_testkit import new_topic, topic_values
from standalone_spark import standalone_spark

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DRIVER = Path(__file__).with_name("eos_standalone_driver.py")
ROWS = 8_000


CASES = ("speculation", "executor-lost")


@dataclass
class Written:
    topic: str
    prefix: str
    markers: Path


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, spark_cluster) -> dict[str, Written]:  # type: ignore[no-untyped-def]
    """Both cases' writes, by one driver on a standalone cluster started for this module."""
    work = tmp_path_factory.mktemp("spark-standalone")
    cases = {
        case: Written(new_topic(spark_cluster, 2), f"eos-{case}-{uuid.uuid4().hex[:6]}",
                      work / "markers" / case)
        for case in CASES
    }  # fmt: skip
    with standalone_spark(work) as spark_hosts:
        log = work / "driver.log"
        with log.open("wb") as out:
            done = subprocess.run(
                [sys.executable, str(DRIVER), spark_hosts.master_url, spark_cluster.gateway,
                 str(work / "markers"), str(ROWS),
                 *(f"{case}:{w.topic}:{w.prefix}" for case, w in cases.items())],
                env=spark_hosts.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=600,
                check=False,
            )  # fmt: skip
    text = log.read_text(errors="replace")
    assert done.returncode == 0, text[-4000:]
    return {case: w for case, w in cases.items() if f"WRITE DONE {case}" in text}


def attempts(written: dict[str, Written], case: str, partition: int) -> list[str]:
    """The attempts of ``partition`` that ran (its fault injected by one of them)."""
    assert case in written, f"the {case} write did not complete"
    names = {p.name for p in written[case].markers.iterdir()}
    assert f"fault-{partition}" in names, sorted(names)
    return sorted(n for n in names if n.startswith(f"{partition}-"))


def expected() -> Counter[str]:
    per = ROWS // PARTITIONS
    return Counter(f"{p}-{i}-{PAD}" for p in range(PARTITIONS) for i in range(per))


def assert_exactly_once_and_nothing_open(cluster, topic: str, prefix: str) -> int:  # type: ignore[no-untyped-def]
    got = Counter(v.decode() for v in topic_values(cluster, topic))
    assert got == expected(), f"{sum(got.values())} rows visible, {len(got)} distinct"
    with cluster.admin() as admin:
        states = {
            t.transactional_id: t.state
            for t in admin.list_transactions(transactional_id_prefix=f"{prefix}-")
        }
    still_open = {i: s for i, s in states.items() if s in ("Ongoing", "PrepareCommit")}
    assert not still_open, still_open
    return len(topic_values(cluster, topic, read_committed=False))


@pytest.mark.parametrize(
    ("case", "partition"),
    [
        # Spark starts a speculative copy of partition 0 on the other host; the copy wins.
        pytest.param("speculation", 0, id="speculative_copy_wins_stalled_attempt_adds_nothing"),
        # Partition 1 runs again after its executor died.
        pytest.param("executor-lost", 1, id="executor_lost_mid_write_adds_nothing"),
    ],
)
def test_a_partition_run_twice_is_written_once(  # type: ignore[no-untyped-def]
    written: dict[str, Written], spark_cluster, case: str, partition: int
) -> None:
    assert len(attempts(written, case, partition)) >= 2
    w = written[case]
    assert assert_exactly_once_and_nothing_open(spark_cluster, w.topic, w.prefix) >= ROWS
