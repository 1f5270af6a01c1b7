"""strom dump-log over a partition with transactions: markers in ``.log`` files, ``.txnindex``
files (and where a torn or bad one breaks), transaction fields of producer snapshots."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from strom.records import BatchBuilder
from strom_server.runtime.clock import ManualClock
from strom_storage.log import Log, LogConfig
from strom_storage.tools.dump_log import DumpOptions, dump_files

PID = 1000
TS = 1_700_000_000_000


def _txn_partition(directory: Path) -> Path:
    """Offsets: 0-1 aborted (marker 2), 3 committed (marker 4), 5 open."""
    log = Log.open(directory, LogConfig(), clock=ManualClock())
    for epoch, n, committed in ((0, 2, False), (1, 1, True), (2, 1, None)):
        builder = BatchBuilder(
            producer_id=PID, producer_epoch=epoch, base_sequence=0, is_transactional=True
        )
        for i in range(n):
            builder.append(TS, None, b"e%d-%d" % (epoch, i))
        log.append_as_leader(builder.build(), verified={(PID, epoch)})
        if committed is not None:
            log.append_txn_marker(
                PID, epoch, committed=committed, coordinator_epoch=7, leader_epoch=0
            )
    log.update_high_watermark(log.log_end_offset)
    log.close()
    return directory


def _dump(*paths: Path, **options: bool) -> tuple[int, str]:
    out = io.StringIO()
    status = dump_files(list(paths), DumpOptions(**options), out)
    return status, out.getvalue()


def _problems(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("CORRUPT ")]


def test_markers_are_shown_with_their_type_and_coordinator_epoch(tmp_path: Path) -> None:
    directory = _txn_partition(tmp_path / "t-0")
    status, text = _dump(directory / "00000000000000000000.log", print_data_log=True)
    assert status == 0, _problems(text)
    markers = [line for line in text.splitlines() if "endTxnMarker" in line]
    assert [re.search(r"offset: (\d+)", m)[1] for m in markers] == ["2", "4"]  # type: ignore[index]
    assert "endTxnMarker: ABORT coordinatorEpoch: 7" in markers[0]
    assert "endTxnMarker: COMMIT coordinatorEpoch: 7" in markers[1]
    controls = [line for line in text.splitlines() if "isControl: true" in line]
    assert len(controls) == 2 and all("isTransactional: true" in c for c in controls)


def test_txnindex_entries_are_listed(tmp_path: Path) -> None:
    directory = _txn_partition(tmp_path / "t-0")
    index = directory / "00000000000000000000.txnindex"
    assert index.stat().st_size == 34
    status, text = _dump(index)
    assert status == 0
    assert text.splitlines()[-1] == (
        "producerId: 1000 firstOffset: 0 lastOffset: 2 lastStableOffset: 3 position: 0"
    )
    status, text = _dump(index, json=True)
    objects = [json.loads(line) for line in text.splitlines()]
    assert objects[0]["kind"] == "txn-index"
    assert objects[1] == {
        "file": str(index),
        "type": "aborted-txn",
        "entry": 0,
        "producerId": 1000,
        "firstOffset": 0,
        "lastOffset": 2,
        "lastStableOffset": 3,
        "position": 0,
    }


def test_a_torn_or_bad_txnindex_is_reported_where_it_breaks(tmp_path: Path) -> None:
    directory = _txn_partition(tmp_path / "t-0")
    index = directory / "00000000000000000000.txnindex"
    entry = index.read_bytes()
    index.write_bytes(entry + entry[:20])  # a second entry cut short by a crash
    status, text = _dump(index)
    assert status == 1
    assert "producerId: 1000 firstOffset: 0" in text  # the whole entry is still shown
    (problem,) = _problems(text)
    assert "entry 1 (byte 34): 20 trailing bytes: a torn entry" in problem
    index.write_bytes(b"\x00\x05" + entry[2:])
    status, text = _dump(index)
    assert status == 1
    (problem,) = _problems(text)
    assert "entry 0 (byte 0): entry version 5, expected 0" in problem


def test_snapshots_show_the_transaction_state(tmp_path: Path) -> None:
    directory = _txn_partition(tmp_path / "t-0")
    (snapshot,) = directory.glob("*.snapshot")
    status, text = _dump(snapshot)
    assert status == 0
    assert "version: 2 " in text
    producer = next(line for line in text.splitlines() if line.startswith("producerId"))
    assert "producerEpoch: 2 " in producer
    assert "endedEpoch: 1 coordinatorEpoch: 7 currentTxnFirstOffset: 5 " in producer
