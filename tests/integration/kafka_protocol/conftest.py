"""One cluster for the Kafka-protocol tests: a short group join delay and small internal
topics, so that Kafka clients' groups and transactions start quickly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_testkit import LocalCluster, start_local_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("kafka-cluster"),
        coordinator_flags=(
            "--group.initial.rebalance.delay.ms", "0",
            "--offsets.topic.num.partitions", "3",
            "--transaction.state.log.num.partitions", "3",
        ),
    )  # fmt: skip


@pytest.fixture(scope="module")
def kafka(cluster: LocalCluster) -> str:
    """The Kafka clients' bootstrap address (the gateway's Kafka listener)."""
    return cluster.spec.kafka_address
