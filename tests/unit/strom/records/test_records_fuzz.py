"""Fuzzing: mutated, truncated and extended batches decode correctly or raise a
CorruptRecordError subclass (or UnsupportedCompressionTypeError), nothing else, and both kernels
behave identically. Deterministic seeds; a few thousand cases each."""

from __future__ import annotations

import random

from records_util import outcome, refresh_crc

from strom.errors import CorruptRecordError, UnsupportedCompressionTypeError
from strom.records import decode_batch, decode_batches, decode_columns, encode_batch
from strom.records.kernel import PYTHON, Kernel, available

ALLOWED = (CorruptRecordError, UnsupportedCompressionTypeError)


def seed_batches() -> list[bytes]:
    rng = random.Random(99)
    seeds = []
    for codec in ("none", "none", "none", "gzip", "lz4", "zstd"):
        records = []
        for i in range(rng.randrange(1, 6)):
            key = rng.choice([None, b"", rng.randbytes(rng.randrange(1, 20))])
            value = rng.choice([None, b"", rng.randbytes(rng.randrange(1, 200))])
            headers = [
                (rng.choice(["a", "trace", "ü"]), rng.choice([None, b"", rng.randbytes(5)]))
                for _ in range(rng.randrange(3))
            ]
            records.append((1_700_000_000_000 + rng.randrange(-1000, 1000), key, value, headers))
            del i
        seeds.append(
            encode_batch(
                records,
                compression=codec,
                base_offset=rng.randrange(1 << 40),
                producer_id=rng.choice([-1, 77]),
                log_append_time=rng.random() < 0.2,
            )
        )
    return seeds


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    kind = rng.randrange(6)
    if kind == 0:  # flip bytes, biased towards the records section
        for _ in range(rng.randrange(1, 5)):
            pos = rng.randrange(61, len(out)) if rng.random() < 0.8 else rng.randrange(len(out))
            out[pos] = rng.choice(
                (rng.randrange(256), out[pos] ^ (1 << rng.randrange(8)), 0x80, 0xFF, 0x00, 0x01)
            )
    elif kind == 1:  # truncate
        del out[rng.randrange(len(out)) :]
    elif kind == 2:  # extend
        out += rng.randbytes(rng.randrange(1, 40))
    elif kind == 3:  # delete a span inside
        start = rng.randrange(len(out))
        del out[start : start + rng.randrange(1, 8)]
    elif kind == 4:  # insert a span inside
        start = rng.randrange(len(out))
        out[start:start] = rng.randbytes(rng.randrange(1, 8))
    else:  # rewrite a header field
        pos = rng.choice((8, 12, 16, 21, 22, 23, 57, 60))
        out[pos] = rng.randrange(256)
    if rng.random() < 0.5 and len(out) >= 12 and kind in (1, 2, 3, 4):
        # Keep the batch length consistent with the new size, so the record checks are reached.
        out[8:12] = (len(out) - 12).to_bytes(4, "big", signed=True)
    if rng.random() < 0.7:
        return refresh_crc(out)  # past the CRC check: exercise the record decoder
    return bytes(out)


def check(data: bytes, kernels: list[Kernel]) -> None:
    results = []
    for kernel in kernels:
        try:
            batch = decode_batch(data, kernel=kernel)
        except ALLOWED as exc:
            results.append((type(exc).__name__, str(exc)))
            if data:  # decode_columns reads every batch: of b"" there are none
                assert outcome(lambda k=kernel: decode_columns(data, kernel=k)) == results[-1]
            continue
        # A successful decode is self-consistent.
        assert len(batch.records) == batch.header.record_count
        offsets = [r.offset for r in batch.records]
        assert offsets == sorted(set(offsets))
        assert all(batch.base_offset <= o <= batch.last_offset for o in offsets)
        results.append(("ok", batch))
        (columns,) = decode_columns(data[: batch.size], kernel=kernel)
        assert columns.offsets == offsets
        assert columns.values == [r.value for r in batch.records]
    assert all(result == results[0] for result in results), results


def test_fuzz_mutations() -> None:
    rng = random.Random(1234)
    seeds = seed_batches()
    kernels = available()
    for _ in range(4000):
        check(mutate(rng, rng.choice(seeds)), kernels)


def test_fuzz_concatenations() -> None:
    rng = random.Random(4321)
    seeds = seed_batches()
    kernels = available()
    for _ in range(300):
        data = b"".join(rng.choice(seeds) for _ in range(3))
        data = mutate(rng, data) if rng.random() < 0.8 else data
        results = [
            outcome(lambda k=kernel, d=data: [b.records for b in decode_batches(d, kernel=k)])
            for kernel in kernels
        ]
        assert results[0][0] in {"ok", *(cls.__name__ for cls in _subclasses())}, results[0]
        assert all(r == results[0] for r in results)


def test_fuzz_kernel_on_random_sections() -> None:
    """Feed the per-record decoders raw random bytes (no CRC in the way)."""
    rng = random.Random(555)
    kernels = available()
    alphabet = (0x00, 0x01, 0x02, 0x03, 0x04, 0x7F, 0x80, 0xFF, 0x0E, 0x10, 0xC3)
    for _ in range(3000):
        size = rng.randrange(60)
        section = bytes(
            rng.choice(alphabet) if rng.random() < 0.7 else rng.randrange(256) for _ in range(size)
        )
        count = rng.choice((0, 1, 2, 3, 10, 2**31 - 1))
        args = (
            section,
            0,
            size,
            count,
            rng.randrange(100),
            rng.randrange(-10, 10),
            rng.choice((0, 1, 5, 2**31 - 1)),
            None,
        )
        expected = outcome(lambda a=args: PYTHON.decode_records(*a))
        assert expected[0] in {"ok", *(cls.__name__ for cls in _subclasses())}, expected
        for kernel in kernels:
            assert outcome(lambda a=args, k=kernel: k.decode_records(*a)) == expected
            columns = outcome(lambda a=args, k=kernel: k.decode_columns(*a))
            if expected[0] == "ok":
                assert columns[0] == "ok"
            else:
                assert columns == expected


def _subclasses() -> set[type[Exception]]:
    found: set[type[Exception]] = {UnsupportedCompressionTypeError}
    pending: list[type[Exception]] = [CorruptRecordError]
    while pending:
        cls = pending.pop()
        found.add(cls)
        pending.extend(cls.__subclasses__())
    return found
