"""exactly_once batch writes on a real Spark standalone cluster of two hosts (standalone_spark):
a speculative copy that wins while the first attempt stalls mid-write, and an executor
SIGKILLed mid-write whose task Spark runs again on the other host. Each row must be visible
once to read_committed readers, and no transaction of the write may stay open."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from eos_standalone_driver import PAD, PARTITIONS
from spark_testkit import new_topic, topic_values
from standalone_spark import StandaloneSpark, standalone_spark

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DRIVER = Path(__file__).with_name("eos_standalone_driver.py")
ROWS = 8_000


@pytest.fixture(scope="module")
def spark_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    with standalone_spark(tmp_path_factory.mktemp("spark-standalone")) as cluster:
        yield cluster


def run_write(  # type: ignore[no-untyped-def]
    spark_hosts: StandaloneSpark, cluster, case: str, tmp_path: Path
) -> tuple[str, str, Path]:
    topic, prefix = new_topic(cluster, 2), f"eos-{case}-{uuid.uuid4().hex[:6]}"
    markers = tmp_path / "markers"
    markers.mkdir()
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        done = subprocess.run(
            [sys.executable, str(DRIVER), spark_hosts.master_url, cluster.gateway, str(markers),
             case, topic, prefix, str(ROWS)],
            env=spark_hosts.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )  # fmt: skip
    text = log.read_text(errors="replace")
    assert done.returncode == 0 and "WRITE DONE" in text, text[-4000:]
    return topic, prefix, markers


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


def test_speculative_copy_wins_and_the_stalled_attempt_adds_nothing(  # type: ignore[no-untyped-def]
    spark_hosts: StandaloneSpark, spark_cluster, tmp_path: Path
) -> None:
    topic, prefix, markers = run_write(spark_hosts, spark_cluster, "speculation", tmp_path)
    assert (markers / "0-0").exists() and (markers / "0-1").exists(), sorted(
        p.name for p in markers.iterdir()
    )  # Spark did start a speculative copy of partition 0
    in_log = assert_exactly_once_and_nothing_open(spark_cluster, topic, prefix)
    assert in_log >= ROWS


def test_executor_lost_mid_write_adds_nothing(  # type: ignore[no-untyped-def]
    spark_hosts: StandaloneSpark, spark_cluster, tmp_path: Path
) -> None:
    topic, prefix, markers = run_write(spark_hosts, spark_cluster, "executor-lost", tmp_path)
    assert (markers / "1-0").exists() and (markers / "1-1").exists(), sorted(
        p.name for p in markers.iterdir()
    )  # partition 1 ran again after its executor died
    in_log = assert_exactly_once_and_nothing_open(spark_cluster, topic, prefix)
    assert in_log >= ROWS
