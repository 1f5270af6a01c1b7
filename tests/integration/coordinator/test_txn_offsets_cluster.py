"""Transactional offsets on real processes (etcd, controllers, storage nodes, gateway, one
coordinator): TxnOffsetCommit through the gateway, verified with the transaction coordinator,
stays pending (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT) until
GroupCoordinator.WriteTxnMarkers, called on the coordinator's own port as the transaction
coordinator does, commits or drops it; a restarted coordinator rebuilds what is pending."""

from __future__ import annotations

import grpc
import pytest
from cluster_testkit import LocalCluster
from txn_rpc_testkit import RETRY, init_producer, settled

from strom.protocol.v1 import common_pb2, gateway_pb2_grpc
from strom.protocol.v1 import coordinator_pb2 as pb
from strom.protocol.v1 import transaction_pb2 as txn
from strom.protocol.v1.coordinator_pb2_grpc import GroupCoordinatorStub

pytestmark = pytest.mark.timeout(240)

E = common_pb2
GROUP = "txn-offsets-group"
TID = "txn-offsets-app"


def init(gateway: gateway_pb2_grpc.GatewayStub, tid: str) -> tuple[int, int]:
    answer = init_producer(gateway, tid)
    assert answer.error_code == E.NONE, answer
    return answer.producer_id, answer.producer_epoch


def txn_commit(
    gateway: gateway_pb2_grpc.GatewayStub, tid: str, pid: int, epoch: int, **offsets: int
) -> dict[str, int]:
    """TxnOffsetCommit of topic "t" partitions (``p0=10``: partition 0 at 10); error codes."""
    request = pb.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=GROUP, producer_id=pid, producer_epoch=epoch,
        generation_id=-1,
    )  # fmt: skip
    for name, offset in offsets.items():
        request.partitions.add(topic="t", partition=int(name[1:]), committed_offset=offset)
    answer = settled(
        lambda: gateway.TxnOffsetCommit(request, timeout=30),
        lambda a: {p.error_code for p in a.partitions},
    )
    return {f"p{p.partition}": p.error_code for p in answer.partitions}


def fetch(gateway: gateway_pb2_grpc.GatewayStub, *, stable: bool) -> dict[str, int | str]:
    """Partitions 0 and 1 of "t": the committed offset, or the error's name."""
    request = pb.OffsetFetchRequest(
        group_id=GROUP,
        require_stable=stable,
        partitions=[E.TopicPartition(topic="t", partition=p) for p in (0, 1)],
    )
    answer = settled(
        lambda: gateway.OffsetFetch(request, timeout=30),
        lambda a: {a.error_code} | {p.error_code for p in a.partitions},
    )
    assert answer.error_code == E.NONE, answer
    return {
        f"p{p.partition}": E.ErrorCode.Name(p.error_code) if p.error_code else p.committed_offset
        for p in answer.partitions
    }


def marker(
    cluster: LocalCluster, pid: int, epoch: int, *, committed: bool
) -> list[tuple[str, int]]:
    """GroupCoordinator.WriteTxnMarkers on the group's coordinator, as the transaction
    coordinator sends it; (group, error code) of each group."""
    request = txn.WriteTxnMarkersRequest(
        timeout_ms=10_000,
        markers=[
            txn.WriteTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                committed=committed,
                coordinator_epoch=0,
                group_ids=[GROUP],
                transactional_id=TID,
            )
        ],
    )
    with grpc.insecure_channel(cluster.coordinator_address(1)) as channel:
        answer = settled(
            lambda: GroupCoordinatorStub(channel).WriteTxnMarkers(request, timeout=30),
            lambda a: {g.error_code for m in a.markers for g in m.groups},
        )
    (result,) = answer.markers
    assert result.producer_id == pid
    return [(g.group_id, g.error_code) for g in result.groups]


def test_txn_offsets_pending_until_the_marker_and_rebuilt_after_a_restart(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub
) -> None:
    plain = pb.OffsetCommitRequest(
        group_id=GROUP,
        generation_id=-1,
        partitions=[pb.OffsetCommitPartition(topic="t", partition=0, committed_offset=2)],
    )
    committed = settled(
        lambda: gateway.OffsetCommit(plain, timeout=30),
        lambda a: {p.error_code for p in a.partitions},
    )
    assert [p.error_code for p in committed.partitions] == [E.NONE]

    pid, epoch = init(gateway, TID)
    add = txn.AddOffsetsToTxnRequest(
        transactional_id=TID, producer_id=pid, producer_epoch=epoch, group_id=GROUP
    )
    added = settled(lambda: gateway.AddOffsetsToTxn(add, timeout=30), lambda a: {a.error_code})
    assert added.error_code == E.NONE, added

    # Staged: invisible, and unstable to a stable fetch.
    assert txn_commit(gateway, TID, pid, epoch, p0=10, p1=20) == {"p0": E.NONE, "p1": E.NONE}
    assert fetch(gateway, stable=False) == {"p0": 2, "p1": -1}
    unstable = {"p0": "UNSTABLE_OFFSET_COMMIT", "p1": "UNSTABLE_OFFSET_COMMIT"}
    assert fetch(gateway, stable=True) == unstable

    # The commit marker makes them the group's offsets; a resent one changes nothing.
    assert marker(cluster, pid, epoch, committed=True) == [(GROUP, E.NONE)]
    assert fetch(gateway, stable=True) == {"p0": 10, "p1": 20}
    assert marker(cluster, pid, epoch, committed=True) == [(GROUP, E.NONE)]
    assert fetch(gateway, stable=True) == {"p0": 10, "p1": 20}

    # Staged again, then the coordinator restarts: the new incarnation rebuilt it from the log.
    assert txn_commit(gateway, TID, pid, epoch, p0=30) == {"p0": E.NONE}
    cluster.stop("coordinator-1")
    cluster.restart("coordinator-1")
    assert fetch(gateway, stable=True) == {"p0": "UNSTABLE_OFFSET_COMMIT", "p1": 20}
    assert fetch(gateway, stable=False) == {"p0": 10, "p1": 20}
    # An abort marker drops it.
    assert marker(cluster, pid, epoch, committed=False) == [(GROUP, E.NONE)]
    assert fetch(gateway, stable=True) == {"p0": 10, "p1": 20}


def test_a_producer_whose_transaction_does_not_hold_the_group_is_refused(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub
) -> None:
    other = "txn-offsets-stranger"
    pid, epoch = init(gateway, other)  # AddOffsetsToTxn never called
    codes = txn_commit(gateway, other, pid, epoch, p1=99)
    assert codes["p1"] not in (E.NONE, *RETRY), codes
    assert fetch(gateway, stable=True)["p1"] != 99
    # An epoch the transactional id never had is refused alike.
    assert txn_commit(gateway, TID, 123_456, 0, p1=98)["p1"] != E.NONE
    assert fetch(gateway, stable=False)["p1"] not in (98, 99)
