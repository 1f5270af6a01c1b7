"""A topic's compression.type: the leader stores batches in that codec (recompressing those
that differ, records section only) or, for ``producer``, exactly as the producer sent them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from storage_batches import make_batch

from strom.errors import MessageTooLargeError
from strom.records import Compression, decode_batches
from strom.records.header import walk_batches
from strom_server.runtime.clock import ManualClock
from strom_storage.log import FetchIsolation, Log, LogConfig

RECORDS = [(b"k%d" % i, b"value %d " % i * 20, 1_700_000_000_000 + i) for i in range(50)]


def stored(log: Log) -> bytes:
    return bytes(log.reader.read(0, 1 << 24, isolation=FetchIsolation.LOG_END).records)


def contents(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [(r.offset, r.timestamp, r.key, r.value) for b in decode_batches(data) for r in b]


@pytest.mark.parametrize(
    ("topic", "sent", "codec"),
    [
        ("zstd", Compression.LZ4, Compression.ZSTD),
        ("snappy", Compression.NONE, Compression.SNAPPY),
        ("uncompressed", Compression.GZIP, Compression.NONE),
        ("gzip", Compression.SNAPPY, Compression.GZIP),
        ("lz4", Compression.ZSTD, Compression.LZ4),
    ],
)
def test_batches_are_stored_in_the_topics_codec(
    open_log: Callable[..., Log], topic: str, sent: Compression, codec: Compression
) -> None:
    log = open_log(LogConfig.from_props({"compression.type": topic}))
    batch = make_batch(RECORDS, producer_id=7, producer_epoch=0, base_sequence=0, compression=sent)
    info = log.append_as_leader(batch, leader_epoch=3)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 49, 50)
    data = stored(log)
    ((_, header),) = walk_batches(data)  # CRC checked
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 0, 0)
    assert header.partition_leader_epoch == 3
    assert contents(data) == [(i, ts, k, v) for i, (k, v, ts) in enumerate(RECORDS)]
    # The producer's retry is still recognised as a duplicate.
    assert log.append_as_leader(batch, leader_epoch=3).duplicate


def test_producer_keeps_the_producers_bytes_and_a_matching_codec_is_not_touched(
    open_log: Callable[..., Log],
) -> None:
    for topic in ("producer", "lz4"):
        log = open_log(LogConfig.from_props({"compression.type": topic}))
        start = log.log_end_offset
        batch = make_batch(RECORDS, base_offset=start, leader_epoch=0, compression=Compression.LZ4)
        log.append_as_leader(bytearray(batch))
        data = stored(log)
        last = walk_batches(data)[-1][0]
        assert data[last:] == batch  # byte for byte (offsets already matched)
        log.close()


def test_log_append_time_with_recompression(
    open_log: Callable[..., Log], clock: ManualClock
) -> None:
    log = open_log(
        LogConfig.from_props(
            {"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"}
        )
    )
    clock.advance(3600)
    log.append_as_leader(make_batch(RECORDS, compression=Compression.LZ4))
    (batch,) = decode_batches(stored(log))
    assert batch.compression is Compression.GZIP
    assert {r.timestamp for r in batch} == {clock.time_ms()}


def test_a_batch_too_large_once_recompressed_is_refused(open_log: Callable[..., Log]) -> None:
    small = make_batch(RECORDS, compression=Compression.ZSTD)
    log = open_log(
        LogConfig.from_props(
            {"compression.type": "uncompressed", "max.message.bytes": str(len(small) + 100)}
        )
    )
    with pytest.raises(MessageTooLargeError, match="once recompressed"):
        log.append_as_leader(small)
    assert log.log_end_offset == 0
