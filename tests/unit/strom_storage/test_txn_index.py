"""The ``.txnindex`` file: Kafka's 34-byte entries, lookups for a fetch range, truncation, a
torn tail left by a crash."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from strom_storage.log.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    TxnIndexFormatError,
    iter_entries,
)

A = AbortedTxn(1, 0, 10, 11)
B = AbortedTxn(2, 5, 20, 12)  # another transaction was still open from 12 when B aborted
C = AbortedTxn(3, 21, 30, 31)


def _index(tmp_path: Path, *txns: AbortedTxn) -> TransactionIndex:
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    for txn in txns:
        index.append(txn)
    return index


def test_entries_use_kafkas_layout(tmp_path: Path) -> None:
    index = _index(tmp_path, A)
    data = index.path.read_bytes()
    assert ENTRY_SIZE == 34 and len(data) == 34
    assert struct.unpack(">hqqqq", data) == (0, 1, 0, 10, 11)
    assert not (tmp_path / "empty.txnindex").exists()
    assert TransactionIndex(tmp_path / "empty.txnindex", 0).is_empty  # no file: no entries


def test_collect_finds_the_overlapping_transactions_and_knows_when_to_stop(
    tmp_path: Path,
) -> None:
    index = _index(tmp_path, A, B, C)
    # A's LSO (11) is not above 12: B may still overlap, and does; C's LSO (31) ends the search.
    assert index.collect(6, 12) == ([A, B], True)
    assert index.collect(11, 21) == ([B], True)
    assert index.collect(0, 40) == ([A, B, C], False)
    assert index.collect(31, 40) == ([], False)
    assert index.collect(0, 1) == ([A], True)  # A's LSO 11 > 1: nothing later overlaps


def test_truncation_drops_entries_from_the_marker_offset_on(tmp_path: Path) -> None:
    index = _index(tmp_path, A, B, C)
    index.truncate_to(21)
    assert index.entries() == [A, B]
    index.truncate_to(20)
    assert index.entries() == [A]
    index.flush()
    index.close()
    assert TransactionIndex(index.path, 0).entries() == [A]


def test_a_torn_tail_is_ignored_and_overwritten(tmp_path: Path) -> None:
    path = _index(tmp_path, A).path
    path.write_bytes(path.read_bytes() + B.encode()[:20])
    reopened = TransactionIndex(path, 0)
    assert reopened.entries() == [A]
    reopened.append(C)
    assert reopened.entries() == [A, C]
    assert path.stat().st_size == 2 * ENTRY_SIZE
    with pytest.raises(TxnIndexFormatError, match="byte 34: 20 trailing bytes"):
        list(iter_entries(A.encode() + B.encode()[:20]))


def test_renamed_and_deleted_with_the_segment(tmp_path: Path) -> None:
    index = _index(tmp_path, A)
    index.rename(index.path.with_name(index.path.name + ".deleted"))
    assert index.entries() == [A]
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000000.txnindex.deleted"]
    index.delete()
    assert list(tmp_path.iterdir()) == [] and index.entries() == []
