"""The __transaction_state record codec: keys, whole-state JSON values, markers, refusals."""

from __future__ import annotations

import pytest

from strom.errors import InvalidRecordError
from strom_coordinator.txn import records
from strom_coordinator.txn.state import TxnMetadata, TxnState


def test_a_state_survives_the_round_trip() -> None:
    meta = TxnMetadata(
        "tx-é", 7, 3, 60_000, TxnState.PREPARE_COMMIT,
        partitions=frozenset({("t", 1), ("__consumer_offsets", 4)}), groups=frozenset({"g"}),
        start_ms=10, last_update_ms=20, txn_producer_id=7, txn_epoch=2, aborted_by_timeout=True,
    )  # fmt: skip
    key = records.transaction_key(meta.transactional_id)
    assert key[:2] == b"\x00\x00"
    assert records.decode_key(key) == "tx-é"
    assert records.decode_value("tx-é", records.encode_value(meta)) == meta


def test_markers_are_recognised_and_bad_records_refused() -> None:
    key, value = records.ownership_marker(1, 5)
    assert records.decode_key(key) is None and len(value) == 10
    with pytest.raises(InvalidRecordError):
        records.decode_key(b"\x00")
    with pytest.raises(InvalidRecordError):
        records.decode_key(b"\x00\x05\x00\x09ab")
    with pytest.raises(InvalidRecordError):
        records.decode_value("x", b"{}")
    with pytest.raises(InvalidRecordError, match="too new"):
        records.decode_value("x", b'{"version": 9}')
