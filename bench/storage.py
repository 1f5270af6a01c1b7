"""Benchmark of one storage node (strom-storage) against ceilings measured in the same run.

Everything runs on loopback, data in a temporary directory, every process stopped at the end.

Ceilings (same run, same message sizes, same client): a raw grpc.aio bytes echo server in a
separate process (this file, ``--echo-server PORT``: identity serializers, no interceptors,
the services' allocator settings from strom_server.runtime.allocator; ``Upload`` takes N bytes and
answers 8, ``Download`` takes 8 and answers N); the same server's ``Persist``, an ``Upload``
that also ``os.write``s each message to a file (appended, no fsync) before answering: the
least any server that keeps what it receives must do, so the node's produce against it is what
the node's own work costs; and raw sequential ``os.write`` calls of the same chunks to a file
in the same temporary directory (no fsync). Both file ceilings are measured in every
repetition with the same volume as the produce, into files kept until the case ends: they
take fresh page-cache pages just as the node's log does. On some VMs the first touch of a page
the guest has not used lately costs microseconds, so after a few hundred MB written every
writer slows down, and whichever writes first takes the pages freed most recently: the three
writers (persisting upload, file, node) take turns going first, repetition by repetition. Per
batch size there is also the page cache's best case: the file deleted at once, with and
without a final fsync. Before each throughput case, between its produce and fetch phases and
before the latency case, ``os.sync()`` writes back what was left dirty (reported), so that no
measurement pays for the writeback of another's data.

Workloads, with 100-byte random values (no key) in uncompressed v2 batches of at most
16 KiB or 1 MiB, encoded before timing (4 distinct batches per size, sent again and again: the
node assigns offsets itself):

* produce throughput, 1 and 16 partitions: 8 unary ``Produce`` calls in flight (acks=1), one
  batch per request, requests spread round robin over the partitions. Requests are
  serialized before timing and sent as bytes, so the client costs the same as the ``Upload``
  client, which sends exactly the same bytes.
* fetch throughput: everything produced is read back once, in as many rounds as there were
  produce runs (each round an equal slice of every partition), by 8 concurrent fetchers, each
  request one partition with ``max_bytes = partition_max_bytes = 1 MiB`` for both batch sizes
  (disjoint offset ranges of the partition for 1 partition; partitions dealt out to the
  fetchers for 16). Responses are parsed (FetchResponse) and walked batch by batch. After
  each round the ``Download`` ceiling answers as many messages of the round's mean fetch
  response size.
* produce latency: a paced 1,000 requests/s of one 16 KiB batch (acks=1, unary, each sent at
  t0 + i/1000 regardless of earlier ones), send-to-response latency over 5 s (``--quick``:
  2 s); the same pacing against ``Upload`` is the ceiling. 3 runs of each (``--quick``: 2),
  interleaved; the run with the lowest p99 counts (all p99s are in the SUMMARY). Also the
  closed-loop latency with one request in flight.
* start-up: a node filled through Produce (1 MiB batches, 4 partitions) with 10 GiB in 100 MiB
  segments (``--quick``: 1 GiB in 10 MiB segments), stopped with SIGTERM, restarted a few
  times; time from spawning the process to the health check answering SERVING and to the
  first Fetch from offset 0; a node holding 16 MiB, restarted the same way, is the baseline.
  The fill's produce throughput and a read-through of all the data are reported too.
* RSS: VmRSS (RssAnon + RssFile) of the big node after start-up and one fetch, then after
  reading all its data, against a fresh node holding 16 MiB that was read back.
* CPU: user + system CPU time of the server process (/proc/PID/stat) and of this client per
  request or response, node against echo server: a cost ratio that noise from other tenants
  of the machine hardly moves, unlike the throughput ratios.

Throughput figures are the best of 5 repetitions (``--quick``: 3), echo and node runs
interleaved; start-up times are the median of 3 restarts (``--quick``: 2). MB = 10^6 bytes.
Nothing is fsynced while a case is timed: writes land in the page cache (the kernel writes them
back when it likes), and reads are served from it while it holds the data. The last line is
``SUMMARY {json}``.

    .venv/bin/python bench/storage.py            # full run, several minutes
    .venv/bin/python bench/storage.py --quick    # under a minute
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchkit import bench_arguments, free_port, print_summary, progress, serve_until_signalled

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
VALUE_SIZE = 100
BATCH_SIZES = {"16k": 16 * KIB, "1m": MIB}
CONCURRENCY = 8
FETCH_MAX_BYTES = MIB
DISTINCT_BATCHES = 4
MAX_MESSAGE = 64 * MIB
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE),
    ("grpc.max_receive_message_length", MAX_MESSAGE),
]
ECHO_SERVICE = "strombench.Echo"
PRODUCE_METHOD = "/strom.protocol.v1.StorageNode/Produce"
FETCH_METHOD = "/strom.protocol.v1.StorageNode/Fetch"
LATENCY_RATE = 1000.0
FILL_PARTITIONS = 4

TARGETS = {
    "produce_1m_vs_grpc": 0.60,
    "fetch_1m_vs_grpc": 0.70,
    "p99_produce_ms": 5.0,
    "startup_ready_s": 2.0,
    # "independent of data size": the big node, after reading everything, within 1.5x the RSS
    # of a node holding 16 MiB (the data differ by a factor of ~60 to ~600).
    "rss_big_vs_small": 1.5,
}


@dataclass(frozen=True)
class Profile:
    repeat: int
    volume: dict[str, int]  # bytes produced per repetition, by batch size
    latency_s: float
    latency_runs: int
    fill_bytes: int
    segment_bytes: int
    restarts: int


FULL = Profile(
    repeat=5,
    volume={"16k": 64 * MIB, "1m": 256 * MIB},
    latency_s=5.0,
    latency_runs=3,
    fill_bytes=10 * GIB,
    segment_bytes=100 * MIB,
    restarts=3,
)
QUICK = Profile(
    repeat=3,
    volume={"16k": 12 * MIB, "1m": 64 * MIB},
    latency_s=2.0,
    latency_runs=2,
    fill_bytes=1 * GIB,
    segment_bytes=10 * MIB,
    restarts=2,
)


# --------------------------------------------------------------------------- echo server


def run_echo_server(port: int, persist_path: Path) -> None:
    """The raw gRPC ceiling: grpc.aio, generic handlers, bytes in and out, no interceptors;
    the services' allocator settings, so that the ceiling is what a tuned process reaches.

    ``Persist`` is ``Upload`` plus one ``os.write`` of the message to ``persist_path`` (opened
    on first use, appended to, no fsync) before answering: the least a server that keeps what
    it receives must do. ``Drop`` closes and deletes that file."""
    import grpc

    from strom_server.runtime.allocator import tune_allocator

    tune_allocator()
    persisted: list[int] = []  # the open file descriptor, if any

    async def serve() -> None:
        payloads: dict[int, bytes] = {}

        async def upload(request: bytes, context: Any) -> bytes:
            return len(request).to_bytes(8, "big")

        async def persist(request: bytes, context: Any) -> bytes:
            if not persisted:
                persisted.append(os.open(persist_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
            os.write(persisted[0], request)
            return len(request).to_bytes(8, "big")

        async def drop(request: bytes, context: Any) -> bytes:
            if persisted:
                os.close(persisted.pop())
                os.unlink(persist_path)
            return request

        async def download(request: bytes, context: Any) -> bytes:
            size = int.from_bytes(request, "big")
            data = payloads.get(size)
            if data is None:
                data = payloads[size] = os.urandom(size)
            return data

        server = grpc.aio.server(options=GRPC_OPTIONS)
        server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    ECHO_SERVICE,
                    {
                        "Upload": grpc.unary_unary_rpc_method_handler(upload),
                        "Persist": grpc.unary_unary_rpc_method_handler(persist),
                        "Drop": grpc.unary_unary_rpc_method_handler(drop),
                        "Download": grpc.unary_unary_rpc_method_handler(download),
                    },
                )
            ]
        )
        await serve_until_signalled(server, port)

    asyncio.run(serve())


# --------------------------------------------------------------------------- processes


_T0 = time.perf_counter()


def tcp_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Processes:
    """Every process the benchmark starts, so that ``stop_all`` (in a finally) ends them."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[Any] = []
        self._count = 0

    def start(self, name: str, argv: list[str], ready: Callable[[], bool]) -> Any:
        from strom_server.local.supervisor import ManagedProcess

        self._count += 1
        process = ManagedProcess(
            name=name,
            argv=argv,
            log_path=self.workdir / f"{self._count:02d}-{name}.log",
            ready=ready,
        )
        self.started.append(process)
        process.start()
        return process

    def stop(self, process: Any, grace_s: float = 30.0) -> int | None:
        code = process.stop(grace_s)
        if process in self.started:
            self.started.remove(process)
        return code

    def stop_all(self) -> None:
        for process in reversed(self.started):
            with contextlib.suppress(Exception):
                process.stop(10.0)
        self.started.clear()


def node_argv(
    port: int, data_dir: Path, topics: str, segment_bytes: int | None = None
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "strom_storage",
        "--listen",
        f"127.0.0.1:{port}",
        "--etcd-endpoints",
        "",  # standalone: no cluster membership, partitions from --topics
        "--log-dirs",
        str(data_dir),
        "--topics",
        topics,
        "--max-message-size",
        "64MiB",
        "--log-format",
        "console",
        "--log.retention.ms",
        "-1",
    ]
    if segment_bytes:
        argv += ["--log.segment.bytes", str(segment_bytes)]
    return argv


def start_node(procs: Processes, name: str, port: int, argv: list[str]) -> Any:
    from strom_server.rpc.health_probe import grpc_serving

    address = f"127.0.0.1:{port}"
    process = procs.start(name, argv, lambda: grpc_serving(address, timeout_s=0.5))
    process.wait_ready(60)
    return process


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / _TICK, sum(values[:8]) / _TICK


class CpuMeter:
    """CPU seconds of a server process and of this (client) process, summed over calls."""

    def __init__(self) -> None:
        self.totals: dict[str, dict[str, float]] = {}

    async def measure(self, key: str, server_pid: int, units: int, work: Awaitable[Any]) -> Any:
        server0, client0 = cpu_seconds(server_pid), time.process_time()
        result = await work
        total = self.totals.setdefault(key, {"server_s": 0.0, "client_s": 0.0, "units": 0})
        total["server_s"] += cpu_seconds(server_pid) - server0
        total["client_s"] += time.process_time() - client0
        total["units"] += units
        return result

    def per_unit_us(self, key: str) -> dict[str, float]:
        total = self.totals[key]
        return {
            "server_cpu_us": total["server_s"] / total["units"] * 1e6,
            "client_cpu_us": total["client_s"] / total["units"] * 1e6,
        }


def rss_of(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile and VmHWM of a process, in MiB."""
    figures = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                figures[key] = int(rest.split()[0]) / 1024
    return figures


# --------------------------------------------------------------------------- workload


def make_batches(limit: int, count: int) -> tuple[list[bytes], int]:
    """``count`` distinct batches of 100-byte random values, each as full as fits in ``limit``."""
    from strom.records import encode_batch

    now = int(time.time() * 1000)

    def batch(n: int) -> bytes:
        return encode_batch([(now + i, None, os.urandom(VALUE_SIZE), None) for i in range(n)])

    per_record = (len(batch(101)) - len(batch(1))) / 100
    n = int((limit - len(batch(0 + 1)) + per_record) // per_record) + 1
    while len(batch(n)) > limit:
        n -= 1
    return [batch(n) for _ in range(count)], n


def quantile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


async def run_concurrent(
    n_requests: int, concurrency: int, call: Callable[[int], Awaitable[Any]]
) -> float:
    """Seconds to complete ``n_requests`` calls with ``concurrency`` of them always in flight."""
    indexes = iter(range(n_requests))

    async def worker() -> None:
        for i in indexes:  # shared: each index goes to exactly one worker
            await call(i)

    gc.collect()
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def paced(
    call: Callable[[], Awaitable[Any]], rate: float, duration_s: float
) -> dict[str, float]:
    """Send at t0 + i/rate whatever the earlier calls do; latency figures in ms."""
    n = int(rate * duration_s)
    from_send: list[float] = []
    from_schedule: list[float] = []
    sends: list[float] = []

    async def one(scheduled: float) -> None:
        sent = time.perf_counter()
        sends.append(sent)
        await call()
        done = time.perf_counter()
        from_send.append(done - sent)
        from_schedule.append(done - scheduled)

    tasks = []
    gc.collect()
    t0 = time.perf_counter() + 0.01
    for i in range(n):
        scheduled = t0 + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(scheduled)))
    await asyncio.gather(*tasks)
    from_send.sort()
    from_schedule.sort()
    return {
        "p50_ms": quantile(from_send, 0.50) * 1e3,
        "p99_ms": quantile(from_send, 0.99) * 1e3,
        "p999_ms": quantile(from_send, 0.999) * 1e3,
        "max_ms": from_send[-1] * 1e3,
        "p99_from_schedule_ms": quantile(from_schedule, 0.99) * 1e3,
        "achieved_rate": (n - 1) / (sends[-1] - sends[0]),
        "count": n,
    }


# --------------------------------------------------------------------------- clients


class NodeClient:
    def __init__(self, port: int) -> None:
        import grpc

        from strom.protocol.v1 import storage_pb2

        self.pb = storage_pb2
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
        self._produce = self.channel.unary_unary(
            PRODUCE_METHOD, response_deserializer=storage_pb2.ProduceResponse.FromString
        )
        self._fetch = self.channel.unary_unary(
            FETCH_METHOD,
            request_serializer=storage_pb2.FetchRequest.SerializeToString,
            response_deserializer=storage_pb2.FetchResponse.FromString,
        )

    def produce_request(self, topic: str, partition: int, records: bytes) -> bytes:
        request = self.pb.ProduceRequest(
            acks=1,
            timeout_ms=30_000,
            partitions=[
                self.pb.ProducePartitionData(topic=topic, partition=partition, records=records)
            ],
        )
        return request.SerializeToString()

    async def produce(self, serialized: bytes) -> int:
        """Send a pre-serialized ProduceRequest; the base offset of its (single) partition."""
        response = await self._produce(serialized)
        result = response.partitions[0]
        if result.error_code != 0:
            raise RuntimeError(f"produce failed: {result.error_code} {result.error_message}")
        return int(result.base_offset)

    async def fetch(self, topic: str, partition: int, offset: int) -> tuple[bytes, int]:
        """Whole batches from ``offset`` (at most ~1 MiB) and the high watermark."""
        pb = self.pb
        response = await self._fetch(
            pb.FetchRequest(
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=FETCH_MAX_BYTES,
                partitions=[
                    pb.FetchPartition(
                        topic=topic,
                        partition=partition,
                        fetch_offset=offset,
                        current_leader_epoch=-1,
                        partition_max_bytes=FETCH_MAX_BYTES,
                    )
                ],
            )
        )
        result = response.partitions[0]
        if result.error_code != 0:
            raise RuntimeError(f"fetch failed: {result.error_code} {result.error_message}")
        return result.records, int(result.high_watermark)

    async def read_range(
        self, topic: str, partition: int, start: int, end: int
    ) -> tuple[int, int, int]:
        """Read offsets [start, end): (bytes of batches in range, records, responses)."""
        from strom.records import walk_batches

        offset, size, records, responses = start, 0, 0, 0
        while offset < end:
            data, _ = await self.fetch(topic, partition, offset)
            responses += 1
            if not data:
                raise RuntimeError(f"empty fetch at {topic}-{partition}@{offset} (end {end})")
            for _, header in walk_batches(data, check_crc=False):
                if header.base_offset >= end:
                    break
                size += header.size
                records += header.record_count
                offset = header.next_offset
        return size, records, responses

    async def close(self) -> None:
        await self.channel.close()


class EchoClient:
    def __init__(self, port: int) -> None:
        import grpc

        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
        self.upload = self.channel.unary_unary(f"/{ECHO_SERVICE}/Upload")
        self.persist = self.channel.unary_unary(f"/{ECHO_SERVICE}/Persist")
        self._drop = self.channel.unary_unary(f"/{ECHO_SERVICE}/Drop")
        self._download = self.channel.unary_unary(f"/{ECHO_SERVICE}/Download")

    async def download(self, size: int) -> int:
        return len(await self._download(size.to_bytes(8, "big")))

    async def drop_persisted(self) -> None:
        """Delete the file ``persist`` calls wrote to."""
        await self._drop(b"")

    async def close(self) -> None:
        await self.channel.close()


# --------------------------------------------------------------------------- measurements


def protobuf_costs(repeat: int) -> dict[str, float]:
    """Microseconds per 1 MiB message of the protobuf steps around the bytes (this process).

    Not a ceiling: context for reading the ratios. The node parses each ProduceRequest and takes
    ``records`` out of it, and builds and serializes each FetchResponse; the fetch client parses
    each FetchResponse and walks its batch headers.
    """
    from strom.protocol.v1 import storage_pb2
    from strom.records import walk_batches

    batch = make_batches(MIB, 1)[0][0]
    produce = storage_pb2.ProduceRequest(
        acks=1,
        partitions=[storage_pb2.ProducePartitionData(topic="t", partition=0, records=batch)],
    ).SerializeToString()
    fetch = storage_pb2.FetchResponse(
        partitions=[storage_pb2.FetchPartitionResult(topic="t", partition=0, records=batch)]
    ).SerializeToString()

    def parse_produce() -> None:
        request = storage_pb2.ProduceRequest.FromString(produce)
        _ = [p.records for p in request.partitions]

    def build_fetch() -> None:
        storage_pb2.FetchResponse(
            partitions=[storage_pb2.FetchPartitionResult(topic="t", partition=0, records=batch)]
        ).SerializeToString()

    def parse_fetch() -> None:
        walk_batches(storage_pb2.FetchResponse.FromString(fetch).partitions[0].records)

    def copy_bytes() -> None:
        bytes(bytearray(batch))

    results = {}
    n = 50
    for name, fn in (
        ("copy_1mib_us", copy_bytes),
        ("node_parse_produce_1mib_us", parse_produce),
        ("node_build_fetch_response_1mib_us", build_fetch),
        ("client_parse_fetch_response_1mib_us", parse_fetch),
    ):
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            best = min(best, (time.perf_counter() - start) / n)
        results[name] = best * 1e6
    return results


def file_write_ceiling(path: Path, chunk: bytes, total: int, repeat: int) -> dict[str, float]:
    """Sequential os.write of ``chunk`` until ``total`` bytes, the file deleted at once (the
    page cache's best case): best MB/s without and with fsync."""
    n = max(1, total // len(chunk))
    written = n * len(chunk)
    best, best_sync = 0.0, 0.0
    for _ in range(repeat):
        for sync in (False, True):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                start = time.perf_counter()
                for _ in range(n):
                    os.write(fd, chunk)
                if sync:
                    os.fsync(fd)
                elapsed = time.perf_counter() - start
            finally:
                os.close(fd)
                os.unlink(path)
            if sync:
                best_sync = max(best_sync, written / elapsed / 1e6)
            else:
                best = max(best, written / elapsed / 1e6)
    return {"mbps": best, "mbps_fsync": best_sync}


def write_back_dirty_pages() -> dict[str, float]:
    """``os.sync()``: write back what earlier cases left dirty in the page cache, so that a case
    does not pay for the writeback of another's data. Returns the dirty MB and the seconds."""
    dirty_kb = 0
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("Dirty:"):
                dirty_kb = int(line.split()[1])
    start = time.perf_counter()
    os.sync()
    return {"dirty_mb": dirty_kb / 1024, "seconds": time.perf_counter() - start}


def write_file(path: Path, chunks: list[bytes], count: int) -> float:
    """Seconds to os.write ``count`` chunks (round robin) into a new file, which is kept: like
    the node's log, it takes fresh page-cache pages, so both meet the same memory."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        start = time.perf_counter()
        for i in range(count):
            os.write(fd, chunks[i % len(chunks)])
        return time.perf_counter() - start
    finally:
        os.close(fd)


async def throughput_cases(
    node: NodeClient,
    echo: EchoClient,
    profile: Profile,
    workdir: Path,
    *,
    node_pid: int,
    echo_pid: int,
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for size_name, limit in BATCH_SIZES.items():
        batches, per_batch = make_batches(limit, DISTINCT_BATCHES)
        batch_bytes = len(batches[0])
        n_requests = profile.volume[size_name] // batch_bytes
        file_ceiling = file_write_ceiling(
            workdir / "raw-write.bin", batches[0], n_requests * batch_bytes, profile.repeat
        )
        results[f"file_write.{size_name}"] = file_ceiling
        for partitions in (1, 16):
            synced = write_back_dirty_pages()
            topic = f"t{size_name}x{partitions}"
            requests = [
                [node.produce_request(topic, p, b) for b in batches] for p in range(partitions)
            ]
            upload_payloads = [r for per_partition in requests for r in per_partition]

            async def produce_call(
                i: int, requests: list[list[bytes]] = requests, partitions: int = partitions
            ) -> None:
                await node.produce(requests[i % partitions][(i // partitions) % DISTINCT_BATCHES])

            async def upload_call(i: int, payloads: list[bytes] = upload_payloads) -> None:
                await echo.upload(payloads[i % len(payloads)])

            async def persist_call(i: int, payloads: list[bytes] = upload_payloads) -> None:
                await echo.persist(payloads[i % len(payloads)])

            # warm every path (connections, first segment files) before timing
            await run_concurrent(CONCURRENCY * 2, CONCURRENCY, produce_call)
            await run_concurrent(CONCURRENCY * 2, CONCURRENCY, upload_call)
            await run_concurrent(CONCURRENCY * 2, CONCURRENCY, persist_call)
            times: dict[str, list[float]] = {"upload": [], "persist": [], "file": [], "produce": []}
            cpu = CpuMeter()
            raw_files = [workdir / f"raw-{topic}-{r}.bin" for r in range(profile.repeat)]
            servers = {"upload": echo_pid, "persist": echo_pid, "produce": node_pid}
            calls = {"upload": upload_call, "persist": persist_call, "produce": produce_call}
            for r, raw_file in enumerate(raw_files):
                # The writer that goes first takes the page-cache pages freed most recently,
                # which on some VMs are much cheaper to write: each takes its turn first.
                writers = ["persist", "file", "produce"]
                for name in ["upload", *writers[r % 3 :], *writers[: r % 3]]:
                    if name == "file":
                        times[name].append(write_file(raw_file, batches, n_requests))
                        continue
                    times[name].append(
                        await cpu.measure(
                            name,
                            servers[name],
                            n_requests,
                            run_concurrent(n_requests, CONCURRENCY, calls[name]),
                        )
                    )
            produce_times, upload_times = times["produce"], times["upload"]
            persist_times, file_times = times["persist"], times["file"]
            for raw_file in raw_files:
                raw_file.unlink()
            await echo.drop_persisted()
            volume = n_requests * batch_bytes
            records = n_requests * per_batch
            produce_mbps = volume / min(produce_times) / 1e6
            upload_mbps = volume / min(upload_times) / 1e6
            persist_mbps = volume / min(persist_times) / 1e6
            file_mbps = volume / min(file_times) / 1e6

            # The produce runs' writeback would otherwise run during the fetch rounds only.
            synced_before_fetch = write_back_dirty_pages()
            # Read everything back once, in `repeat` rounds of equal slices of every partition.
            # (each run of run_concurrent numbers its requests from 0: partition i % partitions)
            runs = [CONCURRENCY * 2] + [n_requests] * profile.repeat
            counts = [sum(len(range(p, c, partitions)) for c in runs) for p in range(partitions)]
            fetch_rates, download_rates, record_rates = [], [], []
            fetch_bytes = responses = fetched_records = 0
            for r in range(profile.repeat):
                work: list[list[tuple[int, int, int]]] = [[] for _ in range(CONCURRENCY)]
                for p, count in enumerate(counts):
                    lo, hi = count * r // profile.repeat, count * (r + 1) // profile.repeat
                    if partitions == 1:  # disjoint offset ranges of the one partition
                        for f in range(CONCURRENCY):
                            a = lo + (hi - lo) * f // CONCURRENCY
                            b = lo + (hi - lo) * (f + 1) // CONCURRENCY
                            if b > a:
                                work[f].append((p, a * per_batch, b * per_batch))
                    else:  # partitions dealt out to the fetchers
                        work[p % CONCURRENCY].append((p, lo * per_batch, hi * per_batch))

                async def fetcher(
                    items: list[tuple[int, int, int]], topic: str = topic
                ) -> tuple[int, int, int]:
                    size = recs = resp = 0
                    for partition, start, end in items:
                        s, n_recs, n_resp = await node.read_range(topic, partition, start, end)
                        size, recs, resp = size + s, recs + n_recs, resp + n_resp
                    return size, recs, resp

                async def fetch_round(
                    work: list[list[tuple[int, int, int]]] = work,
                ) -> list[tuple[int, int, int]]:
                    return await asyncio.gather(*(fetcher(items) for items in work))

                gc.collect()
                cpu_before = cpu_seconds(node_pid), time.process_time()
                start = time.perf_counter()
                parts = await fetch_round()
                elapsed = time.perf_counter() - start
                fetch_cpu = cpu.totals.setdefault(
                    "fetch", {"server_s": 0.0, "client_s": 0.0, "units": 0}
                )
                fetch_cpu["server_s"] += cpu_seconds(node_pid) - cpu_before[0]
                fetch_cpu["client_s"] += time.process_time() - cpu_before[1]
                fetch_cpu["units"] += sum(x[2] for x in parts)
                size = sum(x[0] for x in parts)
                recs = sum(x[1] for x in parts)
                resp = sum(x[2] for x in parts)
                fetch_rates.append(size / elapsed / 1e6)
                record_rates.append(recs / elapsed)
                fetch_bytes, fetched_records, responses = (
                    fetch_bytes + size,
                    fetched_records + recs,
                    responses + resp,
                )
                mean_response = size // resp

                async def download_call(i: int, size: int = mean_response) -> None:
                    await echo.download(size)

                elapsed = await cpu.measure(
                    "download", echo_pid, resp, run_concurrent(resp, CONCURRENCY, download_call)
                )
                download_rates.append(mean_response * resp / elapsed / 1e6)
            if fetched_records != sum(counts) * per_batch:
                raise RuntimeError(
                    f"fetched {fetched_records} records of {sum(counts) * per_batch} in {topic}"
                )
            mean_response = fetch_bytes // responses
            fetch_mbps, download_mbps = max(fetch_rates), max(download_rates)
            results[f"{size_name}.p{partitions}"] = {
                "batch_bytes": batch_bytes,
                "records_per_batch": per_batch,
                "produce_requests": n_requests,
                "written_back_before": synced,
                "written_back_before_fetch": synced_before_fetch,
                "produce_mbps": produce_mbps,
                "produce_records_per_s": records / min(produce_times),
                "produce_requests_per_s": n_requests / min(produce_times),
                "upload_ceiling_mbps": upload_mbps,
                "produce_vs_grpc": produce_mbps / upload_mbps,
                "persisting_upload_mbps": persist_mbps,
                "produce_vs_persisting_upload": produce_mbps / persist_mbps,
                "persisting_upload_vs_grpc": persist_mbps / upload_mbps,
                "file_write_mbps": file_mbps,
                # every repetition, in order: shows when fresh page-cache pages slow the writes
                "mbps_all_runs": {
                    name: [round(volume / t / 1e6, 1) for t in times]
                    for name, times in (
                        ("upload", upload_times),
                        ("persisting_upload", persist_times),
                        ("file_write", file_times),
                        ("produce", produce_times),
                    )
                },
                "produce_vs_file_write": produce_mbps / file_mbps,
                "file_write_vs_grpc": file_mbps / upload_mbps,
                # each repetition against the upload and the persisting upload of the same one
                "produce_vs_grpc_by_run": [
                    round(up / pr, 3) for up, pr in zip(upload_times, produce_times, strict=True)
                ],
                "produce_vs_persisting_upload_by_run": [
                    round(pe / pr, 3) for pe, pr in zip(persist_times, produce_times, strict=True)
                ],
                "fetch_bytes": fetch_bytes,
                "fetch_responses": responses,
                "fetch_mean_response_bytes": mean_response,
                "fetch_mbps": fetch_mbps,
                "fetch_records_per_s": max(record_rates),
                "download_ceiling_mbps": download_mbps,
                "fetch_vs_grpc": fetch_mbps / download_mbps,
                # CPU per request (produce, upload) or per response (fetch, download), averaged
                # over all repetitions: noise on a shared machine hardly moves these.
                "cpu_us": {key: cpu.per_unit_us(key) for key in cpu.totals},
            }
            progress(
                f"  {size_name:>3} x {partitions:2} partitions: produce {produce_mbps:7.1f} MB/s "
                f"(upload {upload_mbps:7.1f}, persisting {persist_mbps:7.1f}), "
                f"fetch {fetch_mbps:7.1f} MB/s "
                f"(download {download_mbps:7.1f})"
            )
    return results


async def latency_case(
    node: NodeClient, echo: EchoClient, profile: Profile, *, node_pid: int, echo_pid: int
) -> dict[str, Any]:
    batches, _ = make_batches(BATCH_SIZES["16k"], 1)
    request = node.produce_request("lat", 0, batches[0])

    async def produce() -> None:
        await node.produce(request)

    async def upload() -> None:
        await echo.upload(request)

    targets = (("echo", upload, echo_pid), ("node", produce, node_pid))
    runs: dict[str, list[dict[str, float]]] = {"echo": [], "node": []}
    for _ in range(profile.latency_runs):  # echo and node interleaved
        for name, call, pid in targets:
            await paced(call, LATENCY_RATE, 0.3)  # warm-up, discarded
            server0, client0, machine0 = cpu_seconds(pid), time.process_time(), machine_busy()
            start = time.perf_counter()
            run = await paced(call, LATENCY_RATE, profile.latency_s)
            wall = time.perf_counter() - start
            machine1 = machine_busy()
            # Share of one CPU used by the server and by this client while pacing, and how
            # many of the machine's CPUs were busy in all (beyond server + client + kernel
            # work for them: other tenants of the machine).
            run["server_cpu_share"] = (cpu_seconds(pid) - server0) / wall
            run["client_cpu_share"] = (time.process_time() - client0) / wall
            run["machine_busy_cpus"] = (machine1[0] - machine0[0]) / wall
            runs[name].append(run)
    results: dict[str, Any] = {}
    for name, call, _ in targets:
        results[name] = min(runs[name], key=lambda r: r["p99_ms"])  # the best run by p99
        results[name]["p99_ms_all_runs"] = [r["p99_ms"] for r in runs[name]]
        results[f"{name}_unloaded"] = await one_at_a_time(call, profile.latency_s / 5)
    return results


async def one_at_a_time(call: Callable[[], Awaitable[Any]], duration_s: float) -> dict[str, float]:
    """Closed loop, one call in flight: the latency without queueing, in ms."""
    times: list[float] = []
    gc.collect()
    end = time.perf_counter() + duration_s
    while (start := time.perf_counter()) < end:
        await call()
        times.append(time.perf_counter() - start)
    times.sort()
    return {
        "p50_ms": quantile(times, 0.50) * 1e3,
        "p99_ms": quantile(times, 0.99) * 1e3,
        "rate": len(times) / duration_s,
    }


async def fill_node(port: int, total: int) -> dict[str, float]:
    """Produce ``total`` bytes in 1 MiB batches over FILL_PARTITIONS partitions of "fill"."""
    client = NodeClient(port)
    try:
        batches, per_batch = make_batches(MIB, DISTINCT_BATCHES)
        n = total // len(batches[0])
        requests = [
            [client.produce_request("fill", p, b) for b in batches] for p in range(FILL_PARTITIONS)
        ]

        async def call(i: int) -> None:
            await client.produce(
                requests[i % FILL_PARTITIONS][(i // FILL_PARTITIONS) % DISTINCT_BATCHES]
            )

        elapsed = await run_concurrent(n, CONCURRENCY, call)
        return {
            "bytes": n * len(batches[0]),
            "records": n * per_batch,
            "seconds": elapsed,
            "mbps": n * len(batches[0]) / elapsed / 1e6,
            "per_partition_records": [
                len(range(p, n, FILL_PARTITIONS)) * per_batch for p in range(FILL_PARTITIONS)
            ],
        }
    finally:
        await client.close()


async def read_all(port: int, ends: list[int]) -> dict[str, float]:
    client = NodeClient(port)
    try:
        gc.collect()
        start = time.perf_counter()
        parts = await asyncio.gather(
            *(client.read_range("fill", p, 0, end) for p, end in enumerate(ends))
        )
        elapsed = time.perf_counter() - start
        size = sum(p[0] for p in parts)
        if sum(p[1] for p in parts) != sum(ends):
            raise RuntimeError("read-through did not return every record")
        return {"bytes": size, "seconds": elapsed, "mbps": size / elapsed / 1e6}
    finally:
        await client.close()


async def first_fetch(port: int) -> None:
    client = NodeClient(port)
    try:
        data, _ = await client.fetch("fill", 0, 0)
        if not data:
            raise RuntimeError("first fetch returned no records")
    finally:
        await client.close()


def timed_start(
    procs: Processes, name: str, port: int, argv: list[str]
) -> tuple[Any, float, float]:
    """Spawn a node; seconds until health says SERVING, and until a Fetch from offset 0 answers."""
    from strom_server.local.supervisor import ProcessFailedError
    from strom_server.rpc.health_probe import grpc_serving

    address = f"127.0.0.1:{port}"
    start = time.perf_counter()
    process = procs.start(name, argv, lambda: grpc_serving(address, timeout_s=0.5))
    deadline = start + 120
    while not grpc_serving(address, timeout_s=0.5):
        if process.exit_code() is not None or time.perf_counter() > deadline:
            raise ProcessFailedError(f"{name} did not start; log tail:\n{process.tail(40)}")
        time.sleep(0.005)
    ready = time.perf_counter() - start
    asyncio.run(first_fetch(port))
    fetched = time.perf_counter() - start
    return process, ready, fetched


def startup_case(procs: Processes, workdir: Path, profile: Profile) -> dict[str, Any]:
    topics = f"fill:{FILL_PARTITIONS}"
    results: dict[str, Any] = {}

    # Baseline: a node with a tiny data set (16 MiB), read back, then its start-up and RSS.
    small_dir, small_port = workdir / "small", free_port()
    small_argv = node_argv(small_port, small_dir, topics, profile.segment_bytes)
    node = start_node(procs, "small", small_port, small_argv)
    small_fill = asyncio.run(fill_node(small_port, 16 * MIB))
    procs.stop(node)
    node, ready, fetched = timed_start(procs, "small-restart", small_port, small_argv)
    asyncio.run(read_all(small_port, small_fill["per_partition_records"]))
    time.sleep(0.2)
    results["small"] = {
        "bytes": small_fill["bytes"],
        "ready_s": ready,
        "first_fetch_s": fetched,
        "rss_after_read_mib": rss_of(node.popen.pid),
    }
    procs.stop(node)

    # The big node: fill, clean shutdown, timed restarts.
    big_dir, big_port = workdir / "big", free_port()
    big_argv = node_argv(big_port, big_dir, topics, profile.segment_bytes)
    node = start_node(procs, "big-fill", big_port, big_argv)
    progress(f"  filling {profile.fill_bytes / GIB:.0f} GiB ...")
    fill = asyncio.run(fill_node(big_port, profile.fill_bytes))
    results["fill"] = {k: v for k, v in fill.items() if k != "per_partition_records"}
    results["rss_after_fill_mib"] = rss_of(node.popen.pid)
    stop_start = time.perf_counter()
    code = procs.stop(node, 60)
    results["shutdown_s"] = time.perf_counter() - stop_start
    results["shutdown_exit_code"] = code
    results["segments"] = len(list(big_dir.rglob("*.log")))
    results["data_dir_bytes"] = sum(f.stat().st_size for f in big_dir.rglob("*") if f.is_file())
    progress(f"  clean shutdown, {profile.restarts} timed restarts ...")
    readies, fetches = [], []
    for i in range(profile.restarts):
        node, ready, fetched = timed_start(procs, f"big-restart{i}", big_port, big_argv)
        readies.append(ready)
        fetches.append(fetched)
        if i < profile.restarts - 1:
            procs.stop(node, 60)
    time.sleep(0.2)
    results["ready_s_all"] = readies
    results["first_fetch_s_all"] = fetches
    results["ready_s"] = statistics.median(readies)
    results["first_fetch_s"] = statistics.median(fetches)
    results["rss_after_start_mib"] = rss_of(node.popen.pid)
    progress("  reading the whole data set back ...")
    results["read_all"] = asyncio.run(read_all(big_port, fill["per_partition_records"]))
    time.sleep(0.2)
    results["rss_after_read_mib"] = rss_of(node.popen.pid)
    procs.stop(node)
    results["rss_big_vs_small"] = (
        results["rss_after_read_mib"]["VmRSS"] / results["small"]["rss_after_read_mib"]["VmRSS"]
    )
    results["ready_vs_empty_node"] = results["ready_s"] / results["small"]["ready_s"]
    return results


# --------------------------------------------------------------------------- report


def report(summary: dict[str, Any]) -> None:
    tp = summary["throughput"]
    print("\nthroughput (best of", summary["repeat"], "runs; ceilings measured in this run)")
    head = (
        f"{'batch':>5} {'parts':>5} | {'produce MB/s':>12} {'rec/s':>11} {'upload MB/s':>11} "
        f"{'persisting':>10} {'file MB/s':>9} {'vs grpc':>7} {'vs pers.':>8} {'vs file':>7} | "
        f"{'fetch MB/s':>10} {'rec/s':>11} {'download':>8} {'vs grpc':>7}"
    )
    print(head)
    print("-" * len(head))
    for size_name in BATCH_SIZES:
        for partitions in (1, 16):
            r = tp[f"{size_name}.p{partitions}"]
            print(
                f"{size_name:>5} {partitions:5} | {r['produce_mbps']:12.1f} "
                f"{r['produce_records_per_s']:11,.0f} {r['upload_ceiling_mbps']:11.1f} "
                f"{r['persisting_upload_mbps']:10.1f} "
                f"{r['file_write_mbps']:9.1f} {r['produce_vs_grpc']:7.2f} "
                f"{r['produce_vs_persisting_upload']:8.2f} "
                f"{r['produce_vs_file_write']:7.2f} | "
                f"{r['fetch_mbps']:10.1f} {r['fetch_records_per_s']:11,.0f} "
                f"{r['download_ceiling_mbps']:8.1f} {r['fetch_vs_grpc']:7.2f}"
            )
    print(
        "\nCPU per request (produce, upload, persisting upload) or per response (fetch, "
        "download), in us, averaged over the repetitions"
    )
    head = (
        f"{'batch':>5} {'parts':>5} | {'produce':>8} {'upload':>8} {'ratio':>6} {'persist':>8} "
        f"{'client':>13} | "
        f"{'fetch':>8} {'download':>8} {'ratio':>6} {'client':>13}"
    )
    print(head)
    print("-" * len(head))
    for size_name in BATCH_SIZES:
        for partitions in (1, 16):
            c = tp[f"{size_name}.p{partitions}"]["cpu_us"]
            pr, up, fe, do = c["produce"], c["upload"], c["fetch"], c["download"]
            print(
                f"{size_name:>5} {partitions:5} | {pr['server_cpu_us']:8.0f} "
                f"{up['server_cpu_us']:8.0f} {pr['server_cpu_us'] / up['server_cpu_us']:6.2f} "
                f"{c['persist']['server_cpu_us']:8.0f} "
                f"{pr['client_cpu_us']:6.0f}/{up['client_cpu_us']:<6.0f} | "
                f"{fe['server_cpu_us']:8.0f} {do['server_cpu_us']:8.0f} "
                f"{fe['server_cpu_us'] / do['server_cpu_us']:6.2f} "
                f"{fe['client_cpu_us']:6.0f}/{do['client_cpu_us']:<6.0f}"
            )
    print("(client: this process's CPU per call against the node / against the echo server)")
    print(
        "persisting: the echo server's upload plus one os.write of each message to a file (no "
        "fsync), the least a server that keeps what it receives does; measured in every "
        "repetition, the writers (persisting, file, node) taking turns going first"
    )
    print(
        "file MB/s: raw sequential writes of the same chunks and volume, one file per "
        "repetition kept beside the node's log (same memory conditions)"
    )
    for size_name in BATCH_SIZES:
        for partitions in (1, 16):
            runs = tp[f"{size_name}.p{partitions}"]["mbps_all_runs"]
            print(
                f"every repetition, {size_name} x {partitions:2} (MB/s): "
                + "; ".join(
                    f"{name} {', '.join(f'{x:.0f}' for x in values)}"
                    for name, values in runs.items()
                )
            )
    for size_name in BATCH_SIZES:
        f = tp[f"file_write.{size_name}"]
        print(
            f"raw sequential file write, {size_name} chunks, file deleted at once: "
            f"{f['mbps']:,.0f} MB/s ({f['mbps_fsync']:,.0f} MB/s with a final fsync)"
        )
    r16 = tp["16k.p1"]
    print(
        f"16 KiB batch = {r16['batch_bytes']} bytes / {r16['records_per_batch']} records; "
        f"1 MiB batch = {tp['1m.p1']['batch_bytes']} bytes / "
        f"{tp['1m.p1']['records_per_batch']} records; mean fetch response "
        f"{r16['fetch_mean_response_bytes']:,} / {tp['1m.p1']['fetch_mean_response_bytes']:,} bytes"
    )

    pb = summary["protobuf_costs"]
    print(
        "per 1 MiB message, in this process (best of {}): a bytes copy {:.0f} us; parse a "
        "ProduceRequest + take records {:.0f} us; build + serialize a FetchResponse {:.0f} us; "
        "parse a FetchResponse + walk its batches {:.0f} us".format(
            summary["repeat"],
            pb["copy_1mib_us"],
            pb["node_parse_produce_1mib_us"],
            pb["node_build_fetch_response_1mib_us"],
            pb["client_parse_fetch_response_1mib_us"],
        )
    )

    lat = summary["latency"]
    print(
        f"\nproduce latency at a paced {LATENCY_RATE:,.0f}/s of 16 KiB batches, acks=1 (ms; "
        f"the best of {len(lat['node']['p99_ms_all_runs'])} runs by p99)"
    )
    print(f"{'':8} {'p50':>7} {'p99':>7} {'p99.9':>7} {'max':>7} {'p99 sched':>9} {'rate/s':>8}")
    for name in ("echo", "node"):
        r = lat[name]
        print(
            f"{name:8} {r['p50_ms']:7.3f} {r['p99_ms']:7.3f} {r['p999_ms']:7.3f} "
            f"{r['max_ms']:7.2f} {r['p99_from_schedule_ms']:9.3f} {r['achieved_rate']:8.0f}"
        )
    print(
        f"node/echo: p50 {lat['p50_vs_echo']:.2f}x, p99 {lat['p99_vs_echo']:.2f}x "
        "(p99 sched: measured from the scheduled send time)"
    )
    for name in ("echo", "node"):
        runs = ", ".join(f"{x:.2f}" for x in lat[name]["p99_ms_all_runs"])
        print(f"p99 of every run against {name}: {runs} ms")
    for name in ("echo", "node"):
        r = lat[name]
        print(
            f"while pacing against {name}: server used {r['server_cpu_share']:.0%} of a CPU, "
            f"this client {r['client_cpu_share']:.0%}, the machine "
            f"{r['machine_busy_cpus']:.2f} of {os.cpu_count()} CPUs"
        )
    for name in ("echo", "node"):
        r = lat[f"{name}_unloaded"]
        print(
            f"{name}, one request in flight (no pacing): p50 {r['p50_ms']:.3f} ms, "
            f"p99 {r['p99_ms']:.3f} ms, {r['rate']:,.0f} requests/s"
        )

    st = summary["startup"]
    print(
        f"\nstart-up: {st['data_dir_bytes'] / 1e9:.2f} GB on disk in {st['segments']} segments, "
        f"filled at {st['fill']['mbps']:.1f} MB/s (1 MiB batches, {FILL_PARTITIONS} partitions)"
    )
    print(
        f"  clean shutdown (SIGTERM) {st['shutdown_s']:.2f} s, exit code {st['shutdown_exit_code']}"
    )
    print(
        "  spawn -> SERVING: median {:.3f} s (runs: {}); -> first fetch at offset 0: median "
        "{:.3f} s".format(
            st["ready_s"], ", ".join(f"{x:.3f}" for x in st["ready_s_all"]), st["first_fetch_s"]
        )
    )
    print(
        f"  a node holding 16 MiB: spawn -> SERVING {st['small']['ready_s']:.3f} s, "
        f"-> first fetch {st['small']['first_fetch_s']:.3f} s "
        f"(big/small {st['ready_vs_empty_node']:.2f}x)"
    )
    print(
        f"  read-through of the whole data set: {st['read_all']['mbps']:.1f} MB/s "
        f"({FILL_PARTITIONS} concurrent fetchers, one per partition)"
    )
    print("\nRSS of the storage node (MiB)      VmRSS  RssAnon  RssFile   VmHWM")
    for label, key in (
        ("big node, after fill", st["rss_after_fill_mib"]),
        ("big node, restarted + 1 fetch", st["rss_after_start_mib"]),
        ("big node, after reading all", st["rss_after_read_mib"]),
        ("16 MiB node, after reading all", st["small"]["rss_after_read_mib"]),
    ):
        print(
            f"  {label:31} {key['VmRSS']:7.1f} {key['RssAnon']:8.1f} {key['RssFile']:8.1f} "
            f"{key['VmHWM']:7.1f}"
        )
    key = summary["throughput_node_rss_mib"]
    print(
        f"  {'throughput node, at the end':31} {key['VmRSS']:7.1f} {key['RssAnon']:8.1f} "
        f"{key['RssFile']:8.1f} {key['VmHWM']:7.1f}"
    )
    print(f"  big (after reading all) / small: {st['rss_big_vs_small']:.2f}x")

    print("\ntargets")
    for name, (met, text) in summary["targets"].items():
        print(f"  {'met    ' if met else 'MISSED '} {name}: {text}")


def evaluate(summary: dict[str, Any]) -> dict[str, Any]:
    tp, lat, st = summary["throughput"], summary["latency"], summary["startup"]
    worst = min(("1m.p1", "1m.p16"), key=lambda case: tp[case]["produce_vs_grpc"])
    produce = tp[worst]["produce_vs_grpc"]
    by_run = tp[worst]["produce_vs_persisting_upload_by_run"]
    persisting = tp[worst]["persisting_upload_vs_grpc"]
    fetch = min(tp["1m.p1"]["fetch_vs_grpc"], tp["1m.p16"]["fetch_vs_grpc"])
    p99 = lat["node"]["p99_ms"]
    return {
        "produce_1m_vs_grpc": (
            produce >= TARGETS["produce_1m_vs_grpc"],
            f"1 MiB produce / raw gRPC upload >= {TARGETS['produce_1m_vs_grpc']:.2f} "
            f"(worst of 1 and 16 partitions: {produce:.2f}; the persisting upload reached "
            f"{persisting:.2f} of the upload; produce against the persisting upload of the same "
            f"repetition, one by one: {', '.join(f'{x:.2f}' for x in by_run)})",
        ),
        "fetch_1m_vs_grpc": (
            fetch >= TARGETS["fetch_1m_vs_grpc"],
            f"1 MiB fetch / raw gRPC download >= {TARGETS['fetch_1m_vs_grpc']:.2f} "
            f"(worst of 1 and 16 partitions: {fetch:.2f})",
        ),
        "p99_produce_ms": (
            p99 < TARGETS["p99_produce_ms"],
            f"p99 produce latency at 1,000/s < {TARGETS['p99_produce_ms']} ms ({p99:.2f} ms)",
        ),
        "startup_ready_s": (
            st["ready_s"] < TARGETS["startup_ready_s"],
            f"ready within {TARGETS['startup_ready_s']} s of spawn with "
            f"{st['data_dir_bytes'] / 1e9:.1f} GB in {st['segments']} segments "
            f"({st['ready_s']:.2f} s)",
        ),
        "rss_big_vs_small": (
            st["rss_big_vs_small"] <= TARGETS["rss_big_vs_small"],
            f"RSS after reading everything <= {TARGETS['rss_big_vs_small']}x that of a 16 MiB "
            f"node ({st['rss_big_vs_small']:.2f}x)",
        ),
    }


def run(profile: Profile, quick: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="strom-bench-storage-"))
    procs = Processes(workdir)
    summary: dict[str, Any] = {
        "quick": quick,
        "repeat": profile.repeat,
        "concurrency": CONCURRENCY,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    try:
        summary["protobuf_costs"] = protobuf_costs(profile.repeat)  # before anything else runs
        echo_port, node_port = free_port(), free_port()
        echo = procs.start(
            "echo",
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--echo-server",
                str(echo_port),
                "--persist-file",
                str(workdir / "persisted.bin"),
            ],
            lambda: tcp_open(echo_port),
        )
        echo.wait_ready(30)
        topics = ",".join(f"t{size}x{parts}:{parts}" for size in BATCH_SIZES for parts in (1, 16))
        node = start_node(
            procs, "node", node_port, node_argv(node_port, workdir / "node", topics + ",lat:1")
        )

        async def network_cases() -> None:
            node_client, echo_client = NodeClient(node_port), EchoClient(echo_port)
            try:
                progress("throughput ...")
                pids = {"node_pid": node.popen.pid, "echo_pid": echo.popen.pid}
                summary["throughput"] = await throughput_cases(
                    node_client, echo_client, profile, workdir, **pids
                )
                synced = write_back_dirty_pages()
                progress(
                    f"latency ... (first wrote back {synced['dirty_mb']:,.0f} MB of dirty pages "
                    f"left by the throughput cases, {synced['seconds']:.1f} s)"
                )
                lat = await latency_case(node_client, echo_client, profile, **pids)
                lat["written_back_before"] = synced
                lat["p50_vs_echo"] = lat["node"]["p50_ms"] / lat["echo"]["p50_ms"]
                lat["p99_vs_echo"] = lat["node"]["p99_ms"] / lat["echo"]["p99_ms"]
                summary["latency"] = lat
            finally:
                await node_client.close()
                await echo_client.close()

        asyncio.run(network_cases())
        summary["throughput_node_rss_mib"] = rss_of(node.popen.pid)
        procs.stop(node)
        procs.stop(echo)
        shutil.rmtree(workdir / "node", ignore_errors=True)
        progress("start-up and RSS ...")
        summary["startup"] = startup_case(procs, workdir, profile)
        progress("done")
        targets = evaluate(summary)
        summary["targets"] = targets
        report(summary)
        summary["targets_met"] = {name: met for name, (met, _) in targets.items()}
        summary["targets"] = {name: text for name, (_, text) in targets.items()}
        summary["target_values"] = TARGETS
        return summary
    except BaseException:
        for process in procs.started:
            if process.name != "echo":
                print(
                    f"--- last lines of {process.log_path.name}:\n{process.tail(30)}",
                    file=sys.stderr,
                )
        raise
    finally:
        procs.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = bench_arguments(__doc__, "smaller volumes; under a minute", keep=False)
    parser.add_argument("--echo-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--persist-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server is not None:
        run_echo_server(args.echo_server, args.persist_file)
        return

    print_summary(lambda: run(QUICK if args.quick else FULL, args.quick))


if __name__ == "__main__":
    main()
