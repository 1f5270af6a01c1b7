"""Property tests: arbitrary records and batch options round-trip exactly, and the C and
Python kernels produce byte-identical batches."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from records_util import PROPERTY_SETTINGS

from strom.records import (
    BatchBuilder,
    Compression,
    Record,
    decode_batch,
    decode_columns,
    encode_batch,
)
from strom.records.kernel import available

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)

timestamps = st.one_of(
    st.integers(1_600_000_000_000, 1_800_000_000_000),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, -1, 2**63 - 1, -(2**63)]),
)
payload = st.one_of(st.none(), st.binary(max_size=300))
headers = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40))), max_size=4
    ),
)
records = st.lists(st.tuples(timestamps, payload, payload, headers), min_size=1, max_size=25)
options = st.fixed_dictionaries(
    {
        "compression": st.sampled_from(
            [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD]
        ),
        "base_offset": st.one_of(st.integers(0, 2**40), INT64.filter(lambda v: v < 2**63 - 30)),
        "partition_leader_epoch": INT32,
        "producer_id": INT64,
        "producer_epoch": INT16,
        "base_sequence": INT32,
        "is_transactional": st.booleans(),
        "is_control": st.booleans(),
        "log_append_time": st.booleans(),
    }
)


def expected_records(recs: list[tuple[Any, ...]], opts: dict[str, Any]) -> list[Record]:
    max_ts = max(r[0] for r in recs)
    return [
        Record(
            opts["base_offset"] + i,
            max_ts if opts["log_append_time"] else ts,
            key,
            value,
            tuple(hdrs or ()),
        )
        for i, (ts, key, value, hdrs) in enumerate(recs)
    ]


@PROPERTY_SETTINGS
@given(records, options)
def test_round_trip_and_kernels_agree(recs: list[tuple[Any, ...]], opts: dict[str, Any]) -> None:
    encoded = {k.name: encode_batch(recs, kernel=k, **opts) for k in available()}
    assert len(set(encoded.values())) == 1, "kernels disagree on the bytes"
    data = next(iter(encoded.values()))
    want = expected_records(recs, opts)
    for kernel in available():
        batch = decode_batch(data, kernel=kernel)
        assert batch.records == want
        assert batch.compression == opts["compression"]
        assert batch.header.producer_id == opts["producer_id"]
        assert batch.header.producer_epoch == opts["producer_epoch"]
        assert batch.header.base_sequence == opts["base_sequence"]
        assert batch.header.partition_leader_epoch == opts["partition_leader_epoch"]
        assert batch.is_transactional == opts["is_transactional"]
        assert batch.is_control == opts["is_control"]
        assert batch.first_timestamp == recs[0][0]
        assert batch.max_timestamp == max(r[0] for r in recs)
        (columns,) = decode_columns(data, kernel=kernel)
        assert columns.offsets == [r.offset for r in want]
        assert columns.timestamps == [r.timestamp for r in want]
        assert columns.keys == [r.key for r in want]
        assert columns.values == [r.value for r in want]
        assert columns.headers == [r.headers for r in want]


@PROPERTY_SETTINGS
@given(records)
def test_append_many_matches_append(recs: list[tuple[Any, ...]]) -> None:
    for kernel in available():
        one = BatchBuilder(kernel=kernel)
        for ts, key, value, hdrs in recs:
            one.append(ts, key, value, hdrs)
        many = BatchBuilder(kernel=kernel)
        assert many.append_many(*zip(*recs, strict=True)) == 0
        assert many.record_count == one.record_count
        assert many.estimated_size() == one.estimated_size()
        assert many.build() == one.build()
