"""A cluster for the transaction tests: two coordinators (so that a killed one's transactions
move to the other), short sessions and a fast timeout sweep, small internal topics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_testkit import LocalCluster, start_local_cluster

SESSION_MS = 4000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("txn-cluster"),
        coordinators=2,
        coordinator_flags=(
            "--coordinator.session.timeout.ms", str(SESSION_MS),
            "--group.initial.rebalance.delay.ms", "0",
            "--offsets.topic.num.partitions", "3",
            "--transaction.state.log.num.partitions", "3",
            "--transaction.abort.timed.out.transaction.cleanup.interval.ms", "500",
        ),
        storage_flags=("--broker.session.timeout.ms", str(SESSION_MS)),
        controller_flags=("--controller.session.timeout.ms", str(SESSION_MS)),
    )  # fmt: skip
