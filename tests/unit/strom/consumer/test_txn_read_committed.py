"""The read_committed filter on real record batches: transactional data batches of interleaved
producers, COMMIT/ABORT control batches, and the aborted-transaction list a READ_COMMITTED
fetch returns. Kafka's rule: an aborted transaction's batches are dropped from its first
offset up to its ABORT marker; control batches are never returned; positions step over all
of them. Checked in the consumer's decoder, the consumer's poll path, and the Spark source."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from strom.aio import Consumer as AioConsumer
from strom.consumer._fetcher import decode_records
from strom.consumer.aborted import AbortedTransactionFilter
from strom.records import encode_batch, read_header
from strom.records.control import end_txn_marker
from strom.types import TopicPartition

TP = TopicPartition("t", 0)
P1, P2, P3 = 1001, 1002, 1003


def data(base: int, pid: int, values: list[str], *, transactional: bool = True) -> bytes:
    return encode_batch(
        [(1000, None, v.encode()) for v in values],
        base_offset=base,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=transactional,
    )


def marker(base: int, pid: int, *, commit: bool) -> bytes:
    key, value = end_txn_marker(commit, 7)
    return encode_batch(
        [(1000, key, value)],
        base_offset=base,
        producer_id=pid,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )


def values(raw: bytes, position: int = 0, aborted: Any = None) -> tuple[list[str], int]:
    records, next_offset = decode_records(raw, TP, position, aborted=aborted)
    return [r.value.decode() for r in records], next_offset


# Offsets: P1 a0 a1 | P2 b0 | P1 a2 | P2 COMMIT | P1 ABORT | P3 c0 (plain, idempotent)
#            0  1      2       3       4           5          6
INTERLEAVED = (
    data(0, P1, ["a0", "a1"])
    + data(2, P2, ["b0"])
    + data(3, P1, ["a2"])
    + marker(4, P2, commit=True)
    + marker(5, P1, commit=False)
    + data(6, P3, ["c0"], transactional=False)
)


def test_an_aborted_producer_is_dropped_while_a_committed_one_interleaved_is_kept() -> None:
    assert values(INTERLEAVED, aborted=[(P1, 0)]) == (["b0", "c0"], 7)


def test_control_batches_are_never_returned_under_read_uncommitted() -> None:
    assert values(INTERLEAVED) == (["a0", "a1", "b0", "a2", "c0"], 7)
    assert values(INTERLEAVED, aborted=[]) == (["a0", "a1", "b0", "a2", "c0"], 7)


def test_the_abort_marker_ends_the_aborted_range_of_its_producer() -> None:
    # P1 aborts a transaction, then commits the next one: only the first is dropped.
    raw = (
        data(0, P1, ["x0"])
        + marker(1, P1, commit=False)
        + data(2, P1, ["y0", "y1"])
        + marker(4, P1, commit=True)
    )
    assert values(raw, aborted=[(P1, 0)]) == (["y0", "y1"], 5)


def test_an_aborted_transaction_starts_at_its_first_offset_not_before() -> None:
    # P1's committed transaction precedes its aborted one in the same chunk.
    raw = (
        data(0, P1, ["ok"])
        + marker(1, P1, commit=True)
        + data(2, P1, ["bad0"])
        + data(3, P2, ["other"])
        + data(4, P1, ["bad1"])
        + marker(5, P1, commit=False)
    )
    assert values(raw, aborted=[(P1, 2)]) == (["ok", "other"], 6)


def test_two_aborted_producers_and_their_order_in_the_list_do_not_matter() -> None:
    raw = (
        data(0, P1, ["p1"])
        + data(1, P2, ["p2"])
        + data(2, P3, ["p3"])
        + marker(3, P2, commit=False)
        + marker(4, P1, commit=False)
        + marker(5, P3, commit=True)
    )
    assert values(raw, aborted=[(P2, 1), (P1, 0)]) == (["p3"], 6)


def test_an_aborted_transaction_whose_marker_is_beyond_the_chunk_stays_dropped() -> None:
    # The fetch stopped before the ABORT marker (it is in the next chunk).
    raw = data(0, P1, ["a"]) + data(1, P2, ["b"]) + data(2, P1, ["c"])
    assert values(raw, aborted=[(P1, 0)]) == (["b"], 3)


def test_a_non_transactional_batch_of_an_aborted_pid_is_kept() -> None:
    raw = data(0, P1, ["t"]) + marker(1, P1, commit=False) + data(2, P1, ["i"], transactional=False)
    assert values(raw, aborted=[(P1, 0)]) == (["i"], 3)


def test_a_chunk_of_only_control_batches_advances_the_position() -> None:
    raw = marker(10, P1, commit=True) + marker(11, P2, commit=False)
    assert values(raw, 10, aborted=[(P2, 5)]) == ([], 12)
    assert values(raw, 10) == ([], 12)


def test_the_position_inside_a_chunk_still_applies() -> None:
    raw = data(0, P2, ["b0", "b1", "b2"]) + marker(3, P2, commit=True)
    assert values(raw, 2, aborted=[]) == (["b2"], 4)


def test_the_filter_reads_the_marker_type_not_just_the_control_bit() -> None:
    # A COMMIT marker of an aborted pid does not end its aborted range (it cannot happen on a
    # real log; Kafka only removes the pid at its ABORT marker).
    flt = AbortedTransactionFilter([(P1, 0)])
    batches = data(0, P1, ["a"]) + marker(1, P1, commit=True) + data(2, P1, ["b"])
    dropped = []
    pos = 0
    while pos < len(batches):
        header = read_header(batches, pos)
        key, value = end_txn_marker(True, 7) if header.is_control else (None, None)
        dropped.append(flt.drops(header, [key], [value]))
        pos += header.size
    assert dropped == [True, True, True]


# -- the consumer's poll path ------------------------------------------------------------------


def _poll_chunk(raw: bytes, aborted: list[tuple[int, int]] | None, **options: Any) -> Any:
    async def run() -> tuple[list[str], int, int | None]:
        consumer = AioConsumer(bootstrap_servers="localhost:1", **options)
        try:
            consumer.assign([TP])
            st = consumer._subs.state(TP)
            st.seek(0)
            st.raw.append(raw)
            st.raw_aborted.append(aborted)
            st.raw_bytes = len(raw)
            st.high_watermark = 8
            st.last_stable_offset = 7
            found = consumer._collector.collect(100)
            got = [r.value.decode() for r in found.get(TP, [])]
            return got, st.position or 0, consumer.lag(TP)
        finally:
            await consumer.close()

    return asyncio.run(run())


def test_poll_drops_aborted_records_and_steps_over_the_markers() -> None:
    got, position, lag = _poll_chunk(INTERLEAVED, [(P1, 0)], isolation_level="read_committed")
    assert got == ["b0", "c0"]
    assert position == 7
    assert lag == 0  # measured to the last stable offset (7), not the high watermark (8)


def test_lag_under_read_uncommitted_is_measured_to_the_high_watermark() -> None:
    got, position, lag = _poll_chunk(INTERLEAVED, None)
    assert got == ["a0", "a1", "b0", "a2", "c0"]
    assert (position, lag) == (7, 1)


# -- the Spark source ----------------------------------------------------------------------------


def test_the_spark_source_drops_aborted_transactions_under_read_committed() -> None:
    arrow = pytest.importorskip("strom_spark.arrow")
    batch = arrow.records_to_arrow(INTERLEAVED, TP, 0, 7, aborted=[(P1, 0)])
    assert [v.decode() for v in batch.column("value").to_pylist()] == ["b0", "c0"]
    assert batch.column("offset").to_pylist() == [2, 6]
    uncommitted = arrow.records_to_arrow(INTERLEAVED, TP, 0, 7)
    assert uncommitted.column("offset").to_pylist() == [0, 1, 2, 3, 6]


@pytest.mark.parametrize(
    ("extra", "level"),
    [
        ({}, "read_uncommitted"),
        ({"kafka.isolation.level": "read_committed"}, "read_committed"),
        ({"isolationLevel": "READ_COMMITTED"}, "read_committed"),
        ({"kafka.isolation.level": "read_committed", "isolationlevel": "read_committed"}, None),
    ],
)
def test_the_spark_isolation_level_option(extra: dict[str, str], level: str | None) -> None:
    options = pytest.importorskip("strom_spark.options")
    raw = {"strom.bootstrap.servers": "localhost:9092", "subscribe": "t", **extra}
    parsed = options.parse_source_options(raw, streaming=False)
    assert parsed.isolation_level == (level or "read_committed")
    assert parsed.read_committed == (parsed.isolation_level == "read_committed")


@pytest.mark.parametrize(
    "extra",
    [
        {"kafka.isolation.level": "committed"},
        {"kafka.isolation.level": "read_committed", "isolationLevel": "read_uncommitted"},
    ],
)
def test_a_bad_spark_isolation_level_is_refused(extra: dict[str, str]) -> None:
    options = pytest.importorskip("strom_spark.options")
    raw = {"strom.bootstrap.servers": "localhost:9092", "subscribe": "t", **extra}
    with pytest.raises(ValueError, match="isolation"):
        options.parse_source_options(raw, streaming=True)
