"""A group member across a coordinator's death: NOT_COORDINATOR and network errors make it
find the group's new coordinator, and no committed offset is lost."""

from __future__ import annotations

import pytest
from cluster_testkit import LocalCluster
from membership_testkit import consumer, create_topic, membership, poll_until, produce

from strom import OffsetAndMetadata, TopicPartition
from strom.types import ConsumerRecord

pytestmark = pytest.mark.integration


def test_commits_follow_the_coordinator_when_it_moves(groups_cluster: LocalCluster) -> None:
    topic, group = "moves", "g-moves"
    create_topic(groups_cluster, topic, 3)
    tps = {TopicPartition(topic, p) for p in range(3)}
    produce(groups_cluster, topic, 3, 50)
    c = consumer(
        groups_cluster, group, enable_auto_commit=False, request_timeout_ms=30000,
        session_timeout_ms=20000,
    )  # fmt: skip
    read: list[ConsumerRecord] = []
    try:
        c.subscribe([topic])
        poll_until([c], lambda: len(read) >= 150, 60, "the first 150 records", into=read)
        c.commit()
        assert c.committed(tps) == dict.fromkeys(tps, OffsetAndMetadata(50))
        old = membership(c)._link.coordinator_id
        assert old is not None
        groups_cluster.kill(f"coordinator-{old}")
        produce(groups_cluster, topic, 3, 50)
        poll_until([c], lambda: len(read) >= 300, 60, "150 more records", into=read)
        c.commit()  # NOT_COORDINATOR / unreachable: found again, retried
        assert membership(c)._link.coordinator_id not in (None, old)
        assert c.committed(tps) == dict.fromkeys(tps, OffsetAndMetadata(100))
        assert len({(r.partition, r.offset) for r in read}) == len(read) == 300
    finally:
        c.close()
