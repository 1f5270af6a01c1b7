"""The listener's storage-message shortcuts against protobuf itself: a ProduceRequest written
from record views is byte for byte what ``SerializeToString`` writes, and a FetchPartitionResult
read field by field says what the parsed message says (records as a view, no copy)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.protocol.v1 import storage_pb2
from strom_gateway.kafka.upstream_wire import fetch_answer, fetch_answer_of, produce_request_bytes

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=20)
RECORDS = st.one_of(st.none(), st.binary(max_size=300))
ENTRIES = st.lists(st.tuples(TEXT, INT32, RECORDS), max_size=5)


@SETTINGS
@given(acks=INT32, timeout_ms=INT32, client_id=TEXT, transactional_id=TEXT, entries=ENTRIES)
def test_produce_request_bytes_are_protobufs(
    acks: int,
    timeout_ms: int,
    client_id: str,
    transactional_id: str,
    entries: list[tuple[str, int, bytes | None]],
) -> None:
    expected = storage_pb2.ProduceRequest(
        acks=acks, timeout_ms=timeout_ms, client_id=client_id, transactional_id=transactional_id
    )
    for topic, partition, records in entries:
        expected.partitions.add(topic=topic, partition=partition, records=records or b"")
    views = [(t, p, None if r is None else memoryview(r)) for t, p, r in entries]
    raw = produce_request_bytes(
        acks=acks,
        timeout_ms=timeout_ms,
        client_id=client_id,
        transactional_id=transactional_id,
        entries=views,
    )
    assert raw == expected.SerializeToString()


@st.composite
def fetch_results(draw: st.DrawFn) -> storage_pb2.FetchPartitionResult:
    result = storage_pb2.FetchPartitionResult(
        topic=draw(TEXT),
        partition=draw(INT32),
        error_code=draw(st.integers(0, 120)),  # type: ignore[arg-type]
        error_message=draw(TEXT),
        high_watermark=draw(INT64),
        last_stable_offset=draw(INT64),
        log_start_offset=draw(INT64),
        records=draw(st.binary(max_size=300)),
        preferred_read_replica=draw(INT32),
    )
    result.diverging_epoch.epoch = draw(INT32)
    for producer_id, first_offset in draw(st.lists(st.tuples(INT64, INT64), max_size=4)):
        result.aborted_transactions.add(producer_id=producer_id, first_offset=first_offset)
    return result


@SETTINGS
@given(result=fetch_results())
def test_fetch_answer_reads_what_protobuf_parses(
    result: storage_pb2.FetchPartitionResult,
) -> None:
    read = fetch_answer(memoryview(result.SerializeToString()))
    assert read == fetch_answer_of(result)
    assert isinstance(read.records, memoryview) or not result.records
    assert bytes(read.records) == result.records
