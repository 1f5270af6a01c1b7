"""Randomised crash recovery: chop or corrupt the tail, reopen, compare with the model."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from storage_batches import simple_batch

from strom.records.header import walk_batches
from strom_storage.log import FetchIsolation, Log


def _read_all(log: Log) -> list[bytes]:
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.reader.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END).records
        batches = walk_batches(data)
        out.extend(data[p : p + h.size] for p, h in batches)
        offset = batches[-1][1].next_offset
    return out


@pytest.mark.parametrize("seed", range(12))
def test_recovery_keeps_a_valid_prefix(open_log: Callable[..., Log], seed: int) -> None:
    rng = random.Random(seed)
    config = {"segment_bytes": rng.choice([700, 2000]), "index_interval_bytes": 64}
    log = open_log(**config)
    model: list[bytes] = []
    for _ in range(rng.randint(5, 60)):
        buf = bytearray(simple_batch(rng.randint(1, 4), value_size=rng.randint(1, 60)))
        log.append_as_leader(buf)  # patched in place: buf now holds the bytes on disk
        model.append(bytes(buf))
        if rng.random() < 0.2:
            log.maintenance()
    flushed = log.recovery_point
    log.close_unclean()
    # Damage the last segment: cut it, or flip a byte somewhere in it.
    path = sorted(log.directory.glob("*.log"))[-1]
    data = bytearray(path.read_bytes())
    if data:
        if rng.random() < 0.5:
            data = data[: rng.randint(0, len(data))]
        else:
            # Any byte the format protects: the length, magic, CRC and everything the CRC
            # covers. The base offset and leader epoch sit outside the CRC (as in Kafka's v2
            # format), so a flip there is only caught if it breaks offset order.
            pos, header = rng.choice(walk_batches(data))
            within = rng.choice([*range(8, 12), *range(16, header.size)])
            data[pos + within] ^= 0x5A
        path.write_bytes(bytes(data))
    reopened = open_log(**config)
    survivors = _read_all(reopened)
    assert survivors == model[: len(survivors)]  # a prefix, byte for byte, every CRC valid
    last_segment_base = int(path.name.split(".")[0])
    intact = [b for b in model if int.from_bytes(b[:8], "big") < last_segment_base]
    assert survivors[: len(intact)] == intact  # earlier segments untouched
    assert reopened.log_end_offset == (
        walk_batches(survivors[-1])[0][1].next_offset if survivors else last_segment_base
    )
    assert flushed <= reopened.log_end_offset or flushed > last_segment_base
    # And it keeps working.
    info = reopened.append_as_leader(simple_batch(1))
    assert info.first_offset == reopened.log_end_offset - 1
