"""The transactional checker's explanation of a duplicated pipeline record, on a real cluster:
two committed transactions writing the same input id are named by offset, transactional id,
producer id and epoch, and commit marker; an aborted copy is not counted."""

from __future__ import annotations

import pytest
from cluster_testkit import LocalCluster, cluster
from txn_attribution import committed_copies, describe_duplicates

from strom import Producer
from strom.types import NewTopic

__all__ = ["cluster"]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "attribution-out"


def test_each_committed_copy_is_named_by_its_transaction(cluster: LocalCluster) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
    with Producer(bootstrap_servers=cluster.gateway, transactional_id="attr-app") as producer:
        producer.init_transactions()
        for commit in (True, False, True):
            producer.begin_transaction()
            producer.send(TOPIC, value=b"1:7:in-7", partition=1)
            producer.send(TOPIC, value=b"1:8:in-8", partition=1)
            producer.flush()  # in the log before the marker, aborted or not
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        producer.begin_transaction()
        producer.send(TOPIC, value=b"0:9:in-9", partition=0)
        producer.commit_transaction()
    with cluster.admin() as admin:
        (description,) = admin.describe_transactions(["attr-app"]).values()
    pid = description.producer_id

    copies = committed_copies(cluster, TOPIC, 2)
    assert {k: len(v) for k, v in copies.items()} == {"in-7": 2, "in-8": 2, "in-9": 1}
    first, second = copies["in-7"]
    # Offsets 0-1 committed (marker 2), 3-4 aborted (marker 5), 6-7 committed (marker 8).
    assert (first.partition, first.offset, first.marker_offset) == (1, 0, 2)
    assert (second.partition, second.offset, second.marker_offset) == (1, 6, 8)
    assert first.producer_id == second.producer_id == pid
    assert second.producer_epoch > first.producer_epoch  # one epoch per transaction
    lines = describe_duplicates(copies, TOPIC, {pid: "attr-app"})
    assert len(lines) == 2 and lines[0].startswith("input in-7: ")
    assert f"{TOPIC}-1@0 by attr-app (producer id {pid}, epoch {first.producer_epoch}, " in lines[0]
    assert "committed by the marker at 8" in lines[0]
