"""Benchmark of the schema registry and strom.serde: Avro serialize/deserialize throughput
against fastavro alone, and the registry's lookup latency, cached and uncached.

One real local cluster on loopback (etcd, 2 controllers, 3 storage nodes, the gateway, a
coordinator) and one schema registry instance (``strom_registry``), data in a temporary
directory; every process is stopped at the end, also on failure.

* serde throughput, in this process: 10,000 records (``--quick``: 5,000) of a 6-field record
  (long, two strings, int, double, boolean). The baseline is fastavro alone doing the same
  work per record: ``schemaless_writer`` into a fresh ``BytesIO`` and its bytes, and
  ``schemaless_reader`` over a ``BytesIO`` of them. strom.serde's ``AvroSerializer`` adds the
  5-byte header of the registered schema id (registered on the first record);
  ``AvroDeserializer`` checks the magic byte and looks the writer's schema up by id. Goal:
  >= 0.8 of fastavro both ways. 40 rounds (``--quick``: 16); in each, fastavro and strom.serde
  run back to back (alternating which goes first): the ratio is the median of the rounds'
  ratios, the rates the best round of each. Short paired rounds keep a busy machine's noise
  out of the ratio.
* lookup latency, p50 and p99 over 2,000 requests (``--quick``: 500) through one kept-alive
  connection: the schema by id (``GET /schemas/ids/{id}``), a subject lookup by schema
  (``POST /subjects/{subject}``, which parses and canonicalizes the schema), a registration of
  an already registered schema (``POST /subjects/{subject}/versions``: the writer's path, with
  its catch-up check of the topic) and, as the floor of the HTTP stack, the registry's
  ``GET /`` (same server, same connection, no work). Cached: ``SchemaRegistryClient.schema(id)``
  once cached (what a deserializer pays after its first record).

The last line is ``SUMMARY {json}``.

    .venv/bin/python bench/schema_registry.py            # a few minutes
    .venv/bin/python bench/schema_registry.py --quick    # under a minute
"""

from __future__ import annotations

import gc
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

import fastavro
from benchkit import bench_arguments, free_base_port, free_port, print_summary, progress

from strom.serde import AvroDeserializer, AvroSerializer, SchemaRegistryClient
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.supervisor import Supervisor

SCHEMA = {
    "type": "record",
    "name": "User",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "active", "type": "boolean"},
    ],
}


def records(count: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "name": f"user-{i}", "email": f"user{i}@example.com", "age": 20 + i % 60,
         "score": i * 0.5, "active": i % 2 == 0}
        for i in range(count)
    ]  # fmt: skip


def paired_rates(
    pairs: dict[str, tuple[Callable[[], int], Callable[[], int]]], rounds: int
) -> dict[str, float]:
    """For each ``name: (baseline, strom)``: the best records/s of each over ``rounds`` rounds
    and the median of the per-round ratios. In a round the two run back to back (alternating
    which goes first), so that a busy moment of the machine hits both alike."""
    best: dict[str, float] = {}
    ratios: dict[str, list[float]] = {name: [] for name in pairs}
    for i in range(rounds):
        for name, works in pairs.items():
            rates = []
            for work in works if i % 2 == 0 else works[::-1]:
                gc.collect()
                started = time.perf_counter()
                count = work()
                rates.append(count / (time.perf_counter() - started))
            base, ours = rates if i % 2 == 0 else rates[::-1]
            best[f"fastavro_{name}_per_s"] = max(best.get(f"fastavro_{name}_per_s", 0.0), base)
            best[f"strom_{name}_per_s"] = max(best.get(f"strom_{name}_per_s", 0.0), ours)
            ratios[name].append(ours / base)
    for name, found in ratios.items():
        best[f"{name}_ratio"] = statistics.median(found)
    return best


def serde_figures(registry: SchemaRegistryClient, count: int, repeat: int) -> dict[str, Any]:
    values = records(count)
    parsed = fastavro.parse_schema(SCHEMA)
    writer, reader = fastavro.schemaless_writer, fastavro.schemaless_reader

    def fastavro_encode() -> list[bytes]:
        out = []
        for value in values:
            buffer = BytesIO()
            writer(buffer, parsed, value)
            out.append(buffer.getvalue())
        return out

    serializer = AvroSerializer(registry, SCHEMA, topic="bench-users")
    deserializer = AvroDeserializer(registry)
    encoded = fastavro_encode()
    framed = [serializer(v) for v in values]  # registers the schema, warms the caches
    assert deserializer(framed[0]) == values[0]

    def fastavro_decode() -> int:
        for payload in encoded:
            reader(BytesIO(payload), parsed, None)
        return count

    def strom_decode() -> int:
        for payload in framed:
            deserializer(payload)
        return count

    def strom_encode() -> int:
        for value in values:
            serializer(value)
        return count

    rates: dict[str, Any] = paired_rates(
        {
            "serialize": (lambda: len(fastavro_encode()), strom_encode),
            "deserialize": (fastavro_decode, strom_decode),
        },
        repeat,
    )
    rates["record_bytes"] = len(framed[0])
    return rates


def latency_us(call: Callable[[], object], count: int) -> dict[str, float]:
    for _ in range(min(50, count)):
        call()
    samples = []
    for _ in range(count):
        started = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - started) / 1000)
    samples.sort()
    return {
        "p50_us": statistics.median(samples),
        "p99_us": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
    }


def lookup_figures(registry: SchemaRegistryClient, count: int) -> dict[str, Any]:
    subject = "bench-users-value"
    text = json.dumps(SCHEMA)
    schema_id = registry.register(subject, text)
    body = {"schema": text}
    figures = {
        "http_floor": latency_us(lambda: registry.request("GET", "/"), count),
        "by_id_uncached": latency_us(
            lambda: registry.request("GET", f"/schemas/ids/{schema_id}"), count
        ),
        "subject_lookup_uncached": latency_us(
            lambda: registry.request("POST", f"/subjects/{subject}", body), count
        ),
        "register_existing": latency_us(
            lambda: registry.request("POST", f"/subjects/{subject}/versions", body), count // 4
        ),
        "by_id_cached": latency_us(lambda: registry.schema(schema_id), count),
    }
    floor = figures["http_floor"]["p50_us"]
    for name in ("by_id_uncached", "subject_lookup_uncached", "register_existing"):
        figures[name]["p50_vs_http_floor"] = figures[name]["p50_us"] / floor
    return figures


def run(quick: bool, keep: bool) -> dict[str, Any]:
    count, repeat, lookups = (5_000, 16, 500) if quick else (10_000, 40, 2_000)
    workdir = Path(tempfile.mkdtemp(prefix="strom-bench-registry-"))
    spec = LocalClusterSpec(
        data_dir=workdir, etcd_client_port=free_port(), etcd_peer_port=free_port(),
        base_port=free_base_port(7), kafka_port=free_port(), registry_port=free_port(),
    )  # fmt: skip
    summary: dict[str, Any] = {
        "quick": quick, "records": count, "repeat": repeat, "lookups": lookups,
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "fastavro": fastavro.__version__,
    }  # fmt: skip
    supervisor = Supervisor(spec.processes(), grace_s=30.0)
    try:
        progress(f"starting a cluster and a schema registry in {workdir} ...")
        supervisor.start_all(120.0)
        with SchemaRegistryClient(spec.registry_url) as registry:
            progress(f"serde throughput, {count:,} records, {repeat} paired rounds ...")
            summary["serde"] = serde_figures(registry, count, repeat)
            progress(f"registry lookup latency, {lookups:,} requests each ...")
            summary["lookup"] = lookup_figures(registry, lookups)
    finally:
        supervisor.stop_all()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report(summary)
    return summary


def report(summary: dict[str, Any]) -> None:
    serde = summary["serde"]
    print(f"\nAvro, {serde['record_bytes']} bytes a framed record (records/s):")
    for way in ("serialize", "deserialize"):
        ours, base = serde[f"strom_{way}_per_s"], serde[f"fastavro_{way}_per_s"]
        ok = "ok" if serde[f"{way}_ratio"] >= 0.8 else "BELOW GOAL"
        print(f"  {way:<12} strom.serde {ours:>11,.0f}  fastavro {base:>11,.0f}  "
              f"ratio {serde[f'{way}_ratio']:.2f} (goal >= 0.8: {ok})")  # fmt: skip
    print("\nRegistry latency (µs):")
    for name, figures in summary["lookup"].items():
        extra = figures.get("p50_vs_http_floor")
        ratio = f"  {extra:.2f}x the HTTP floor" if extra else ""
        print(f"  {name:<24} p50 {figures['p50_us']:>9.1f}  p99 {figures['p99_us']:>9.1f}{ratio}")


def main() -> None:
    parser = bench_arguments(__doc__ or "", "5,000 records x 16 rounds, 500 lookups")
    args = parser.parse_args()
    print_summary(lambda: run(args.quick, args.keep))


if __name__ == "__main__":
    main()
