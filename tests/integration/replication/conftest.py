"""Fixtures of the replication tests: one cluster whose followers leave the ISR after 2 s of
lag and whose nodes' sessions expire after 6 s, so faults show within a test's patience."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from replication_testkit import LAG_MAX_MS, SESSION_MS


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("replication"),
        storage_flags=(
            "--replica.lag.time.max.ms", str(LAG_MAX_MS),
            "--broker.session.timeout.ms", str(SESSION_MS),
            "--replica.fetch.backoff.ms", "200",
        ),
    )  # fmt: skip
