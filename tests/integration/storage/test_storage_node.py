"""A real storage-node process over gRPC: produce, fetch, offsets, and every rejection."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from extreme_requests import send_extreme_requests
from storage_testkit import RunningNode

from strom.protocol.v1 import common_pb2, storage_pb2
from strom.records import decode_batches, encode_batch

pytestmark = pytest.mark.integration

NONE = common_pb2.NONE


def batch(count: int = 3, *, value: bytes = b"value", timestamp: int | None = None) -> bytes:
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    return encode_batch([(ts, f"k{i}".encode(), value, None) for i in range(count)])


def produce(node: RunningNode, topic: str, partition: int, data: bytes, acks: int = 1):
    request = storage_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        partitions=[
            storage_pb2.ProducePartitionData(topic=topic, partition=partition, records=data)
        ],
    )
    return node.stub.Produce(request, timeout=10).partitions[0]


def fetch(node: RunningNode, topic: str, partition: int, offset: int, **options: int):
    part = storage_pb2.FetchPartition(
        topic=topic,
        partition=partition,
        fetch_offset=offset,
        current_leader_epoch=-1,
        partition_max_bytes=options.pop("partition_max_bytes", 0),
    )
    request = storage_pb2.FetchRequest(replica_id=-1, partitions=[part], **options)
    return node.stub.Fetch(request, timeout=30).partitions[0]


def latest(
    node: RunningNode,
    topic: str,
    partition: int,
    spec: int = common_pb2.LATEST,
    timestamp_ms: int = 0,
):
    request = storage_pb2.ListOffsetsRequest(
        replica_id=-1,
        partitions=[
            storage_pb2.ListOffsetsPartition(
                topic=topic, partition=partition, spec=spec, timestamp_ms=timestamp_ms
            )
        ],  # type: ignore[arg-type]
    )
    return node.stub.ListOffsets(request, timeout=10).partitions[0]


def log_bytes(node: RunningNode, topic: str, partition: int) -> dict[str, bytes]:
    directory = node.data_dir / f"{topic}-{partition}"
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.log"))}


def test_produce_then_fetch_returns_the_batches_with_assigned_offsets(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:2")
    first = produce(node, "events", 0, batch(3))
    second = produce(node, "events", 0, batch(2))
    assert (first.error_code, first.base_offset) == (NONE, 0)
    assert (second.error_code, second.base_offset) == (NONE, 3)
    result = fetch(node, "events", 0, 0, max_wait_ms=0, min_bytes=1)
    assert result.error_code == NONE and result.high_watermark == 5
    batches = list(decode_batches(result.records))
    assert [b.base_offset for b in batches] == [0, 3]
    assert [r.offset for b in batches for r in b.records] == [0, 1, 2, 3, 4]
    assert batches[0].records[1].key == b"k1"
    # An offset inside a batch returns that whole batch; the consumer skips what it has.
    middle = list(decode_batches(fetch(node, "events", 0, 4).records))
    assert [b.base_offset for b in middle] == [3]
    assert fetch(node, "events", 1, 0).records == b""


def test_one_bad_partition_does_not_fail_the_request(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:1")
    request = storage_pb2.ProduceRequest(
        acks=1,
        partitions=[
            storage_pb2.ProducePartitionData(topic="events", partition=0, records=batch()),
            storage_pb2.ProducePartitionData(topic="missing", partition=0, records=batch()),
            storage_pb2.ProducePartitionData(topic="events", partition=7, records=batch()),
        ],
    )
    results = node.stub.Produce(request, timeout=10).partitions
    assert [r.error_code for r in results] == [
        NONE,
        common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
        common_pb2.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert "missing-0" in results[1].error_message
    assert latest(node, "events", 0).offset == 3


def test_rejected_batches_leave_the_log_untouched(start_node: Callable[..., RunningNode]) -> None:
    node = start_node("--topics", "events:1", "--message.max.bytes", "1000")
    assert produce(node, "events", 0, batch(2)).error_code == NONE
    before = log_bytes(node, "events", 0)

    too_large = produce(node, "events", 0, batch(10, value=b"x" * 200))
    assert too_large.error_code == common_pb2.MESSAGE_TOO_LARGE
    assert "1000" in too_large.error_message

    corrupt = bytearray(batch(2))
    corrupt[-3] ^= 0xFF  # inside the records: the CRC no longer matches
    bad_crc = produce(node, "events", 0, bytes(corrupt))
    assert bad_crc.error_code == common_pb2.CORRUPT_MESSAGE
    assert "CRC" in bad_crc.error_message

    truncated = produce(node, "events", 0, batch(2)[:-5])
    assert truncated.error_code == common_pb2.CORRUPT_MESSAGE

    # A valid batch followed by a corrupt one: nothing of the request is appended.
    mixed = produce(node, "events", 0, batch(1) + bytes(corrupt))
    assert mixed.error_code == common_pb2.CORRUPT_MESSAGE

    bad_acks = produce(node, "events", 0, batch(1), acks=2)
    assert bad_acks.error_code == common_pb2.INVALID_REQUIRED_ACKS

    assert log_bytes(node, "events", 0) == before
    assert latest(node, "events", 0).offset == 2


def test_fetch_outside_the_log_is_offset_out_of_range(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:1")
    produce(node, "events", 0, batch(3))
    beyond = fetch(node, "events", 0, 100)
    assert beyond.error_code == common_pb2.OFFSET_OUT_OF_RANGE
    assert beyond.high_watermark == 3
    assert fetch(node, "events", 0, -1).error_code == common_pb2.OFFSET_OUT_OF_RANGE
    assert fetch(node, "nope", 0, 0).error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION


def test_long_poll_fetch_is_woken_by_an_append(start_node: Callable[..., RunningNode]) -> None:
    node = start_node("--topics", "events:1")
    outcome: dict[str, object] = {}

    def waiting_fetch() -> None:
        started = time.monotonic()
        outcome["result"] = fetch(node, "events", 0, 0, max_wait_ms=20000, min_bytes=1)
        outcome["waited"] = time.monotonic() - started

    waiter = threading.Thread(target=waiting_fetch)
    waiter.start()
    time.sleep(0.5)
    assert "result" not in outcome  # still parked: nothing to read yet
    produce(node, "events", 0, batch(4))
    waiter.join(25)
    result = outcome["result"]
    assert result.error_code == NONE  # type: ignore[attr-defined]
    assert sum(len(b) for b in decode_batches(result.records)) == 4  # type: ignore[attr-defined]
    # Woken by the append, not by the 20 s max wait running out.
    assert outcome["waited"] < 15  # type: ignore[operator]


def test_long_poll_returns_empty_when_max_wait_passes(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:1")
    started = time.monotonic()
    result = fetch(node, "events", 0, 0, max_wait_ms=300, min_bytes=1)
    assert result.error_code == NONE and result.records == b""
    assert time.monotonic() - started >= 0.29


def test_fetch_limits_return_whole_batches(start_node: Callable[..., RunningNode]) -> None:
    node = start_node("--topics", "events:1")
    sizes = []
    for _ in range(5):
        data = batch(10, value=b"v" * 100)
        sizes.append(len(data))
        produce(node, "events", 0, data)
    two = fetch(node, "events", 0, 0, partition_max_bytes=sizes[0] * 2 + 10)
    assert len(list(decode_batches(two.records))) == 2
    # A limit below one batch still returns the first whole batch (progress guaranteed).
    one = fetch(node, "events", 0, 0, partition_max_bytes=10, max_bytes=10)
    assert len(list(decode_batches(one.records))) == 1


def test_list_offsets_earliest_latest_and_by_timestamp(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:1")
    produce(node, "events", 0, batch(2, timestamp=1_000))
    produce(node, "events", 0, batch(2, timestamp=2_000))
    assert latest(node, "events", 0, common_pb2.EARLIEST).offset == 0
    assert latest(node, "events", 0, common_pb2.LATEST).offset == 4
    by_time = latest(node, "events", 0, common_pb2.TIMESTAMP, timestamp_ms=1_500)
    assert (by_time.offset, by_time.timestamp_ms) == (2, 2_000)
    assert latest(node, "events", 0, common_pb2.TIMESTAMP, timestamp_ms=9_999).offset == -1
    unknown_spec = latest(node, "events", 0, common_pb2.OFFSET_SPEC_UNSPECIFIED)
    assert unknown_spec.error_code == common_pb2.INVALID_REQUEST


def test_delete_records_moves_the_log_start(start_node: Callable[..., RunningNode]) -> None:
    node = start_node("--topics", "events:1")
    for _ in range(3):
        produce(node, "events", 0, batch(2))
    response = node.stub.DeleteRecords(
        storage_pb2.DeleteRecordsRequest(
            partitions=[storage_pb2.DeleteRecordsPartition(topic="events", partition=0, offset=4)]
        ),
        timeout=10,
    )
    assert response.partitions[0].low_watermark == 4
    assert latest(node, "events", 0, common_pb2.EARLIEST).offset == 4
    assert fetch(node, "events", 0, 2).error_code == common_pb2.OFFSET_OUT_OF_RANGE


def test_produce_stream_keeps_many_requests_in_flight_in_order(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:1")
    requests = [
        storage_pb2.ProduceRequest(
            acks=1,
            correlation_id=100 + i,
            partitions=[
                storage_pb2.ProducePartitionData(topic="events", partition=0, records=batch(2))
            ],
        )
        for i in range(50)
    ]
    responses = list(node.stub.ProduceStream(iter(requests), timeout=30))
    assert [r.correlation_id for r in responses] == [100 + i for i in range(50)]
    assert [r.partitions[0].base_offset for r in responses] == [2 * i for i in range(50)]


def test_an_oversized_request_is_refused_and_the_node_keeps_serving(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:1", "--max-message-size", "64KiB")
    with pytest.raises(grpc.RpcError) as refused:
        produce(node, "events", 0, batch(1, value=b"x" * 100_000))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert produce(node, "events", 0, batch(1)).error_code == NONE


def test_a_malformed_produce_request_is_refused_and_nothing_is_written(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:1")
    raw_produce = node.channel.unary_unary("/strom.protocol.v1.StorageNode/Produce")
    good = storage_pb2.ProduceRequest(
        acks=1,
        partitions=[storage_pb2.ProducePartitionData(topic="events", partition=0, records=batch())],
    ).SerializeToString()
    for malformed in (good[:-7], b"\x1a\x03\x0a\x01\xff", b"\x0f"):
        with pytest.raises(grpc.RpcError) as refused:
            raw_produce(malformed, timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "malformed ProduceRequest" in (refused.value.details() or "")
    assert latest(node, "events", 0).offset == 0
    assert produce(node, "events", 0, batch(3)).base_offset == 0
    assert latest(node, "events", 0).offset == 3

    # On a ProduceStream: the requests before the malformed one are answered, then the stream
    # ends with INVALID_ARGUMENT.
    stream = node.channel.stream_stream(
        "/strom.protocol.v1.StorageNode/ProduceStream",
        response_deserializer=storage_pb2.ProduceResponse.FromString,
    )
    answers = stream(iter([good, good, b"\x0f", good]), timeout=10)
    assert [a.partitions[0].base_offset for a in itertools.islice(answers, 2)] == [3, 6]
    with pytest.raises(grpc.RpcError) as refused:
        next(answers)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert latest(node, "events", 0).offset == 9


def test_every_request_that_does_not_parse_is_invalid_argument(
    start_node: Callable[..., RunningNode],
) -> None:
    node = start_node("--topics", "events:1")
    for method in ("Fetch", "ListOffsets", "OffsetForLeaderEpoch", "DeleteRecords"):
        raw = node.channel.unary_unary(f"/strom.protocol.v1.StorageNode/{method}")
        with pytest.raises(grpc.RpcError) as refused:
            raw(b"\x0a\xff\xff\xff\xff\x0f", timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
        assert f"malformed {method}Request" in (refused.value.details() or "")
    fetch_stream = node.channel.stream_stream(
        "/strom.protocol.v1.StorageNode/FetchStream",
        response_deserializer=storage_pb2.FetchResponse.FromString,
    )
    with pytest.raises(grpc.RpcError) as refused:
        list(fetch_stream(iter([b"\x0f"]), timeout=10))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert produce(node, "events", 0, batch(2)).base_offset == 0


@pytest.mark.parametrize(
    "method",
    ["Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch", "DeleteRecords"],
)
def test_requests_with_extreme_field_values_never_fail_the_server(
    start_node: Callable[..., RunningNode], method: str
) -> None:
    # Every answer is a response (with per-partition error codes) or a clean INVALID_ARGUMENT:
    # never INTERNAL/UNKNOWN, and the node serves on.
    node = start_node("--topics", "t:2,x:1")
    produce(node, "t", 0, batch(3))
    service = storage_pb2.DESCRIPTOR.services_by_name["StorageNode"]
    outcomes = send_extreme_requests(node.channel, service, method, 40, timeout_s=10)
    assert outcomes["OK"] > 0
    assert latest(node, "t", 0).error_code == NONE


def test_data_survives_a_clean_restart(
    start_node: Callable[..., RunningNode], tmp_path: Path, free_port: Callable[[], int]
) -> None:
    node = start_node("--topics", "events:1")
    produce(node, "events", 0, batch(5))
    assert node.process.stop(10) == 0
    again = start_node(data_dir=node.data_dir)  # no --topics: found on disk
    assert latest(again, "events", 0).offset == 5
    records = [r for b in decode_batches(fetch(again, "events", 0, 0).records) for r in b]
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]


def _idempotent_batch(sequence: int, count: int = 2, epoch: int = 0) -> bytes:
    return encode_batch(
        [(1_000, None, f"r{sequence + i}".encode(), None) for i in range(count)],
        producer_id=77,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def test_idempotent_retries_gaps_and_fencing(start_node: Callable[..., RunningNode]) -> None:
    node = start_node("--topics", "events:1")
    first = produce(node, "events", 0, _idempotent_batch(0))
    assert (first.error_code, first.base_offset) == (NONE, 0)
    second = produce(node, "events", 0, _idempotent_batch(2))
    assert second.base_offset == 2
    retry = produce(node, "events", 0, _idempotent_batch(0))  # a retry of the first batch
    assert (retry.error_code, retry.base_offset) == (NONE, 0)
    assert latest(node, "events", 0).offset == 4  # answered, not appended again
    gap = produce(node, "events", 0, _idempotent_batch(9))
    assert gap.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER
    newer_epoch = produce(node, "events", 0, _idempotent_batch(0, epoch=1))
    assert newer_epoch.error_code == NONE
    fenced = produce(node, "events", 0, _idempotent_batch(4, epoch=0))
    assert fenced.error_code == common_pb2.INVALID_PRODUCER_EPOCH
    assert latest(node, "events", 0).offset == 6
