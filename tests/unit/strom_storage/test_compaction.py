"""Log compaction: last value per key, offsets kept, tombstones, dirty ratio, bounded memory."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from storage_batches import make_batch

from strom.records.header import walk_batches
from strom_server.runtime.clock import ManualClock
from strom_storage.log import FetchIsolation, Log
from strom_storage.log.cleaner.batch_rewrite import decode_batch_records
from strom_storage.log.cleaner.manager import LogCleaner
from strom_storage.log.cleaner.offset_map import OffsetMap
from strom_storage.log.local_log import LocalLog

Entry = tuple[int, bytes | None, bytes | None]  # offset, key, value
SEGMENT = 400  # bytes: a few one-record batches per segment


def _put(log: Log, clock: ManualClock, key: bytes, value: bytes | None) -> int:
    info = log.append_as_leader(make_batch([(key, value, clock.time_ms())]))
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def _records(log: Log) -> list[Entry]:
    out: list[Entry] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.reader.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END).records
        if not data:
            break
        for pos, header in walk_batches(data):
            _, records = decode_batch_records(data[pos : pos + header.size])
            out.extend((r.offset, r.key, r.value) for r in records)
            offset = header.next_offset
    return out


def _compacted_log(open_log: Callable[..., Log], **overrides: object) -> Log:
    config = {"segment_bytes": SEGMENT, "cleanup_policy": ("compact",), **overrides}
    return open_log(**config)


def test_keeps_last_value_per_key_with_offsets_and_order(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = _compacted_log(open_log)
    written: list[Entry] = []
    for i in range(30):
        key = b"k%d" % (i % 4)
        value = b"v%d" % i
        written.append((_put(log, clock, key, value), key, value))
    active = log.active_segment
    active_base = active.base_offset
    active_bytes = active.log_path.read_bytes()
    assert log.segment_count > 3

    stats = LogCleaner(dedupe_buffer_bytes=1 << 16).clean(log, clock.time_ms())
    assert stats is not None and stats.records_removed > 0

    below = [e for e in written if e[0] < active_base]
    latest = {key: offset for offset, key, _ in below}
    expected = [e for e in below if latest[e[1]] == e[0]] + [
        e for e in written if e[0] >= active_base
    ]
    assert _records(log) == expected  # offsets, order and values of survivors unchanged
    assert log.active_segment.log_path.read_bytes() == active_bytes  # never touched
    assert log.log_end_offset == 30
    # A fetch at a removed offset returns the next surviving batch.
    gone = next(o for o, _, _ in written if o not in {e[0] for e in expected})
    data = log.reader.read(gone, 1 << 20).records
    assert walk_batches(data)[0][1].base_offset > gone

    # Survives a restart, and the next pass has nothing to do.
    log.close()
    reopened = _compacted_log(open_log)
    assert _records(reopened) == expected
    assert LogCleaner().clean(reopened, clock.time_ms()) is None


def test_tombstones_removed_only_after_delete_retention(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = _compacted_log(open_log, delete_retention_ms=10_000)
    cleaner = LogCleaner(dedupe_buffer_bytes=1 << 16)
    _put(log, clock, b"gone", b"v1")
    tombstone = _put(log, clock, b"gone", None)
    for i in range(6):
        _put(log, clock, b"other", b"x%d" % i)
    cleaner.clean(log, clock.time_ms())
    keys = [(o, k, v) for o, k, v in _records(log) if k == b"gone"]
    assert keys == [(tombstone, b"gone", None)]  # older value gone, tombstone kept

    clock.advance_ms(5_000)
    for i in range(6):
        _put(log, clock, b"other", b"y%d" % i)
    cleaner.clean(log, clock.time_ms())
    assert [k for _, k, _ in _records(log)].count(b"gone") == 1  # horizon not reached

    clock.advance_ms(6_000)
    for i in range(6):
        _put(log, clock, b"other", b"z%d" % i)
    stats = cleaner.clean(log, clock.time_ms())
    assert stats is not None and stats.tombstones_removed == 1
    assert b"gone" not in [k for _, k, _ in _records(log)]


def test_dirty_ratio_is_respected(open_log: Callable[..., Log], clock: ManualClock) -> None:
    log = _compacted_log(open_log, min_cleanable_dirty_ratio=0.5)
    cleaner = LogCleaner(dedupe_buffer_bytes=1 << 16)
    for i in range(40):
        _put(log, clock, b"k%d" % i, b"v")  # all distinct keys: cleaning removes nothing
    assert cleaner.clean_logs([log], clock.time_ms()) == 1
    assert cleaner.cleanable_range(log, clock.time_ms()).dirty_bytes == 0
    for i in range(5):
        _put(log, clock, b"k%d" % i, b"w")
    cleanable = cleaner.cleanable_range(log, clock.time_ms())
    assert 0 < cleanable.dirty_ratio < 0.5
    assert cleaner.clean_logs([log], clock.time_ms()) == 0
    for i in range(60):
        _put(log, clock, b"k%d" % (i % 40), b"u")
    assert cleaner.cleanable_range(log, clock.time_ms()).dirty_ratio >= 0.5
    assert cleaner.clean_logs([log], clock.time_ms()) == 1


def test_delete_policy_logs_are_not_cleaned(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = open_log(segment_bytes=SEGMENT)
    for i in range(20):
        _put(log, clock, b"k", b"v%d" % i)
    assert LogCleaner().clean_logs([log], clock.time_ms()) == 0


def test_small_offset_map_cleans_in_several_passes(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = _compacted_log(open_log)
    for round_ in range(3):
        for i in range(10):
            _put(log, clock, b"key%d" % i, b"r%d" % round_)
    for i in range(4):
        _put(log, clock, b"pad", b"%d" % i)  # pushes the last round out of the active segment
    cleaner = LogCleaner(dedupe_buffer_bytes=24 * 4)  # 4 slots: 3 keys per pass
    assert OffsetMap(24 * 4).capacity == 3
    passes = 0
    while cleaner.clean(log, clock.time_ms()) is not None:
        passes += 1
        assert passes < 50
    assert passes > 3
    active_base = log.active_segment.base_offset
    survivors = [(k, v) for o, k, v in _records(log) if o < active_base]
    by_key: dict[bytes | None, list[bytes | None]] = {}
    for key, value in survivors:
        by_key.setdefault(key, []).append(value)
    for i in range(10):
        assert by_key[b"key%d" % i] == [b"r2"]  # exactly the last value per key


def test_offset_map() -> None:
    offset_map = OffsetMap(24 * 100)
    for i in range(50):
        offset_map.put(b"k%d" % (i % 20), i)
    assert offset_map.size == 20
    assert offset_map.get(b"k3") == 43
    assert offset_map.get(b"missing") is None


def test_interrupted_swap_is_completed_on_load(
    open_log: Callable[..., Log], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _compacted_log(open_log)
    for i in range(30):
        _put(log, clock, b"k%d" % (i % 3), b"v%d" % i)
    active_base = log.active_segment.base_offset
    before = _records(log)

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("crash between the .swap rename and the old segments' removal")

    monkeypatch.setattr(LocalLog, "remove_segments", crash)
    with pytest.raises(RuntimeError):
        LogCleaner(dedupe_buffer_bytes=1 << 16).clean(log, clock.time_ms())
    assert list(log.directory.glob("*.swap"))
    log.close_unclean()
    monkeypatch.undo()

    reopened = _compacted_log(open_log)
    assert not list(reopened.directory.glob("*.swap"))
    after = _records(reopened)
    # A valid, possibly partly compacted log: survivors are a subsequence of what was written
    # (same offsets, keys, values, order), and the latest value of every key is still there.
    assert set(after) <= set(before) and after == sorted(after)
    latest = {k: (o, k, v) for o, k, v in before}
    assert set(latest.values()) <= set(after)
    assert [e for e in after if e[0] >= active_base] == [e for e in before if e[0] >= active_base]
    reopened.update_high_watermark(reopened.log_end_offset)  # no HW checkpoint survived
    assert LogCleaner(dedupe_buffer_bytes=1 << 16).clean(reopened, clock.time_ms()) is not None
    final = _records(reopened)
    keep = {k: o for o, k, _ in before if o < active_base}
    assert final == [e for e in before if e[0] >= active_base or keep[e[1]] == e[0]]


def test_compressed_multi_record_batches_keep_offsets_inside_batches(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    from strom.records import Compression

    log = _compacted_log(open_log, segment_bytes=600)
    written: list[Entry] = []
    for round_ in range(6):
        records = [(b"k%d" % (i % 5), b"r%d-%d" % (round_, i), clock.time_ms() + i)
                   for i in range(7)]  # fmt: skip
        info = log.append_as_leader(make_batch(records, compression=Compression.LZ4))
        written.extend((info.first_offset + i, k, v) for i, (k, v, _) in enumerate(records))
    log.update_high_watermark(log.log_end_offset)
    active_base = log.active_segment.base_offset
    LogCleaner(dedupe_buffer_bytes=1 << 16).clean(log, clock.time_ms())
    latest = {k: o for o, k, _ in written if o < active_base}
    expected = [e for e in written if e[0] >= active_base or latest[e[1]] == e[0]]
    assert _records(log) == expected
    # Rewritten batches keep their codec and their offset range.
    data = log.reader.read(0, 1 << 20, isolation=FetchIsolation.LOG_END).records
    for _, header in walk_batches(data):
        assert header.compression == Compression.LZ4
        assert header.last_offset_delta == 6


def test_rebuilt_batch_with_horizon_keeps_timestamps() -> None:
    from strom.records import rebuild_batch

    raw = make_batch([(b"a", b"1", 1000), (b"b", None, 1005), (b"c", b"3", 990)], base_offset=40)
    header, records = decode_batch_records(raw)
    rebuilt = rebuild_batch(header, records[1:], delete_horizon=5_000_000)
    new_header, new_records = decode_batch_records(rebuilt)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in new_records] == [
        (41, 1005, b"b", None),
        (42, 990, b"c", b"3"),
    ]
    assert new_header.first_timestamp == 5_000_000 and new_header.max_timestamp == 1005
    assert (new_header.base_offset, new_header.last_offset_delta) == (40, 2)


def test_max_compaction_lag_forces_a_pass_below_the_ratio(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = _compacted_log(open_log, min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=60_000)
    cleaner = LogCleaner(dedupe_buffer_bytes=1 << 16)
    for i in range(40):
        _put(log, clock, b"k%d" % i, b"v")
    cleaner.clean(log, clock.time_ms())
    for i in range(5):
        _put(log, clock, b"k%d" % i, b"w")
    for i in range(5):
        _put(log, clock, b"pad%d" % i, b"w")
    assert cleaner.clean_logs([log], clock.time_ms()) == 0
    clock.advance_ms(61_000)
    assert cleaner.clean_logs([log], clock.time_ms()) == 1


def test_latest_batch_of_a_producer_survives_empty(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = _compacted_log(open_log)
    log.append_as_leader(make_batch([(b"k", b"old", clock.time_ms())], producer_id=5,
                                    producer_epoch=0, base_sequence=0))  # fmt: skip
    for i in range(12):
        _put(log, clock, b"k", b"new%d" % i)
    LogCleaner(dedupe_buffer_bytes=1 << 16).clean(log, clock.time_ms())
    data = log.reader.read(0, 1 << 20, isolation=FetchIsolation.LOG_END).records
    first = walk_batches(data)[0][1]
    assert (first.base_offset, first.producer_id, first.record_count) == (0, 5, 0)
    # A rebuild of producer state from the log still knows the producer's sequence.
    log.close_unclean()
    for snap in log.directory.glob("*.snapshot"):
        snap.unlink()
    reopened = _compacted_log(open_log)
    retry = reopened.append_as_leader(make_batch([(b"k", b"old", clock.time_ms())],
                                                 producer_id=5, producer_epoch=0,
                                                 base_sequence=0))  # fmt: skip
    assert retry.duplicate and retry.first_offset == 0


def test_malformed_records_mark_the_log_uncleanable(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    import struct

    from strom.records.crc import crc32c

    log = _compacted_log(open_log)
    bad = bytearray(make_batch([(b"k", b"v", clock.time_ms())]))
    bad[61] = 0x7F  # the record's length varint now overruns the batch
    struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))  # ...but the CRC is valid
    log.append_as_leader(bytes(bad))  # the hot path checks headers and CRC only
    for i in range(12):
        _put(log, clock, b"k", b"v%d" % i)
    cleaner = LogCleaner(dedupe_buffer_bytes=1 << 16)
    assert cleaner.clean_logs([log], clock.time_ms()) == 0
    assert log.directory in cleaner.uncleanable
    assert cleaner.clean_logs([log], clock.time_ms()) == 0  # skipped from now on
