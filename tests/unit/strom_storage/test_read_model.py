"""Randomised reads against a model of what was appended (fixed seeds: deterministic)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from storage_batches import simple_batch

from strom.records.header import walk_batches
from strom_storage.log import FetchIsolation, Log


@pytest.mark.parametrize("seed", range(4))
def test_random_reads_match_the_model(open_log: Callable[..., Log], seed: int) -> None:
    rng = random.Random(seed)
    log = open_log(segment_bytes=rng.choice([600, 1000, 5000]),
                   index_interval_bytes=rng.choice([1, 100, 4096]))  # fmt: skip
    model: list[tuple[int, int, bytes]] = []  # base offset, next offset, bytes on disk
    for _ in range(120):
        batch = simple_batch(rng.randint(1, 5), value_size=rng.randint(1, 80))
        info = log.append_as_leader(batch)
        on_disk = bytearray(batch)
        on_disk[0:8] = info.first_offset.to_bytes(8, "big")
        on_disk[12:16] = (0).to_bytes(4, "big")
        model.append((info.first_offset, info.last_offset + 1, bytes(on_disk)))
        if rng.random() < 0.05:
            log.roll()
    hw = rng.randint(0, log.log_end_offset)
    log.update_high_watermark(hw)
    segment_bases = [s.base_offset for s in log.segments()]
    for _ in range(200):
        offset = rng.randint(0, log.log_end_offset)
        max_bytes = rng.choice([0, 50, 200, 1000, 100_000])
        isolation = rng.choice(list(FetchIsolation))
        # No transactions here: the last stable offset is the high watermark.
        limit = log.log_end_offset if isolation is FetchIsolation.LOG_END else hw
        data = log.reader.read(offset, max_bytes, isolation=isolation).records
        if offset >= limit:
            assert data == b""
            continue
        first = next(i for i, (_, nxt, _) in enumerate(model) if nxt > offset)
        # The expected run: batches from `first` in the same segment, below the limit, up to
        # max_bytes, and always the first batch whole.
        seg_end = min((b for b in segment_bases if b > model[first][0]), default=None)
        expected = b""
        for base, _, raw in model[first:]:
            if base >= limit or (seg_end is not None and base >= seg_end):
                break
            if expected and len(expected) + len(raw) > max_bytes:
                break
            expected += raw
        assert data == expected
        assert walk_batches(data)  # CRCs valid
