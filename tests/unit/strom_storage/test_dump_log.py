"""strom dump-log over files written by the real engine: listing, checks, corruption reports.

Every partition here is written by ``Log`` (several small segments, lz4/gzip/uncompressed
batches, keys, headers and binary values, an idempotent producer so that snapshots exist); the
corruptions are made on those files afterwards, the way a crash or a bad disk would.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cluster_testkit import assert_ok, assert_one_line_error, run_strom

from strom.records import BatchBuilder, Compression, encode_batch
from strom.records.header import HEADER_SIZE
from strom_server.runtime.clock import ManualClock
from strom_storage.log import Log, LogConfig
from strom_storage.log.offset_index import OffsetIndex
from strom_storage.log.time_index import TimeIndex
from strom_storage.tools.dump_log import DumpLogError, DumpOptions, dump_files

PRODUCER_ID = 4242
BATCHES = 30
RECORDS_PER_BATCH = 3
CODECS = (Compression.NONE, Compression.LZ4, Compression.GZIP)
ESCAPE_VALUE = b"red \x1b[31m text"  # an ANSI escape: must never reach the terminal raw
BINARY_VALUE = b"\x00\xff\x10\x80"
TEXT_VALUE = "héllo\nwörld".encode()
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)


def _write_partition(directory: Path, *, close: bool = True) -> Log:
    """30 idempotent batches of 3 records in 2000-byte segments, codecs in turn."""
    log = Log.open(directory, CONFIG, clock=ManualClock())
    for i in range(BATCHES):
        builder = BatchBuilder(
            compression=CODECS[i % len(CODECS)],
            producer_id=PRODUCER_ID,
            producer_epoch=3,
            base_sequence=i * RECORDS_PER_BATCH,
        )
        ts = 1_700_000_000_000 + i * 10
        builder.append(ts, b"key-%d" % i, TEXT_VALUE, [("trace", b"t-%d" % i), ("bin", b"\x01")])
        builder.append(ts + 1, None, ESCAPE_VALUE)
        builder.append(ts + 2, BINARY_VALUE, None)
        log.append_as_leader(builder.build(), leader_epoch=7)
    log.update_high_watermark(log.log_end_offset)
    if close:
        log.close()
    return log


@pytest.fixture
def partition(tmp_path: Path) -> Path:
    directory = tmp_path / "orders-0"
    _write_partition(directory)
    return directory


def _dump(*paths: Path, **options: bool) -> tuple[int, str]:
    out = io.StringIO()
    status = dump_files(list(paths), DumpOptions(**options), out)
    return status, out.getvalue()


def _fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+): (\S+)", line))


def _batch_lines(text: str) -> list[dict[str, str]]:
    return [_fields(line) for line in text.splitlines() if line.startswith("baseOffset: ")]


def _problems(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("CORRUPT ", "UNVERIFIED "))]


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def _logs(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


# -- what a healthy partition shows -----------------------------------------------------------


def test_every_batch_of_every_segment_is_listed_with_its_header(partition: Path) -> None:
    logs = _logs(partition)
    assert len(logs) >= 3  # several segments
    status, text = _dump(*logs)
    assert status == 0 and not _problems(text)
    batches = _batch_lines(text)
    assert [int(b["baseOffset"]) for b in batches] == list(range(0, 90, 3))
    assert {b["compresscodec"] for b in batches} == {"none", "lz4", "gzip"}
    first = batches[0]
    assert first["lastOffset"] == "2" and first["count"] == "3"
    assert (first["producerId"], first["producerEpoch"]) == (str(PRODUCER_ID), "3")
    assert (first["baseSequence"], first["lastSequence"]) == ("0", "2")
    assert first["partitionLeaderEpoch"] == "7"
    assert first["isTransactional"] == first["isControl"] == "false"
    assert first["CreateTime"] == "1700000000002" and first["magic"] == "2"
    assert all(b["isvalid"] == "true" for b in batches)
    # position + size of one batch is the position of the next, within each segment
    for log in logs:
        _, one = _dump(log)
        rows = _batch_lines(one)
        assert rows[0]["position"] == "0"
        for before, after in itertools.pairwise(rows):
            assert int(before["position"]) + int(before["size"]) == int(after["position"])
        assert int(rows[-1]["position"]) + int(rows[-1]["size"]) == log.stat().st_size
        assert f"Log starting offset: {int(log.name.split('.')[0])}" in one


def test_print_data_log_shows_every_record_and_never_a_raw_control_character(
    partition: Path,
) -> None:
    status, text = _dump(*_logs(partition), print_data_log=True)
    assert status == 0
    records = [line for line in text.splitlines() if line.startswith("| offset: ")]
    assert len(records) == BATCHES * RECORDS_PER_BATCH
    assert records[0] == (
        "| offset: 0 CreateTime: 1700000000000 keySize: 5 valueSize: 13 sequence: 0 "
        'headers: [trace="t-0", bin=0x01] key: "key-0" payload: "héllo\\nwörld"'
    )
    assert records[1].endswith("key: null payload: 0x" + ESCAPE_VALUE.hex())
    assert records[2].endswith(f"key: 0x{BINARY_VALUE.hex()} payload: null")
    assert "sequence: 89" in records[-1]
    assert all(ch == "\n" or ch.isprintable() for ch in text)


def test_json_gives_one_object_per_line(partition: Path) -> None:
    status, text = _dump(_logs(partition)[0], print_data_log=True, json=True)
    assert status == 0
    objects = [json.loads(line) for line in text.splitlines()]
    assert objects[0]["type"] == "file" and objects[0]["kind"] == "log"
    batch = next(o for o in objects if o["type"] == "batch")
    assert batch["baseOffset"] == 0 and batch["isvalid"] is True
    assert batch["timestampType"] == "CreateTime" and batch["maxTimestamp"] == 1700000000002
    record = next(o for o in objects if o["type"] == "record")
    assert record["key"] == "key-0" and record["value"] == TEXT_VALUE.decode()
    assert record["headers"] == [{"key": "trace", "value": "t-0"}, {"key": "bin", "value": "\x01"}]
    binary = [o for o in objects if o["type"] == "record"][2]
    assert binary["key"] == {"hex": BINARY_VALUE.hex()} and binary["value"] is None
    assert text.isascii()


def test_index_entries_are_those_the_engine_reads_and_check_out(partition: Path) -> None:
    log = _logs(partition)[0]
    base = int(log.name.split(".")[0])
    index_path, time_path = log.with_suffix(".index"), log.with_suffix(".timeindex")
    engine_offsets = OffsetIndex(index_path, base, max_index_size=0)
    engine_times = TimeIndex(time_path, base, max_index_size=0)
    status, text = _dump(index_path, time_path)
    assert status == 0 and not _problems(text)
    offsets = [tuple(map(int, m)) for m in re.findall(r"offset: (\d+) position: (\d+)", text)]
    times = [tuple(map(int, m)) for m in re.findall(r"timestamp: (\d+) offset: (\d+)", text)]
    assert offsets and offsets == [engine_offsets.entry(n) for n in range(engine_offsets.entries)]
    assert times and times == [engine_times.entry(n) for n in range(engine_times.entries)]
    assert _dump(index_path, time_path, verify_index_only=True) == (0, "")


def test_producer_snapshot_shows_the_producer_state(tmp_path: Path) -> None:
    log = _write_partition(tmp_path / "p-0", close=False)
    expected = log.producer_state.producers[PRODUCER_ID]
    log.close()
    snapshot = sorted((tmp_path / "p-0").glob("*.snapshot"))[-1]
    assert int(snapshot.name.split(".")[0]) == BATCHES * RECORDS_PER_BATCH  # taken at close
    status, text = _dump(snapshot)
    assert status == 0
    assert "version: 2 crc: " in text and "isvalid: true producerCount: 1" in text
    producer = _fields(next(x for x in text.splitlines() if x.startswith("producerId")))
    assert producer["producerId"] == str(PRODUCER_ID) and producer["producerEpoch"] == "3"
    assert producer["lastSequence"] == str(expected.last_seq) == "89"
    assert producer["lastOffset"] == "89"
    assert producer["lastTimestamp"] == str(expected.last_timestamp)
    assert producer["batches"] == "5"
    assert text.count("\n| firstSequence: ") == 5


def test_checkpoints_and_marker(partition: Path) -> None:
    status, text = _dump(
        partition / "recovery-point-offset-checkpoint",
        partition / "high-watermark-checkpoint",
        partition / "leader-epoch-checkpoint",
        partition / ".clean-shutdown",
    )
    assert status == 0
    assert text.count("offset: 90\n") == 2
    assert "epoch: 7 startOffset: 0" in text
    assert "clean shutdown marker" in text


def test_a_running_nodes_files_are_read_without_changing_them(tmp_path: Path) -> None:
    log = _write_partition(tmp_path / "live-0", close=False)
    try:
        files = sorted(p for p in (tmp_path / "live-0").iterdir() if p.is_file())
        before = {p: _fingerprint(p) for p in files}
        status, text = _dump(*files, print_data_log=True)
        after = {p: _fingerprint(p) for p in files}
        assert before == after
        assert status == 0, _problems(text)
        # The active segment's indexes are preallocated: their zeroed room is counted, not shown.
        assert "zeroed entries" in text
    finally:
        log.close()


def test_control_batches_show_their_transaction_markers(tmp_path: Path) -> None:
    """Strom's leaders refuse transactions, but a follower keeps whatever its leader wrote."""
    log = Log.open(tmp_path / "txn-0", CONFIG, clock=ManualClock())
    data = encode_batch(
        [(1_700_000_000_000, b"k", b"v")],
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
    )
    marker = encode_batch(
        [(1_700_000_000_001, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")],
        base_offset=1,
        producer_id=9,
        producer_epoch=1,
        is_transactional=True,
        is_control=True,
    )
    log.append_as_follower(data + marker)
    log.close()
    status, text = _dump(_logs(tmp_path / "txn-0")[0], print_data_log=True)
    assert status == 0
    batches = _batch_lines(text)
    assert [(b["isTransactional"], b["isControl"]) for b in batches] == [
        ("true", "false"),
        ("true", "true"),
    ]
    assert text.splitlines()[-1] == (
        "| offset: 1 CreateTime: 1700000000001 keySize: 4 valueSize: 6 sequence: -1 "
        "endTxnMarker: COMMIT coordinatorEpoch: 5"
    )


def test_log_append_time_batches_name_their_timestamp_type(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    clock = ManualClock(start_ms=1_800_000_000_000)
    log = Log.open(tmp_path / "lat-0", config, clock=clock)
    log.append_as_leader(encode_batch([(5, None, b"a"), (6, None, b"b")]))
    log.close()
    status, text = _dump(_logs(tmp_path / "lat-0")[0], print_data_log=True)
    assert status == 0
    assert _batch_lines(text)[0]["LogAppendTime"] == "1800000000000"
    assert text.count("LogAppendTime: 1800000000000") == 3  # the batch and both records


def test_a_segment_being_appended_to_is_never_reported_torn(tmp_path: Path) -> None:
    """A writer thread appends while the active segment and its indexes are dumped."""
    log = Log.open(tmp_path / "busy-0", LogConfig(index_interval_bytes=100), clock=ManualClock())
    stop = threading.Event()

    def append() -> None:
        for _ in range(3_000):  # at most ~20 MB
            if stop.wait(0.0002):
                return
            log.append_as_leader(encode_batch([(1_700_000_000_000, None, b"x" * 300)] * 20))

    writer = threading.Thread(target=append)
    writer.start()
    try:
        segment = log.active_segment
        paths = [segment.log_path, segment.offset_index.path, segment.time_index.path]
        sizes = []
        for _ in range(20):
            status, text = _dump(*paths)
            assert status == 0, _problems(text)
            sizes.append(len(_batch_lines(text)))
        assert sizes[-1] > sizes[0]  # the file grew while it was dumped
    finally:
        stop.set()
        writer.join()
        log.close()


# -- corruption ---------------------------------------------------------------------------------


def test_a_torn_tail_is_reported_where_recovery_cuts_it(tmp_path: Path) -> None:
    directory = tmp_path / "torn-0"
    _write_partition(directory)
    last = _logs(directory)[-1]
    _, text = _dump(last)
    rows = _batch_lines(text)
    cut_batch = rows[-1]
    torn_at = int(cut_batch["position"])
    os.truncate(last, torn_at + 40)  # mid-header of the last batch
    status, text = _dump(last)
    assert status == 1
    assert [r["baseOffset"] for r in _batch_lines(text)] == [r["baseOffset"] for r in rows[:-1]]
    (problem,) = _problems(text)
    assert problem == (
        f"CORRUPT {last}: batch at byte {torn_at}: 40 bytes left, a batch header needs "
        f"{HEADER_SIZE}; the last 40 bytes are not read"
    )
    os.truncate(last, torn_at + HEADER_SIZE + 5)  # a whole header, the records cut short
    status, text = _dump(last)
    (problem,) = _problems(text)
    assert f"batch at byte {torn_at}: header says {cut_batch['size']} bytes, only 66 remain" in (
        problem
    )
    # Recovery (an unclean open) cuts the segment exactly there.
    (directory / ".clean-shutdown").unlink()
    Log.open(directory, CONFIG, clock=ManualClock()).close()
    assert last.stat().st_size == torn_at
    assert _dump(last)[0] == 0


def test_a_flipped_byte_fails_that_batch_crc_and_the_rest_is_still_listed(partition: Path) -> None:
    log = _logs(partition)[0]
    rows = _batch_lines(_dump(log)[1])
    bad = rows[2]
    data = bytearray(log.read_bytes())
    data[int(bad["position"]) + HEADER_SIZE + 3] ^= 0x01  # a byte of a record
    log.write_bytes(bytes(data))
    status, text = _dump(log, print_data_log=True)
    assert status == 1
    batches = _batch_lines(text)
    assert len(batches) == len(rows)
    assert [b["isvalid"] for b in batches].count("false") == 1
    assert batches[2]["isvalid"] == "false"
    (problem,) = _problems(text)
    assert f"batch at byte {bad['position']} (base offset {bad['baseOffset']}): CRC-32C is" in (
        problem
    )
    # its records are not decoded; the others are
    record_offsets = re.findall(r"^\| offset: (\d+)", text, flags=re.MULTILINE)
    assert bad["baseOffset"] not in record_offsets
    assert len(record_offsets) == (len(rows) - 1) * RECORDS_PER_BATCH


def test_garbage_in_the_middle_stops_the_walk_with_its_position(partition: Path) -> None:
    log = _logs(partition)[0]
    rows = _batch_lines(_dump(log)[1])
    at = int(rows[1]["position"])
    data = bytearray(log.read_bytes())
    data[at + 16] = 9  # magic
    log.write_bytes(bytes(data))
    status, text = _dump(log)
    assert status == 1 and len(_batch_lines(text)) == 1
    (problem,) = _problems(text)
    assert f"batch at byte {at}: magic 9, expected 2; the last {len(data) - at} bytes" in problem
    data[at + 16] = 2
    data[at + 8 : at + 12] = (10_000).to_bytes(4, "big")  # a length beyond the file
    log.write_bytes(bytes(data))
    _, text = _dump(log)
    (problem,) = _problems(text)
    assert f"batch at byte {at}: header says 10012 bytes, only {len(data) - at} remain" in problem


def test_a_broken_index_is_reported_entry_by_entry(partition: Path) -> None:
    log = _logs(partition)[0]
    index = log.with_suffix(".index")
    entries = index.read_bytes()
    assert len(entries) >= 16
    broken = bytearray(entries)
    position = int.from_bytes(broken[12:16], "big")
    broken[12:16] = (position + 1).to_bytes(4, "big")  # entry 1 points inside a batch
    index.write_bytes(bytes(broken) + b"\x00\x00\x00")  # and a partial entry at the end
    status, text = _dump(index, verify_index_only=True)
    assert status == 1
    lines = text.splitlines()
    assert lines == [
        f"CORRUPT {index}: entry 1 (byte 8): no batch of {log.name} starts at byte {position + 1}",
        f"CORRUPT {index}: entry {len(entries) // 8} (byte {len(entries)}): partial entry, "
        "3 of 8 bytes",
    ]
    # Without --verify-index-only, the entries are listed too, the problems in between.
    _, text = _dump(index)
    assert "offset: " in text and lines[0] in text.splitlines()


def test_a_time_index_out_of_order_or_naming_the_wrong_batch_is_reported(partition: Path) -> None:
    log = _logs(partition)[0]
    timeindex = log.with_suffix(".timeindex")
    data = bytearray(timeindex.read_bytes())
    assert len(data) >= 36
    first = int.from_bytes(data[0:8], "big")
    data[0:8] = (first - 1).to_bytes(8, "big")  # entry 0: not the batch's max timestamp
    data[12:20] = (1).to_bytes(8, "big")  # entry 1: a timestamp below entry 0's
    inside = int.from_bytes(data[32:36], "big") + 1
    data[32:36] = inside.to_bytes(4, "big")  # entry 2: an offset inside a batch
    timeindex.write_bytes(bytes(data))
    status, text = _dump(timeindex, verify_index_only=True)
    assert status == 1
    problems = text.splitlines()
    assert len(problems) == 3
    first_offset = int.from_bytes(data[8:12], "big")
    assert problems[0].endswith(
        f"entry 0 (byte 0): the batch at offset {first_offset} of {log.name} has max timestamp "
        f"{first}, not {first - 1}"
    )
    assert "entry 1 (byte 12): timestamp 1 is not above the previous entry's" in problems[1]
    assert f"entry 2 (byte 24): no batch of {log.name} starts at offset {inside}" in problems[2]


def test_an_index_without_its_log(tmp_path: Path, partition: Path) -> None:
    index = _logs(partition)[0].with_suffix(".index")
    alone = tmp_path / index.name
    alone.write_bytes(index.read_bytes())
    status, text = _dump(alone)
    assert status == 0 and "note: entries not checked" in text
    status, text = _dump(alone, verify_index_only=True)
    assert status == 1
    assert (
        text
        == f"UNVERIFIED {alone}: cannot verify: {index.with_suffix('.log').name} does not exist\n"
    )


def test_a_torn_or_corrupt_snapshot(partition: Path) -> None:
    snapshot = sorted(partition.glob("*.snapshot"))[-1]
    data = snapshot.read_bytes()
    snapshot.write_bytes(data[:-7])
    status, text = _dump(snapshot)
    assert status == 1
    assert "isvalid: false" in text
    problems = _problems(text)
    assert len(problems) == 2
    assert "byte 2: CRC-32C is" in problems[0]
    assert "byte 43: producer 0 (id 4242): its 5 batches are cut off" in problems[1]
    snapshot.write_bytes(data[:6])
    status, text = _dump(snapshot)
    assert _problems(text) == [
        f"CORRUPT {snapshot}: byte 6: the file ends after 6 bytes, a header needs 10"
    ]


def test_malformed_checkpoints_name_the_line(partition: Path) -> None:
    hw = partition / "high-watermark-checkpoint"
    hw.write_text("0\nninety\n")
    epochs = partition / "leader-epoch-checkpoint"
    epochs.write_text("0\n2\n7 0\n5 10\n")
    status, text = _dump(hw, epochs)
    assert status == 1
    assert _problems(text) == [
        f"CORRUPT {hw}: line 2: 'ninety' is not an offset",
        f"CORRUPT {epochs}: line 4: epoch 5 at offset 10 does not follow epoch 7 at offset 0 "
        "(both must increase)",
    ]


def test_unknown_and_missing_files(tmp_path: Path, partition: Path) -> None:
    stray = tmp_path / "notes.txt"
    stray.write_text("hello")
    status, text = _dump(stray)
    assert status == 1
    assert text.splitlines()[-1].startswith(f"UNKNOWN {stray}: not a file the storage engine")
    with pytest.raises(DumpLogError, match=r"no-such\.log: no such file"):
        _dump(_logs(partition)[0], tmp_path / "no-such.log")
    with pytest.raises(DumpLogError, match="orders-0: is a directory"):
        _dump(partition)


# -- the command --------------------------------------------------------------------------------


def test_strom_dump_log_command(partition: Path) -> None:
    log = _logs(partition)[0]
    result = assert_ok(run_strom("dump-log", "--print-data-log", str(log)))
    assert result.stdout.startswith(f"Dumping {log}\nLog starting offset: 0\nbaseOffset: 0 ")
    assert "\x1b" not in result.stdout
    data = bytearray(log.read_bytes())
    data[HEADER_SIZE + 3] ^= 0x01
    log.write_bytes(bytes(data))
    result = run_strom("dump-log", str(log))
    assert result.returncode == 1, result.explain()
    assert "Traceback" not in result.stderr
    assert f"CORRUPT {log}: batch at byte 0 (base offset 0): CRC-32C is" in result.stdout
    missing = partition / "00000000000000099999.log"
    assert_one_line_error(run_strom("dump-log", str(missing)), str(missing), "no such file")
    # python -m strom_storage.tools.dump_log is the same command
    module = subprocess.run(
        [sys.executable, "-m", "strom_storage.tools.dump_log", str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (module.returncode, module.stdout) == (result.returncode, result.stdout)
