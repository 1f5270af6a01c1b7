"""GroupCoordinator.TxnOffsetCommit and WriteTxnMarkers through the servicer: protobuf in and
out, whole-request errors on every partition, one result per group of each marker."""

from __future__ import annotations

import asyncio

from group_unitkit import FAST, MemoryLog
from test_txn_offsets import FakeVerifier

from strom.errors import ErrorCode, ProducerFencedError
from strom.protocol.v1 import common_pb2
from strom.protocol.v1 import coordinator_pb2 as pb
from strom.protocol.v1 import transaction_pb2 as txn
from strom_coordinator.group.manager import GroupManager
from strom_coordinator.servicer import GroupCoordinatorServicer


class Directory:
    async def find(self, key: str, key_type: int = 0) -> tuple[int, str, int]:
        return 1, "127.0.0.1", 7000


def servicer(verifier: FakeVerifier) -> GroupCoordinatorServicer:
    manager = GroupManager(MemoryLog(), FAST, verifier=verifier)
    manager.partition_count = 1
    manager.begin_loading(0)
    manager.finish_loading(0)
    return GroupCoordinatorServicer(manager, Directory())


def commit_request(epoch: int = 2, generation: int = -1) -> pb.TxnOffsetCommitRequest:
    return pb.TxnOffsetCommitRequest(
        transactional_id="tid",
        group_id="g",
        producer_id=77,
        producer_epoch=epoch,
        generation_id=generation,
        partitions=[
            pb.OffsetCommitPartition(topic="t", partition=p, committed_offset=10 + p)
            for p in (0, 1)
        ],
    )


def marker(*groups: str, committed: bool = True, epoch: int = 2) -> txn.WriteTxnMarkersRequest:
    return txn.WriteTxnMarkersRequest(
        markers=[
            txn.WriteTxnMarker(
                producer_id=77,
                producer_epoch=epoch,
                committed=committed,
                group_ids=list(groups),
                partitions=[common_pb2.TopicPartition(topic="__consumer_offsets", partition=0)],
            )
        ]
    )


def test_txn_offset_commit_then_marker_through_the_servicer() -> None:
    async def scenario() -> None:
        s = servicer(FakeVerifier())
        committed = await s.TxnOffsetCommit(commit_request(), None)  # type: ignore[arg-type]
        assert [(p.partition, p.error_code) for p in committed.partitions] == [(0, 0), (1, 0)]
        stable = pb.OffsetFetchRequest(group_id="g", require_stable=True)
        stable.partitions.add(topic="t", partition=0)
        fetched = await s.OffsetFetch(stable, None)  # type: ignore[arg-type]
        assert [p.error_code for p in fetched.partitions] == [ErrorCode.UNSTABLE_OFFSET_COMMIT]
        answer = await s.WriteTxnMarkers(marker("g", ""), None)  # type: ignore[arg-type]
        (result,) = answer.markers
        assert result.producer_id == 77
        assert [(g.group_id, g.error_code) for g in result.groups] == [
            ("g", ErrorCode.NONE),
            ("", ErrorCode.INVALID_GROUP_ID),
        ]
        # The marker's partition carries the first group error.
        assert [p.error_code for p in result.partitions] == [ErrorCode.INVALID_GROUP_ID]
        fetched = await s.OffsetFetch(stable, None)  # type: ignore[arg-type]
        assert [(p.error_code, p.committed_offset) for p in fetched.partitions] == [(0, 10)]

    asyncio.run(scenario())


def test_whole_request_errors_are_reported_on_every_partition() -> None:
    async def scenario() -> None:
        s = servicer(FakeVerifier(ProducerFencedError("epoch 2 is old")))
        refused = await s.TxnOffsetCommit(commit_request(), None)  # type: ignore[arg-type]
        assert {p.error_code for p in refused.partitions} == {ErrorCode.PRODUCER_FENCED}
        bad_epoch = await s.TxnOffsetCommit(commit_request(epoch=-1), None)  # type: ignore[arg-type]
        assert {p.error_code for p in bad_epoch.partitions} == {ErrorCode.INVALID_PRODUCER_EPOCH}
        unknown = await s.TxnOffsetCommit(commit_request(generation=3), None)  # type: ignore[arg-type]
        assert {p.error_code for p in unknown.partitions} == {ErrorCode.UNKNOWN_MEMBER_ID}
        nothing = await s.WriteTxnMarkers(marker("g", committed=False), None)  # type: ignore[arg-type]
        assert [(g.group_id, g.error_code) for g in nothing.markers[0].groups] == [("g", 0)]

    asyncio.run(scenario())
