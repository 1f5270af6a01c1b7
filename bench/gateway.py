"""Benchmark of the gateway's data path: produce and fetch through the gateway against the same
requests sent straight to the partition leaders, in the same run, as a ratio.

One real local cluster on loopback, started as ``strom cluster up`` starts it
(``LocalClusterSpec``: etcd, 2 controllers, 3 storage nodes, the gateway, a coordinator), data
in a temporary directory, every process stopped at the end. One topic of 3 partitions,
replication factor 1 (one partition per node: the gateway's cost is measured, not
replication's), acks=1.

* produce: uncompressed v2 batches of 100-byte random values, 1 MiB (the target's size) and
  16 KiB, encoded and wrapped in serialized ProduceRequests before timing; the very same bytes
  go to ``StorageNode/Produce`` on the leader (direct) or ``Gateway/Produce`` on the gateway
  (the messages are the same). One partition per request, partitions round robin,
  ``CONCURRENCY`` requests in flight.
* fetch: each of ``CONCURRENCY`` readers reads one partition from offset 0 onwards (wrapping
  at the end), one partition per Fetch with partition_max_bytes = the batch size, direct from
  the leader or through the gateway.

A third path is the baseline of what any extra grpc.aio hop costs: a bare relay in its own
process (this file, ``--relay-server``), generic handlers, bytes in and bytes out with no
parsing, routing, limits, tracing, metrics or logging; the partition is in the method name
(``/relay.P<n>/Produce``), so it needs no look into the message. ``gateway / relay`` says how
much of a hop's possible throughput the gateway keeps; ``relay / direct`` what the hop itself
takes on this machine.

Each case starts with an unmeasured warm-up round through every path, then runs for a fixed
time per round, the three paths interleaved, best round of ``repeat`` kept (other tenants of
the machine make single rounds noisy). MB = 10^6 bytes of record batches. Also the CPU seconds
per MB of the gateway and of the relay. The last line is ``SUMMARY {json}``.

    .venv/bin/python bench/gateway.py            # full run, about 6 minutes
    .venv/bin/python bench/gateway.py --quick    # under a minute
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import grpc

# The sibling benchmarks' helpers (bench/ is sys.path[0] when this file runs).
from benchkit import (
    bench_arguments,
    free_base_port,
    free_port,
    print_summary,
    progress,
    serve_until_signalled,
)
from grpc import aio
from storage import GRPC_OPTIONS, KIB, MIB, cpu_seconds, make_batches

from strom import Admin, NewTopic
from strom.aio import Admin as AioAdmin
from strom.protocol.v1 import storage_pb2
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.supervisor import Supervisor
from strom_server.runtime.allocator import tune_allocator

TOPIC = "bench-gateway"
RELAY_SERVICE = "relay.P"
PARTITIONS = 3
CONCURRENCY = 4
BATCH_SIZES = {"1m": MIB, "16k": 16 * KIB}
TARGET_RATIO = 0.70  # of the direct throughput, for 1 MiB batches
PATHS = {
    "direct": ("/strom.protocol.v1.StorageNode/Produce", "/strom.protocol.v1.StorageNode/Fetch"),
    "gateway": ("/strom.protocol.v1.Gateway/Produce", "/strom.protocol.v1.Gateway/Fetch"),
}


@dataclass(frozen=True)
class Profile:
    seconds: float
    repeat: int


QUICK = Profile(seconds=2.0, repeat=2)
FULL = Profile(seconds=6.0, repeat=4)


class Target:
    """One path to the partitions: for each, grpc.aio raw callables (bytes in, bytes out) of
    its produce and fetch methods; the caller names the partition, so no path parses."""

    def __init__(self, routes: dict[int, tuple[str, str, str]]) -> None:
        """``routes``: partition -> (address, produce method, fetch method)."""
        self.channels: dict[str, grpc.aio.Channel] = {}
        self.calls: dict[tuple[int, str], Any] = {}
        for partition, (address, produce, fetch) in routes.items():
            channel = self.channels.get(address)
            if channel is None:
                channel = self.channels[address] = aio.insecure_channel(
                    address, options=GRPC_OPTIONS
                )
            for op, method in (("produce", produce), ("fetch", fetch)):
                self.calls[partition, op] = channel.unary_unary(
                    method, request_serializer=None, response_deserializer=None
                )

    async def produce(self, partition: int, raw: bytes, timeout: float) -> bytes:  # noqa: ASYNC109
        return await self.calls[partition, "produce"](raw, timeout=timeout)  # type: ignore[no-any-return]

    async def fetch(self, partition: int, raw: bytes, timeout: float) -> bytes:  # noqa: ASYNC109
        return await self.calls[partition, "fetch"](raw, timeout=timeout)  # type: ignore[no-any-return]

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()


def run_relay_server(port: int, leaders: dict[int, str]) -> None:
    """The bare-hop baseline: each ``/relay.P<n>/<method>`` forwards its bytes, untouched, to
    ``StorageNode/<method>`` on partition n's leader and answers the leader's bytes. The
    services' allocator settings, nothing else of theirs."""
    tune_allocator()

    async def serve() -> None:
        handlers: dict[str, grpc.RpcMethodHandler] = {}
        channels = []
        for partition, address in leaders.items():
            channel = aio.insecure_channel(address, options=GRPC_OPTIONS)
            channels.append(channel)
            for method in ("Produce", "Fetch"):
                call = channel.unary_unary(
                    f"/strom.protocol.v1.StorageNode/{method}",
                    request_serializer=None,
                    response_deserializer=None,
                )

                async def forward(request: bytes, context: Any, call: Any = call) -> bytes:
                    return await call(request, timeout=context.time_remaining())  # type: ignore[no-any-return]

                handlers[f"/{RELAY_SERVICE}{partition}/{method}"] = (
                    grpc.unary_unary_rpc_method_handler(forward)
                )

        class Relay(grpc.GenericRpcHandler):
            def service(self, details: Any) -> grpc.RpcMethodHandler | None:
                return handlers.get(details.method)

        server = aio.server(options=GRPC_OPTIONS)
        server.add_generic_rpc_handlers([Relay()])
        await serve_until_signalled(server, port)
        for channel in channels:
            await channel.close()

    asyncio.run(serve())


def start_relay(leaders: dict[int, str], workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The relay process on a free port, ready to serve."""
    port = free_port()
    route = ",".join(f"{p}={address}" for p, address in leaders.items())
    log = (workdir / "relay.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--relay-server", str(port), route],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process, f"127.0.0.1:{port}"
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the relay did not start; see {workdir / 'relay.log'}")
        time.sleep(0.05)


async def timed(seconds: float, workers: int, step: Callable[[int], Awaitable[int]]) -> float:
    """Bytes per second moved by ``workers`` loops of ``step(worker)`` for ``seconds``."""
    stop = time.perf_counter() + seconds
    moved = [0] * workers

    async def loop(worker: int) -> None:
        while time.perf_counter() < stop:
            moved[worker] += await step(worker)

    started = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in range(workers)))
    return sum(moved) / (time.perf_counter() - started)


def produce_requests(batches: list[bytes]) -> list[list[bytes]]:
    """Serialized ProduceRequests per partition, acks=1."""
    return [
        [
            storage_pb2.ProduceRequest(
                acks=1,
                timeout_ms=30000,
                partitions=[
                    storage_pb2.ProducePartitionData(topic=TOPIC, partition=p, records=batch)
                ],
            ).SerializeToString()
            for batch in batches
        ]
        for p in range(PARTITIONS)
    ]


async def produce_rate(target: Target, requests: list[list[bytes]], seconds: float) -> float:
    counter = itertools.count()
    sizes = [len(r) for r in requests[0]]

    async def step(_worker: int) -> int:
        i = next(counter)
        p, b = i % PARTITIONS, (i // PARTITIONS) % len(requests[0])
        raw = await target.produce(p, requests[p][b], timeout=60)
        response = storage_pb2.ProduceResponse.FromString(raw)
        if response.partitions[0].error_code:
            raise RuntimeError(f"produce failed: {response.partitions[0]}")
        return sizes[b]

    return await timed(seconds, CONCURRENCY, step)


async def fetch_rate(target: Target, batch_size: int, ends: list[int], seconds: float) -> float:
    offsets = [0] * CONCURRENCY

    async def step(worker: int) -> int:
        p = worker % PARTITIONS
        request = storage_pb2.FetchRequest(
            replica_id=-1,
            max_bytes=batch_size,
            partitions=[
                storage_pb2.FetchPartition(
                    topic=TOPIC,
                    partition=p,
                    fetch_offset=offsets[worker],
                    partition_max_bytes=batch_size,
                )
            ],
        ).SerializeToString()
        raw = await target.fetch(p, request, timeout=60)
        result = storage_pb2.FetchResponse.FromString(raw).partitions[0]
        if result.error_code:
            raise RuntimeError(f"fetch failed: {result}")
        data = result.records
        if not data:
            offsets[worker] = 0
            return 0
        # The next offset: after the last batch in the response (base offset + last delta + 1).
        position, last = 0, offsets[worker]
        while position + 61 <= len(data):
            base = int.from_bytes(data[position : position + 8], "big")
            length = int.from_bytes(data[position + 8 : position + 12], "big") + 12
            if position + length > len(data):
                break
            last = base + int.from_bytes(data[position + 23 : position + 27], "big") + 1
            position += length
        offsets[worker] = 0 if last >= ends[p] else last
        return len(data)

    return await timed(seconds, CONCURRENCY, step)


async def interleaved_rounds(
    targets: dict[str, Any],
    hop_pids: dict[str, int],
    profile: Profile,
    rate_of: Callable[[Any], Awaitable[float]],
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Each path's rate (bytes/s) in every round, paths in a rotating order (none always runs
    first or right after another), and the CPU ms per MB of each process in ``hop_pids``.

    An unmeasured warm-up round through every path comes first: besides connections, it
    spends the memory the guest has touched lately. On VMs where the first touch of any other
    page costs a fault on the host, the storage nodes write into the page cache several times
    faster until that pool is used up, and whichever path ran first would be measured there."""
    paths = list(targets)
    for path in paths:
        await rate_of(targets[path])
    rates: dict[str, list[float]] = {path: [] for path in paths}
    cpu_s = dict.fromkeys(hop_pids, 0.0)
    moved = dict.fromkeys(hop_pids, 0.0)
    for round_ in range(profile.repeat):
        shift = round_ % len(paths)
        for path in paths[shift:] + paths[:shift]:
            pid = hop_pids.get(path)
            before = cpu_seconds(pid) if pid else 0.0
            rate = await rate_of(targets[path])
            rates[path].append(rate)
            if pid:
                cpu_s[path] += cpu_seconds(pid) - before
                moved[path] += rate * profile.seconds
    cpu_ms_per_mb = {
        path: round(1000 * cpu_s[path] / max(moved[path] / 1e6, 1e-9), 2) for path in hop_pids
    }
    return rates, cpu_ms_per_mb


async def measure(  # noqa: PLR0917 - one call site
    spec: LocalClusterSpec,
    leaders: dict[int, int],
    profile: Profile,
    gateway_pid: int,
    relay_address: str,
    relay_pid: int,
) -> dict[str, Any]:
    gateway_paths, storage_paths = PATHS["gateway"], PATHS["direct"]
    targets = {
        "direct": Target(
            {p: (spec.storage_address(node), *storage_paths) for p, node in leaders.items()}
        ),
        "gateway": Target({p: (spec.gateway_address, *gateway_paths) for p in leaders}),
        "relay": Target(
            {
                p: (relay_address, f"/{RELAY_SERVICE}{p}/Produce", f"/{RELAY_SERVICE}{p}/Fetch")
                for p in leaders
            }
        ),
    }
    results: dict[str, Any] = {}
    for size_name, size in BATCH_SIZES.items():
        batches, per_batch = make_batches(size, 4)
        requests = produce_requests(batches)
        hop_pids = {"gateway": gateway_pid, "relay": relay_pid}
        produced = await interleaved_rounds(
            targets,
            hop_pids,
            profile,
            partial(produce_rate, requests=requests, seconds=profile.seconds),
        )
        async with AioAdmin(spec.gateway_address) as admin:
            ends = await end_offsets(admin)
        fetched = await interleaved_rounds(
            targets,
            hop_pids,
            profile,
            partial(fetch_rate, batch_size=size, ends=ends, seconds=profile.seconds),
        )
        case: dict[str, Any] = {"records_per_batch": per_batch}
        for op, (rounds, cpu_ms_per_mb) in (("produce", produced), ("fetch", fetched)):
            best = {path: max(rates) / 1e6 for path, rates in rounds.items()}
            case[op] = {
                "direct_mb_s": round(best["direct"], 1),
                "gateway_mb_s": round(best["gateway"], 1),
                "relay_mb_s": round(best["relay"], 1),
                "ratio": round(best["gateway"] / best["direct"], 3),
                "gateway_vs_relay": round(best["gateway"] / best["relay"], 3),
                "relay_vs_direct": round(best["relay"] / best["direct"], 3),
                "rounds_mb_s": {p: [round(r / 1e6, 1) for r in rs] for p, rs in rounds.items()},
                "gateway_cpu_ms_per_mb": cpu_ms_per_mb["gateway"],
                "relay_cpu_ms_per_mb": cpu_ms_per_mb["relay"],
            }
        results[size_name] = case
    for target in targets.values():
        await target.close()
    return results


async def end_offsets(admin: Any) -> list[int]:
    from strom.types import TopicPartition

    specs = {TopicPartition(TOPIC, p): "latest" for p in range(PARTITIONS)}
    found = await admin.list_offsets(specs)
    return [found[TopicPartition(TOPIC, p)].offset for p in range(PARTITIONS)]


def report(summary: dict[str, Any]) -> None:
    print()
    print(f"{'batches':<8} {'op':<8} {'direct':>7} {'gateway':>8} {'relay':>7} | "
          f"{'gw/direct':>9} {'gw/relay':>8} {'relay/direct':>12} | "
          "CPU ms/MB gateway relay")  # fmt: skip
    for size_name, case in summary["cases"].items():
        for op in ("produce", "fetch"):
            row = case[op]
            print(
                f"{size_name:<8} {op:<8} {row['direct_mb_s']:>7.1f} {row['gateway_mb_s']:>8.1f}"
                f" {row['relay_mb_s']:>7.1f} | {row['ratio']:>9.2f} {row['gateway_vs_relay']:>8.2f}"
                f" {row['relay_vs_direct']:>12.2f} | {row['gateway_cpu_ms_per_mb']:>17.2f}"
                f" {row['relay_cpu_ms_per_mb']:>5.2f}"
            )
    print("(MB/s, best round of each path; relay: a bare grpc.aio hop, bytes in, bytes out)")
    print("\ntargets")
    for name, met in summary["targets_met"].items():
        print(f"  {'met    ' if met else 'MISSED '} {name}: {summary['targets'][name]}")


def run(profile: Profile, quick: bool, keep: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="strom-bench-gateway-"))
    spec = LocalClusterSpec(
        data_dir=workdir,
        etcd_client_port=free_port(),
        etcd_peer_port=free_port(),
        base_port=free_base_port(1 + 3 + 2 + 1),
        storage_nodes=3,
        controllers=2,
    )
    summary: dict[str, Any] = {
        "quick": quick,
        "seconds_per_round": profile.seconds,
        "repeat": profile.repeat,
        "concurrency": CONCURRENCY,
        "partitions": PARTITIONS,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    processes = spec.processes()
    supervisor = Supervisor(processes, grace_s=30.0)
    try:
        progress(f"starting a cluster in {workdir} ...")
        supervisor.start_all(60.0)
        gateway_pid = next(p.pid for p in processes if p.name == "gateway")
        assert gateway_pid is not None
        with Admin(spec.gateway_address, request_timeout_ms=30000) as admin:
            deadline = time.monotonic() + 60
            while len(admin.describe_cluster().brokers) < 3:
                if time.monotonic() > deadline:
                    raise RuntimeError("the storage nodes did not register in time")
                time.sleep(0.2)
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
            while True:
                (described,) = admin.describe_topics([TOPIC])
                leaders = {p.partition: p.leader for p in described.partitions}
                if all(node >= 0 for node in leaders.values()):
                    break
                time.sleep(0.1)
        summary["leaders"] = leaders
        relay, relay_address = start_relay(
            {p: spec.storage_address(node) for p, node in leaders.items()}, workdir
        )
        try:
            summary["cases"] = asyncio.run(
                measure(spec, leaders, profile, gateway_pid, relay_address, relay.pid)
            )
        finally:
            relay.terminate()
            try:
                relay.wait(10)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait()
        progress("done")
    except BaseException:
        keep = True
        print(f"benchmark failed; data and logs kept in {workdir}", file=sys.stderr)
        raise
    finally:
        supervisor.stop_all()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    big = summary["cases"]["1m"]
    summary["targets"] = {
        f"1 MiB {op} through the gateway >= {TARGET_RATIO:.0%} of direct": (
            f"{big[op]['ratio']:.2f} ({big[op]['gateway_mb_s']} vs {big[op]['direct_mb_s']} MB/s)"
        )
        for op in ("produce", "fetch")
    }
    summary["targets_met"] = {
        f"1 MiB {op} through the gateway >= {TARGET_RATIO:.0%} of direct": big[op]["ratio"]
        >= TARGET_RATIO
        for op in ("produce", "fetch")
    }
    report(summary)
    return summary


def main() -> None:
    parser = bench_arguments(__doc__, "shorter rounds; under a minute")
    parser.add_argument(
        "--relay-server", nargs=2, metavar=("PORT", "ROUTES"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.relay_server:
        port, routes = args.relay_server
        pairs = (route.split("=", 1) for route in routes.split(","))
        run_relay_server(int(port), {int(p): address for p, address in pairs})
        return
    print_summary(lambda: run(QUICK if args.quick else FULL, args.quick, args.keep))


if __name__ == "__main__":
    main()
