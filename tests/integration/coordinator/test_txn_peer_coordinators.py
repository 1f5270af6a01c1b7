"""Two coordinators call each other directly: a transaction whose transactional id lives on
coordinator 2 commits offsets of a group living on coordinator 1. Coordinator 1 verifies the
TxnOffsetCommit with coordinator 2 (AddPartitionsToTxn verify_only) and coordinator 2 writes
the group's marker to coordinator 1, each found from the owners and registrations it follows in
etcd, with the gateway stopped: nothing goes through it."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from strom_testkit import wait_until
from txn_rpc_testkit import init_producer, settled

from strom.cluster import channel_options
from strom.protocol.v1 import common_pb2, gateway_pb2_grpc
from strom.protocol.v1 import coordinator_pb2 as pb
from strom.protocol.v1 import transaction_pb2 as txn
from strom.protocol.v1.coordinator_pb2_grpc import GroupCoordinatorStub
from strom.protocol.v1.transaction_pb2_grpc import TransactionCoordinatorStub
from strom_coordinator.partitions.hosting import key_partition
from strom_coordinator.runtime.ownership import preferred

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

E = common_pb2
PARTITIONS = 4
FLAGS = (
    "--offsets.topic.num.partitions", str(PARTITIONS),
    "--transaction.state.log.num.partitions", str(PARTITIONS),
    "--group-initial-rebalance-delay-ms", "0",
)  # fmt: skip
GROUP_KEY, TRANSACTION_KEY = 0, 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("peers"), coordinators=2, coordinator_flags=FLAGS
    )


def _preferred_by(coordinator_id: int, prefix: str) -> str:
    """A key whose partition (of either topic: same count) ``coordinator_id`` is preferred for."""
    for i in range(1000):
        key = f"{prefix}-{i}"
        if preferred({1, 2}, key_partition(key, PARTITIONS)) == coordinator_id:
            return key
    raise AssertionError("no such key")


GROUP = _preferred_by(1, "peer-group")
TID = _preferred_by(2, "peer-app")


def _coordinator_of(cluster: LocalCluster, key: str, key_type: int) -> str | None:
    """The address FindCoordinator names for ``key`` (asked on coordinator 1), None if none."""
    request = pb.FindCoordinatorRequest(group_id=key, key_type=key_type)
    with grpc.insecure_channel(cluster.coordinator_address(1)) as channel:
        answer = GroupCoordinatorStub(channel).FindCoordinator(request, timeout=30)
    if answer.error_code != E.NONE:
        return None
    return f"{answer.coordinator.host}:{answer.coordinator.port}"


def test_txn_offset_commit_and_its_marker_go_straight_between_the_coordinators(
    cluster: LocalCluster,
) -> None:
    group_coordinator = cluster.coordinator_address(1)
    txn_coordinator = cluster.coordinator_address(2)
    with grpc.insecure_channel(cluster.gateway, options=channel_options()) as channel:
        gateway = gateway_pb2_grpc.GatewayStub(channel)
        started = init_producer(gateway, TID)  # creates __transaction_state
        assert started.error_code == E.NONE, started
        pid, epoch = started.producer_id, started.producer_epoch
        wait_until(
            lambda: (
                _coordinator_of(cluster, GROUP, GROUP_KEY) == group_coordinator
                and _coordinator_of(cluster, TID, TRANSACTION_KEY) == txn_coordinator
            ),
            60,
            "the group on coordinator 1, the transactional id on coordinator 2",
            interval_s=0.5,
        )
        add = txn.AddOffsetsToTxnRequest(
            transactional_id=TID, producer_id=pid, producer_epoch=epoch, group_id=GROUP
        )
        added = settled(lambda: gateway.AddOffsetsToTxn(add, timeout=30), lambda a: {a.error_code})
        assert added.error_code == E.NONE, added
    # Both partitions served (loading one needs the gateway: InitProducerId, metadata).
    loaded = pb.OffsetFetchRequest(group_id=GROUP, partitions=[E.TopicPartition(topic="t")])
    with grpc.insecure_channel(group_coordinator) as channel:
        served = settled(
            lambda: GroupCoordinatorStub(channel).OffsetFetch(loaded, timeout=30),
            lambda a: {a.error_code} | {p.error_code for p in a.partitions},
        )
        assert served.error_code == E.NONE, served
    cluster.stop("gateway")

    commit = pb.TxnOffsetCommitRequest(
        transactional_id=TID, group_id=GROUP, producer_id=pid, producer_epoch=epoch,
        generation_id=-1,
        partitions=[pb.OffsetCommitPartition(topic="t", partition=0, committed_offset=10)],
    )  # fmt: skip
    fetch = pb.OffsetFetchRequest(
        group_id=GROUP, require_stable=True, partitions=[E.TopicPartition(topic="t", partition=0)]
    )
    with grpc.insecure_channel(group_coordinator) as channel:
        groups = GroupCoordinatorStub(channel)
        committed = settled(
            lambda: groups.TxnOffsetCommit(commit, timeout=30),
            lambda a: {p.error_code for p in a.partitions},
        )
        assert [p.error_code for p in committed.partitions] == [E.NONE], committed
        (pending,) = groups.OffsetFetch(fetch, timeout=30).partitions
        assert pending.error_code == E.UNSTABLE_OFFSET_COMMIT

        with grpc.insecure_channel(txn_coordinator) as txn_channel:
            end = txn.EndTxnRequest(
                transactional_id=TID, producer_id=pid, producer_epoch=epoch, committed=True
            )
            ended = settled(
                lambda: TransactionCoordinatorStub(txn_channel).EndTxn(end, timeout=30),
                lambda a: {a.error_code},
            )
            assert ended.error_code == E.NONE, ended

        def stable_offset() -> int | None:
            (found,) = groups.OffsetFetch(fetch, timeout=30).partitions
            return found.committed_offset if found.error_code == E.NONE else None

        assert wait_until(stable_offset, 60, "the marker committed the offset") == 10
