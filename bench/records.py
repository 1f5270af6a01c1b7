"""Benchmark of the record-batch codec (strom.records) against simple baselines.

Workload: N records (1,000,000; ``--quick``: 100,000) with random (incompressible) 10-byte keys
and 100-byte values, no headers, consecutive millisecond timestamps, so the lz4 rows measure the
codec's cost rather than a compression win; batches cut at 16 KiB (Kafka's default
batch.size) and at 1 MiB, uncompressed and lz4. For each kernel (C when built, and pure
Python): encode through ``BatchBuilder.append`` (checking ``estimated_size()`` before each
record, as a producer does) and decode through ``decode_batches`` (every record materialised).
MB/s counts uncompressed batch bytes. Baselines on the same bytes, in the same run: CRC-32C,
a plain memory copy, and a naive pure-Python per-record struct/varint loop written here.

Every figure is the best of 3 repetitions (time.perf_counter). The last line is
``SUMMARY {json}``.

    .venv/bin/python bench/records.py            # full run
    .venv/bin/python bench/records.py --quick    # about 20 seconds
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import struct
import time
from collections.abc import Callable
from typing import Any

from strom.records import IMPLEMENTATION, BatchBuilder, decode_batches, decode_columns
from strom.records.crc import crc32c
from strom.records.kernel import Kernel, available

KEY_SIZE = 10
VALUE_SIZE = 100
BATCH_SIZES = {"16k": 16 * 1024, "1m": 1024 * 1024}
CODECS = ("none", "lz4")
BASE_TS = 1_700_000_000_000
Workload = tuple[list[int], list[bytes], list[bytes]]
_HEADER = struct.Struct(">qiibIhiqqqhii")


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Shortest wall time of ``repeat`` runs (GC collected before each) and the last result."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def make_workload(n: int) -> Workload:
    rng = random.Random(42)
    keys = [rng.randbytes(KEY_SIZE) for _ in range(n)]
    values = [rng.randbytes(VALUE_SIZE) for _ in range(n)]
    return [BASE_TS + i for i in range(n)], keys, values


def encode_all(kernel: Kernel, codec: str, batch_size: int, workload: Workload) -> list[bytes]:
    """Producer-style loop: one record at a time, a new batch when the next would not fit."""
    stamps, keys, values = workload
    batches = []
    builder = BatchBuilder(compression=codec, kernel=kernel)
    size, append = builder.estimated_size, builder.append
    limit = batch_size - (KEY_SIZE + VALUE_SIZE + 10)
    for ts, key, value in zip(stamps, keys, values, strict=True):
        if size() > limit:
            batches.append(builder.build())
            builder = BatchBuilder(compression=codec, kernel=kernel)
            size, append = builder.estimated_size, builder.append
        append(ts, key, value)
    batches.append(builder.build())
    return batches


def decode_all(kernel: Kernel, data: bytes) -> int:
    count = 0
    for batch in decode_batches(data, kernel=kernel):
        count += len(batch.records)
    return count


# ---------------------------------------------------------------- naive reference loop


def naive_varint(value: int) -> bytes:
    unsigned = (value << 1) ^ (value >> 63)
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def naive_read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def naive_encode(
    stamps: list[int], keys: list[bytes], values: list[bytes], per_batch: int
) -> list[bytes]:
    """Records sections only (no header, CRC or checks): the floor of a Python encoder."""
    sections = []
    for start in range(0, len(stamps), per_batch):
        parts = []
        base = stamps[start]
        for i in range(start, min(start + per_batch, len(stamps))):
            key, value = keys[i], values[i]
            body = b"".join(
                (
                    b"\x00",
                    naive_varint(stamps[i] - base),
                    naive_varint(i - start),
                    naive_varint(len(key)),
                    key,
                    naive_varint(len(value)),
                    value,
                    b"\x00",
                )
            )
            parts.append(naive_varint(len(body)) + body)
        sections.append(b"".join(parts))
    return sections


def naive_decode(data: bytes) -> int:
    """Header by struct, records by a plain varint loop, no validation."""
    pos, count, end = 0, 0, len(data)
    while pos < end:
        fields = _HEADER.unpack_from(data, pos)
        base_offset, length, first_ts, n = fields[0], fields[1], fields[7], fields[12]
        p = pos + 61
        for _ in range(n):
            _, p = naive_read_varint(data, p)
            p += 1
            ts_delta, p = naive_read_varint(data, p)
            offset_delta, p = naive_read_varint(data, p)
            klen, p = naive_read_varint(data, p)
            key = data[p : p + klen] if klen >= 0 else None
            p += max(klen, 0)
            vlen, p = naive_read_varint(data, p)
            value = data[p : p + vlen] if vlen >= 0 else None
            p += max(vlen, 0)
            _, p = naive_read_varint(data, p)
            (base_offset + offset_delta, first_ts + ts_delta, key, value, ())
            count += 1
        pos += length + 12
    return count


# ---------------------------------------------------------------- run


def run(n: int, repeat: int) -> dict[str, Any]:
    workload = make_workload(n)
    stamps, keys, values = workload
    summary: dict[str, Any] = {
        "records": n,
        "key_bytes": KEY_SIZE,
        "value_bytes": VALUE_SIZE,
        "active_implementation": IMPLEMENTATION,
        "python": platform.python_version(),
        "repeat": repeat,
    }
    rows = []
    reference: dict[str, bytes] = {}
    for kernel in reversed(available()):  # C (active) first
        for size_name, batch_size in BATCH_SIZES.items():
            for codec in CODECS:
                t_enc, batches = best_of(
                    repeat,
                    lambda k=kernel, c=codec, b=batch_size: encode_all(k, c, b, workload),
                )
                data = b"".join(batches)
                t_dec, count = best_of(repeat, lambda k=kernel, d=data: decode_all(k, d))
                assert count == n, (count, n)
                ref_key = f"{size_name}.{codec}"
                if ref_key in reference:
                    assert reference[ref_key] == data, "kernels produced different bytes"
                else:
                    reference[ref_key] = data
                # Batches are cut on uncompressed size, so lz4 ones hold the same bytes as "none".
                logical = len(reference[f"{size_name}.none"])
                prefix = f"{kernel.name}.{codec}.{size_name}"
                summary[f"{prefix}.batches"] = len(batches)
                summary[f"{prefix}.wire_bytes"] = len(data)
                summary[f"{prefix}.encode_rps"] = round(n / t_enc)
                summary[f"{prefix}.decode_rps"] = round(n / t_dec)
                summary[f"{prefix}.encode_mbps"] = round(logical / t_enc / 1e6, 1)
                summary[f"{prefix}.decode_mbps"] = round(logical / t_dec / 1e6, 1)
                rows.append(
                    (
                        kernel.name,
                        codec,
                        size_name,
                        n / t_enc,
                        n / t_dec,
                        logical / t_enc,
                        logical / t_dec,
                    )
                )
        if kernel.name == "c":
            data = reference["16k.none"]
            # decode_columns returns every batch at once, so compare it with a decode that
            # also keeps every record alive (allocation-bound), not with the streaming one.
            t_kept, _ = best_of(
                repeat, lambda k=kernel, d=data: [b.records for b in decode_batches(d, kernel=k)]
            )
            summary["c.none.16k.decode_all_kept_rps"] = round(n / t_kept)
            t_cols, _ = best_of(repeat, lambda k=kernel, d=data: decode_columns(d, kernel=k))
            summary["c.none.16k.decode_columns_rps"] = round(n / t_cols)
            t_many, _ = best_of(repeat, lambda k=kernel: _encode_many(k, stamps, keys, values))
            summary["c.none.16k.encode_append_many_rps"] = round(n / t_many)

    # Baselines on the 16 KiB uncompressed stream.
    data = reference["16k.none"]
    mb = len(data) / 1e6
    t_crc, _ = best_of(repeat, lambda: crc32c(data))
    # Into a preallocated buffer through a memoryview: a bare memcpy, without page faults.
    target = memoryview(bytearray(len(data)))
    t_copy, _ = best_of(repeat, lambda: target.__setitem__(slice(None), data))
    per_batch = summary[f"{rows[0][0]}.none.16k.batches"]
    per_batch = -(-n // per_batch)
    t_nenc, _ = best_of(repeat, lambda: naive_encode(stamps, keys, values, per_batch))
    t_ndec, count = best_of(repeat, lambda: naive_decode(data))
    assert count == n
    summary["baseline.crc32c_mbps"] = round(mb / t_crc, 1)
    summary["baseline.memcpy_mbps"] = round(mb / t_copy, 1)
    summary["baseline.naive_encode_rps"] = round(n / t_nenc)
    summary["baseline.naive_decode_rps"] = round(n / t_ndec)
    summary["baseline.stream_bytes"] = len(data)

    for name, codec, size_name, enc, dec, _enc_b, _dec_b in rows:
        prefix = f"{name}.{codec}.{size_name}"
        summary[f"ratio.{prefix}.encode_vs_naive"] = round(
            enc / summary["baseline.naive_encode_rps"], 2
        )
        summary[f"ratio.{prefix}.decode_vs_naive"] = round(
            dec / summary["baseline.naive_decode_rps"], 2
        )
        summary[f"ratio.{prefix}.encode_mbps_vs_memcpy"] = round(
            summary[f"{prefix}.encode_mbps"] / summary["baseline.memcpy_mbps"], 4
        )
        summary[f"ratio.{prefix}.decode_mbps_vs_memcpy"] = round(
            summary[f"{prefix}.decode_mbps"] / summary["baseline.memcpy_mbps"], 4
        )
    if "c.none.16k.encode_rps" in summary:
        summary["ratio.c_vs_python.none.16k.encode"] = round(
            summary["c.none.16k.encode_rps"] / summary["python.none.16k.encode_rps"], 1
        )
        summary["ratio.c_vs_python.none.16k.decode"] = round(
            summary["c.none.16k.decode_rps"] / summary["python.none.16k.decode_rps"], 1
        )
    summary["target.encode_1m_rps_met"] = (
        summary[f"{IMPLEMENTATION}.none.16k.encode_rps"] >= 1_000_000
    )
    summary["target.decode_1_5m_rps_met"] = (
        summary[f"{IMPLEMENTATION}.none.16k.decode_rps"] >= 1_500_000
    )
    print_table(summary, rows)
    return summary


def _encode_many(kernel: Kernel, stamps: list[int], keys: list[bytes], values: list[bytes]) -> int:
    per = (16 * 1024 - 61) // (KEY_SIZE + VALUE_SIZE + 13)
    total = 0
    for start in range(0, len(stamps), per):
        builder = BatchBuilder(kernel=kernel)
        builder.append_many(
            stamps[start : start + per], keys[start : start + per], values[start : start + per]
        )
        total += len(builder.build())
    return total


def print_table(summary: dict[str, Any], rows: list[tuple[Any, ...]]) -> None:
    naive_enc = summary["baseline.naive_encode_rps"]
    naive_dec = summary["baseline.naive_decode_rps"]
    memcpy = summary["baseline.memcpy_mbps"]
    print(
        f"\nstrom.records: {summary['records']:,} records, {KEY_SIZE}-byte keys, "
        f"{VALUE_SIZE}-byte values, no headers; active implementation: "
        f"{summary['active_implementation']}; Python {summary['python']}; best of "
        f"{summary['repeat']}; MB/s = uncompressed batch bytes\n"
    )
    head = (
        f"{'impl':6} {'codec':5} {'batch':5} {'encode rec/s':>13} {'MB/s':>8} "
        f"{'decode rec/s':>13} {'MB/s':>8} {'enc/naive':>9} {'dec/naive':>9} "
        f"{'enc/memcpy':>10} {'dec/memcpy':>10}"
    )
    print(head)
    print("-" * len(head))
    for name, codec, size_name, enc, dec, enc_b, dec_b in rows:
        print(
            f"{name:6} {codec:5} {size_name:5} {enc:13,.0f} {enc_b / 1e6:8.1f} {dec:13,.0f} "
            f"{dec_b / 1e6:8.1f} {enc / naive_enc:9.2f} {dec / naive_dec:9.2f} "
            f"{enc_b / 1e6 / memcpy:10.4f} {dec_b / 1e6 / memcpy:10.4f}"
        )
    print("\nbaselines (same run, the 16 KiB uncompressed stream):")
    extras = [
        ("CRC-32C", summary["baseline.crc32c_mbps"], "MB/s"),
        ("memory copy (memoryview)", memcpy, "MB/s"),
        ("naive Python encode loop", naive_enc, "rec/s"),
        ("naive Python decode loop", naive_dec, "rec/s"),
    ]
    if "c.none.16k.decode_columns_rps" in summary:
        kept = summary["c.none.16k.decode_all_kept_rps"]
        extras.append(("C decode, all records kept", kept, "rec/s"))
        extras.append(
            ("C decode_columns (all kept)", summary["c.none.16k.decode_columns_rps"], "rec/s")
        )
        extras.append(
            ("C append_many (16k)", summary["c.none.16k.encode_append_many_rps"], "rec/s")
        )
    for label, figure, unit in extras:
        print(
            f"  {label:28}{figure:14,.1f} {unit}"
            if unit == "MB/s"
            else f"  {label:28}{figure:14,.0f} {unit}"
        )
    enc_met = "met" if summary["target.encode_1m_rps_met"] else "NOT met"
    dec_met = "met" if summary["target.decode_1_5m_rps_met"] else "NOT met"
    print(
        f"\ntargets, {summary['active_implementation']}, 16 KiB, uncompressed, one core: "
        f"encode >= 1,000,000 rec/s {enc_met}; decode >= 1,500,000 rec/s {dec_met}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 records instead of 1,000,000")
    parser.add_argument("--records", type=int, help="number of records (overrides --quick)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions; the best counts")
    args = parser.parse_args()
    n = args.records or (100_000 if args.quick else 1_000_000)
    summary = run(n, args.repeat)
    print("SUMMARY " + json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
