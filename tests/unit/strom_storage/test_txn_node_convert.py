"""The storage node's protobuf translation of transactions: read_committed fetch responses
(hand-encoded, byte for byte protobuf's), WriteTxnMarkers validation and answers,
DescribeProducers, and the produce request's transactional_id read from its bytes."""

from __future__ import annotations

import pytest

from strom.errors import (
    InvalidRequestError,
    NotLeaderOrFollowerError,
    TransactionCoordinatorFencedError,
)
from strom.protocol.v1 import common_pb2, storage_pb2, transaction_pb2
from strom_server.rpc.produce_request import read_produce_request
from strom_storage import convert
from strom_storage.log.producer_state import ActiveProducer
from strom_storage.node import FetchPartitionResult, ProducersResult, TxnMarker, TxnMarkerResult

CASES = [
    [FetchPartitionResult("t", 0, None, 10, 0, b"x" * 40, last_stable_offset=7)],
    [
        FetchPartitionResult(
            "t", 1, None, 2**40, 5, b"y" * 300, last_stable_offset=2**39,
            aborted_transactions=((1000, 6), (0, 0), (2**62, 2**40)),
        ),
        FetchPartitionResult("u", 2, NotLeaderOrFollowerError("not here"), -1, -1),
    ],
]  # fmt: skip


@pytest.mark.parametrize("results", CASES)
def test_encoded_read_committed_fetch_response_matches_protobuf(
    results: list[FetchPartitionResult],
) -> None:
    expected = convert.fetch_response(5, results)
    encoded = convert.encode_fetch_response(5, results)
    assert encoded == expected.SerializeToString()
    parsed = storage_pb2.FetchResponse.FromString(encoded)
    for result, partition in zip(results, parsed.partitions, strict=True):
        assert partition.last_stable_offset == result.last_stable_offset
        assert [(a.producer_id, a.first_offset) for a in partition.aborted_transactions] == list(
            result.aborted_transactions
        )


def marker(**fields: object) -> transaction_pb2.WriteTxnMarker:
    values: dict[str, object] = {
        "producer_id": 7,
        "producer_epoch": 2,
        "committed": True,
        "coordinator_epoch": 1,
        "partitions": [common_pb2.TopicPartition(topic="t", partition=0)],
    }
    values.update(fields)
    return transaction_pb2.WriteTxnMarker(**values)  # type: ignore[arg-type]


def test_txn_markers_translate_a_valid_request() -> None:
    request = transaction_pb2.WriteTxnMarkersRequest(
        timeout_ms=500,
        markers=[
            marker(),
            marker(
                producer_id=8,
                committed=False,
                partitions=[
                    common_pb2.TopicPartition(topic="a", partition=1),
                    common_pb2.TopicPartition(topic="b", partition=0),
                ],
            ),
        ],
    )
    assert convert.txn_markers(request) == [
        TxnMarker(7, 2, True, 1, (("t", 0),)),
        TxnMarker(8, 2, False, 1, (("a", 1), ("b", 0))),
    ]


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        (transaction_pb2.WriteTxnMarkersRequest(timeout_ms=-1), "timeout_ms"),
        (transaction_pb2.WriteTxnMarkersRequest(markers=[marker(producer_id=-1)]), "producer_id"),
        (
            transaction_pb2.WriteTxnMarkersRequest(markers=[marker(producer_epoch=32768)]),
            "producer_epoch",
        ),
        (
            transaction_pb2.WriteTxnMarkersRequest(markers=[marker(producer_epoch=-1)]),
            "producer_epoch",
        ),
        (
            transaction_pb2.WriteTxnMarkersRequest(markers=[marker(coordinator_epoch=-2)]),
            "coordinator_epoch",
        ),
        (transaction_pb2.WriteTxnMarkersRequest(markers=[marker(partitions=[])]), "no partition"),
        (
            transaction_pb2.WriteTxnMarkersRequest(
                markers=[marker(partitions=[common_pb2.TopicPartition(topic="", partition=0)])]
            ),
            "not a valid partition",
        ),
        (
            transaction_pb2.WriteTxnMarkersRequest(
                markers=[marker(partitions=[common_pb2.TopicPartition(topic="t", partition=-1)])]
            ),
            "not a valid partition",
        ),
        (
            transaction_pb2.WriteTxnMarkersRequest(
                markers=[marker()] * (convert.MAX_TXN_MARKERS + 1)
            ),
            "markers",
        ),
        (
            transaction_pb2.WriteTxnMarkersRequest(
                markers=[
                    marker(
                        partitions=[
                            common_pb2.TopicPartition(topic="t", partition=p)
                            for p in range(convert.MAX_TXN_MARKER_PARTITIONS + 1)
                        ]
                    )
                ]
            ),
            "partitions",
        ),
    ],
)
def test_malformed_write_txn_markers_are_refused(
    request_: transaction_pb2.WriteTxnMarkersRequest, fragment: str
) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        convert.txn_markers(request_)


def test_txn_markers_response_answers_per_partition() -> None:
    fenced = TransactionCoordinatorFencedError("coordinator epoch 1 is older than 2")
    response = convert.txn_markers_response(
        [TxnMarkerResult(7, (("t", 0, None), ("t", 1, fenced)))]
    )
    (result,) = response.markers
    assert result.producer_id == 7
    assert [(p.topic, p.partition, p.error_code, p.error_message) for p in result.partitions] == [
        ("t", 0, common_pb2.NONE, ""),
        ("t", 1, common_pb2.TRANSACTION_COORDINATOR_FENCED, str(fenced)),
    ]


def test_describe_producers_result() -> None:
    producer = ActiveProducer(
        producer_id=9,
        producer_epoch=4,
        last_sequence=11,
        last_timestamp=1234,
        coordinator_epoch=3,
        current_txn_start_offset=40,
    )
    result = convert.describe_producers_result(ProducersResult("t", 0, producers=(producer,)))
    (described,) = result.active_producers
    assert (
        described.producer_id, described.producer_epoch, described.last_sequence,
        described.last_timestamp_ms, described.coordinator_epoch,
        described.current_txn_start_offset,
    ) == (9, 4, 11, 1234, 3, 40)  # fmt: skip
    refused = convert.describe_producers_result(
        ProducersResult("t", 1, NotLeaderOrFollowerError("follower"))
    )
    assert refused.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER and not refused.active_producers


@pytest.mark.parametrize("transactional_id", ["", "orders-writer", "é-ü"])
def test_the_produce_request_scan_reads_the_transactional_id(transactional_id: str) -> None:
    raw = storage_pb2.ProduceRequest(
        acks=-1,
        transactional_id=transactional_id,
        partitions=[storage_pb2.ProducePartitionData(topic="t", partition=1, records=b"abc")],
    ).SerializeToString()
    call = read_produce_request(raw)
    assert call.transactional_id == transactional_id
    assert [(t, p, bytes(r)) for t, p, r in call.entries] == [("t", 1, b"abc")]
    assert convert.produce_call_from_bytes(raw).transactional_id == transactional_id
