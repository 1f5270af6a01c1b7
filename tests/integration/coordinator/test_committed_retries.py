"""``Consumer.committed()`` (and the admin's ``list_consumer_group_offsets``) on real
processes answer the group's committed offset or raise: a coordinator that is paused (its
partition moving to the other one) or an offset pending in a transaction (read_committed asks
with require_stable) is waited out for ``default_api_timeout_ms``, however short
``request_timeout_ms`` is, and never answered with "no committed offset". (A worker of the
transactional fault run rewound to the start of its input after ``committed()`` raised during
such a wait.)"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from cluster_testkit import LocalCluster
from coordsvc_testkit import LEASE_S, find_coordinator

from strom import Admin, Consumer, Producer, TopicPartition
from strom.errors import StromTimeoutError
from strom.types import NewTopic, OffsetAndMetadata

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "committed-retries"
TP = TopicPartition(TOPIC, 0)


@pytest.fixture(scope="module")
def topic(coordinated: LocalCluster) -> Iterator[LocalCluster]:
    with coordinated.admin() as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
    yield coordinated


def consumer(cluster: LocalCluster, group: str, **options: object) -> Consumer:
    return Consumer(
        bootstrap_servers=cluster.gateway,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=1500,
        **options,  # type: ignore[arg-type]
    )


def test_committed_waits_out_a_paused_coordinator(topic: LocalCluster) -> None:
    group = "committed-paused"
    with (
        consumer(topic, group) as c,
        Admin(topic.gateway, request_timeout_ms=1500) as admin,
        ThreadPoolExecutor(1) as pool,
    ):
        c.commit({TP: OffsetAndMetadata(42)})
        coordinator_id, _ = find_coordinator(topic.coordinator_address(1), group)
        name = f"coordinator-{coordinator_id}"
        topic.signal(name, signal.SIGSTOP)
        # Resumed well after several request timeouts; the other coordinator takes the
        # partition over once the paused one's lease (LEASE_S) has expired.
        resume = threading.Timer(2 * LEASE_S + 2, topic.signal, (name, signal.SIGCONT))
        resume.start()
        try:
            started = time.monotonic()
            listed = pool.submit(admin.list_consumer_group_offsets, group)
            assert c.committed(TP) == OffsetAndMetadata(42)
            assert time.monotonic() - started > 1.5  # it did wait past a request timeout
            assert listed.result() == {TP: OffsetAndMetadata(42)}
        finally:
            resume.join()  # the coordinator runs again whatever happened


def test_read_committed_waits_for_an_offset_pending_in_a_transaction(
    topic: LocalCluster,
) -> None:
    group = "committed-pending"
    with (
        consumer(topic, group, isolation_level="read_committed") as c,
        Producer(bootstrap_servers=topic.gateway, transactional_id="committed-pending") as p,
    ):
        c.commit({TP: OffsetAndMetadata(5)})
        p.init_transactions()
        p.begin_transaction()
        p.send_offsets_to_transaction({TP: OffsetAndMetadata(10)}, c.group_metadata())
        # Pending: a short wait raises (never "nothing committed", never the old offset)...
        with pytest.raises(StromTimeoutError, match="committed offsets not fetched"):
            c.committed(TP, timeout_ms=1000)
        # ...and the default wait sees the transaction's offset once it commits, after
        # several request timeouts.
        commit = threading.Timer(4.0, p.commit_transaction)
        commit.start()
        try:
            assert c.committed(TP) == OffsetAndMetadata(10)
        finally:
            commit.join()
    with consumer(topic, group) as plain:
        assert plain.committed(TP) == OffsetAndMetadata(10)
