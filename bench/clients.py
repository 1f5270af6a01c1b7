"""Benchmark of the Python clients (strom.Producer, strom.Consumer) against Redis Streams and
NATS JetStream measured in the same run, with the same records.

One real local cluster on loopback, started as ``strom cluster up`` starts it (etcd, 2
controllers, 3 storage nodes, the gateway; ``bench/replication.py``'s ``cluster_spec``), data in
a temporary directory; beside it a ``redis-server --save '' --appendonly no`` and a
``nats-server -js -sd DIR`` (JetStream on file storage), each on a free port. Every process is
stopped at the end, also on failure. The peers are Debian's packages:

    apt-get install redis-server redis-tools nats-server

and the Python libraries ``redis`` (with ``hiredis``) and ``nats-py`` from requirements-dev.txt.
A peer whose server, tool or library is missing is skipped with a line saying so.

The records: 1,000,000 values of 100 random bytes, no key (``--quick``: 200,000), the same
list for every client. Strom topics have 6 partitions, replication factor 1 (the replication
cost is ``bench/replication.py``'s); keyless records go to the producer's sticky partitions.

* producer throughput, one Python process, from the first send to the last acknowledgement:
  ``Producer.send()`` per record with acks=1 and acks=all (idempotent), compression none and
  lz4, default linger (5 ms) and batch size (16 KiB), a fresh topic per case; and
  ``Producer.send_many()`` in calls of 10,000 (acks=1, none). Peers: redis-py ``XADD`` (one
  field ``v``) to one stream, pipelined 1,000 commands per round trip (hiredis parser);
  ``redis-benchmark`` (Redis's C client, single thread) pipelining the same ``XADD`` with a
  100-byte value, 100 commands per pipeline, on 50 connections (what the Redis server itself
  takes: the producer's target) and on one; nats-py JetStream publishes waiting for each
  acknowledgement (one in flight) and ``publish_async`` (acknowledged, up to nats-py's pending
  window in flight).
  JetStream is measured on at most 50,000 records (``--quick``: 20,000): it is that slow.
* consumer throughput: ``strom.Consumer`` (assign the 6 partitions, ``auto_offset_reset=
  "earliest"``, ``poll(max_records=10000)``) reading the records the acks=1 producer wrote;
  redis-py ``XREAD COUNT 10000`` pages over the stream the pipelined ``XADD`` wrote.
* end-to-end latency: 5,000 records/s for 10 s (``--quick``: 3 s), each record sent at
  t0 + i/5000, its value carrying ``time.perf_counter_ns()`` taken at the send call
  (``bench/replication.py``'s ``e2e_value``); a consumer in another process (this file,
  ``--e2e-consumer SPEC``) takes each record's latency when its ``poll`` returns
  (``perf_counter`` is CLOCK_MONOTONIC: one clock for both processes). Strom: ``send()``
  acks=1, no compression, ``linger_ms`` 0 and 5, consumer ``poll`` over the 6 partitions from
  their end; Redis: one ``XADD`` per record, consumer ``XREAD BLOCK`` from the stream's start.
  Also the acknowledgement latency of the same sends (send -> the future done / ``XADD``
  answered): the producer's share of the end-to-end figure.

Throughput figures are the best of 3 repetitions (``--quick``: 2), every client once per
repetition, interleaved. Also reported: this process's CPU per record (the producer's
background loop thread included) and how busy the whole machine was (other tenants included).
Where the acks=1 ``send()`` producer's time goes, per record: the ``send()`` calls, the CPU of
the calling thread and of the background loop thread (200,000 records, one more run); and if
it misses its target, a cProfile of its send loop (the calling thread: the background sender
shows only as time the GIL was away), top 10. The last line is ``SUMMARY {json}``.

    .venv/bin/python bench/clients.py            # full run, about 4 minutes
    .venv/bin/python bench/clients.py --quick    # under a minute
    .venv/bin/python bench/clients.py --keep     # keep data and logs (kept on failure)
"""

from __future__ import annotations

import argparse
import array
import asyncio
import contextlib
import cProfile
import csv
import gc
import io
import json
import os
import platform
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from benchkit import bench_arguments, free_port, print_summary, progress

# The sibling benchmarks' helpers (bench/ is sys.path[0] when this file runs).
from replication import cluster_spec, e2e_value, latency_figures, poll_until
from storage import VALUE_SIZE, cpu_seconds, machine_busy, tcp_open

from strom import Admin, Consumer, NewTopic, Producer, TopicPartition
from strom_server.local.supervisor import ManagedProcess, Supervisor

PARTITIONS = 6
SEND_MANY_CHUNK = 10_000
REDIS_PIPELINE = 1000
READ_PAGE = 10_000
REDIS_BENCHMARK_CLIENTS = 50  # and 1, for a second row
REDIS_BENCHMARK_PIPELINE = 100
E2E_RATE = 5000
STREAM = "bench"
NATS_STREAM = "BENCH"
THIS_FILE = str(Path(__file__).resolve())
TARGETS = {"producer_vs_redis_benchmark": 1.0, "consumer_vs_redis_xread": 2.0}
INSTALL_HINT = "apt-get install redis-server redis-tools nats-server"


@dataclass(frozen=True)
class Profile:
    records: int
    repeat: int
    nats_records: int
    e2e_s: float


FULL = Profile(records=1_000_000, repeat=3, nats_records=50_000, e2e_s=10.0)
QUICK = Profile(records=200_000, repeat=2, nats_records=20_000, e2e_s=3.0)


@dataclass(frozen=True)
class ProducerCase:
    acks: int | str
    compression: str
    bulk: bool = False

    @property
    def name(self) -> str:
        method = "send_many" if self.bulk else "send"
        return f"strom {method} acks={self.acks} {self.compression}"

    @property
    def topic(self) -> str:
        return self.name.replace(" ", "-").replace("=", "")

    def options(self) -> dict[str, Any]:
        return {
            "acks": self.acks,
            "compression_type": self.compression,
            "enable_idempotence": self.acks == "all",
        }


ACKS1 = ProducerCase(1, "none")
PRODUCER_CASES = (
    ACKS1,
    ProducerCase(1, "lz4"),
    ProducerCase("all", "none"),
    ProducerCase("all", "lz4"),
    ProducerCase(1, "none", bulk=True),
)
REDIS_XADD, REDIS_BENCH = "redis-py XADD pipelined", "redis-benchmark XADD"
REDIS_BENCH_1 = "redis-benchmark XADD 1 connection"
NATS_SYNC, NATS_ASYNC = "nats-py JetStream publish", "nats-py JetStream publish_async"
STROM_READ, REDIS_READ = "strom Consumer poll", "redis-py XREAD"


# --------------------------------------------------------------------------- peers


@dataclass
class Peers:
    """The peer servers that could be started, and why the others were skipped."""

    redis_port: int | None = None
    redis_benchmark: bool = False
    nats_port: int | None = None
    pids: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def missing(binary: str, module: str) -> str | None:
    """Why a peer cannot run: its server binary or Python library is missing (else None)."""
    if shutil.which(binary) is None:
        return f"{binary} not found (Debian: {INSTALL_HINT})"
    try:
        __import__(module)
    except ImportError:
        return (
            f"Python module {module} not installed (.venv/bin/pip install -r requirements-dev.txt)"
        )
    return None


def start_peers(workdir: Path, started: list[ManagedProcess]) -> Peers:
    peers = Peers()
    servers = {
        "redis": ("redis-server", "redis", ["--save", "", "--appendonly", "no", "--dir"]),
        "nats": ("nats-server", "nats", ["-js", "-sd"]),
    }
    for name, (binary, module, flags) in servers.items():
        reason = missing(binary, module)
        if reason:
            peers.skipped[name] = reason
            continue
        port, data = free_port(), workdir / name
        data.mkdir()
        port_flags = (
            ["--bind", "127.0.0.1", "--port"] if name == "redis" else ["-a", "127.0.0.1", "-p"]
        )
        process = ManagedProcess(
            name=name,
            argv=[binary, *flags, str(data), *port_flags, str(port)],
            log_path=workdir / "logs" / f"{name}.log",
            ready=partial(tcp_open, port),
        )
        started.append(process)
        try:
            process.start()
            process.wait_ready(30)
        except Exception as e:
            peers.skipped[name] = f"{binary} did not start: {e}"
            continue
        assert process.pid is not None
        peers.pids[name] = process.pid
        if name == "redis":
            peers.redis_port = port
        else:
            peers.nats_port = port
    if peers.redis_port is not None:
        if shutil.which("redis-benchmark"):
            peers.redis_benchmark = True
        else:
            peers.skipped["redis-benchmark"] = f"redis-benchmark not found (Debian: {INSTALL_HINT})"
    for name, reason in peers.skipped.items():
        progress(f"SKIPPED peer {name}: {reason}")
    return peers


@contextlib.contextmanager
def running(workdir: Path) -> Iterator[tuple[str, list[int], Peers]]:
    """The Strom cluster and the peers: (gateway address, storage node pids, peers)."""
    spec = cluster_spec(workdir)
    processes = spec.processes()
    supervisor = Supervisor(processes, grace_s=30.0)
    peer_processes: list[ManagedProcess] = []
    try:
        supervisor.start_all(60.0)
        peers = start_peers(workdir, peer_processes)
        storage = [p.pid for p in processes if p.name.startswith("storage-") and p.pid]
        yield spec.gateway_address, storage, peers
    except BaseException:
        for process in [*processes, *peer_processes]:
            if process.name.startswith("storage-") or process in peer_processes:
                print(f"--- last lines of {process.log_path}:\n{process.tail(20)}", file=sys.stderr)
        raise
    finally:
        for process in reversed(peer_processes):
            with contextlib.suppress(Exception):
                process.stop(10.0)
        supervisor.stop_all()


# --------------------------------------------------------------------------- strom


def tps(topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(PARTITIONS)]


def create_topics(gateway: str) -> None:
    names = [case.topic for case in PRODUCER_CASES] + ["e2e"]
    with Admin(gateway, request_timeout_ms=30000) as admin:
        poll_until(lambda: len(admin.describe_cluster().brokers) == 3, 60, "3 storage nodes")
        admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names])

        def led() -> bool:
            return all(p.leader >= 0 for t in admin.describe_topics(names) for p in t.partitions)

        poll_until(led, 60, "a leader for every partition")


def end_total(consumer: Consumer, topic: str) -> int:
    return sum(consumer.end_offsets(tps(topic)).values())


def strom_produce(
    gateway: str,
    case: ProducerCase,
    values: list[bytes],
    profiler: cProfile.Profile | None = None,
    split: dict[str, float] | None = None,
) -> float:
    """Seconds from the first send to the last acknowledgement (the producer warmed up).
    ``profiler`` runs over the sends and the flush only; ``split`` (send() only) gets the
    seconds the send() calls took and the CPU seconds of this thread and of the process."""
    with Producer(gateway, **case.options()) as producer:
        for p in range(PARTITIONS):  # metadata, producer id and connections before timing
            producer.send(case.topic, b"warm-up", partition=p)
        producer.flush()
        gc.collect()
        if profiler:
            profiler.enable()
        start = time.perf_counter()
        if case.bulk:
            futures = [
                producer.send_many(case.topic, values[i : i + SEND_MANY_CHUNK])
                for i in range(0, len(values), SEND_MANY_CHUNK)
            ]
            producer.flush()
            elapsed = time.perf_counter() - start
            if sum(f.result() for f in futures) != len(values):
                raise RuntimeError(f"{case.name}: not every record was acknowledged")
            return elapsed
        send, topic = producer.send, case.topic
        thread0, process0 = time.thread_time(), time.process_time()
        for value in values:
            last = send(topic, value)
        if split is not None:
            split["send_calls_s"] = time.perf_counter() - start
            split["caller_thread_cpu_s"] = time.thread_time() - thread0
        producer.flush()
        elapsed = time.perf_counter() - start
        if profiler:
            profiler.disable()
        if split is not None:
            split["process_cpu_s"] = time.process_time() - process0
            split["elapsed_s"] = elapsed
        last.result(0)  # raises the delivery error, if any
        return elapsed


def strom_consume(gateway: str, topic: str, n: int) -> float:
    """Seconds to poll the first ``n`` records of ``topic`` with a new consumer."""
    with Consumer(
        bootstrap_servers=gateway, auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        consumer.assign(tps(topic))
        gc.collect()
        got, deadline = 0, time.monotonic() + 120
        start = time.perf_counter()
        while got < n:
            for records in consumer.poll(timeout_ms=1000, max_records=READ_PAGE).values():
                got += len(records)
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed {got} of {n} records of {topic} in 120 s")
        return time.perf_counter() - start


# --------------------------------------------------------------------------- redis and nats


def redis_client(port: int) -> Any:
    import redis

    return redis.Redis(host="127.0.0.1", port=port, protocol=2)


def redis_xadd(port: int, values: list[bytes]) -> float:
    client = redis_client(port)
    client.delete(STREAM)
    pipe = client.pipeline(transaction=False)
    gc.collect()
    start = time.perf_counter()
    for i in range(0, len(values), REDIS_PIPELINE):
        for value in values[i : i + REDIS_PIPELINE]:
            pipe.xadd(STREAM, {"v": value})
        pipe.execute()
    elapsed = time.perf_counter() - start
    if client.xlen(STREAM) != len(values):
        raise RuntimeError("redis: the stream does not hold every record")
    client.close()
    return elapsed


def redis_xread(port: int, n: int) -> float:
    client = redis_client(port)
    last, got = b"0-0", 0
    gc.collect()
    start = time.perf_counter()
    while got < n:
        ((_, entries),) = client.xread({STREAM: last}, count=READ_PAGE)
        got += len(entries)
        last = entries[-1][0]
    elapsed = time.perf_counter() - start
    client.close()
    return elapsed


def redis_benchmark(port: int, n: int, connections: int) -> float:
    """Seconds redis-benchmark reports for ``n`` pipelined XADDs of a 100-byte value."""
    redis_client(port).delete("rb")
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(n)]
    argv += ["-c", str(connections), "-P", str(REDIS_BENCHMARK_PIPELINE), "--csv"]
    argv += ["XADD", "rb", "*", "v", "x" * VALUE_SIZE]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True).stdout
    rows = [row for row in csv.reader(io.StringIO(out)) if len(row) > 1]
    rate = float(rows[-1][1])  # header "test","rps",...; then the XADD row
    redis_client(port).delete("rb")
    return n / rate


async def nats_publish(port: int, values: list[bytes], pipelined: bool) -> float:
    import nats
    from nats.js.api import StorageType
    from nats.js.errors import NotFoundError

    client = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = client.jetstream()
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(NATS_STREAM)
        await js.add_stream(name=NATS_STREAM, subjects=[STREAM], storage=StorageType.FILE)
        await js.publish(STREAM, b"warm-up")
        gc.collect()
        start = time.perf_counter()
        if pipelined:
            for value in values:
                await js.publish_async(STREAM, value)
            await js.publish_async_completed()
        else:
            for value in values:
                await js.publish(STREAM, value)
        return time.perf_counter() - start
    finally:
        await client.close()


def nats_publish_sync(port: int, values: list[bytes], pipelined: bool) -> float:
    return asyncio.run(nats_publish(port, values, pipelined))


# --------------------------------------------------------------------------- throughput


def measure(
    name: str, n: int, pids: list[int], run: Callable[[], float], results: dict[str, Any]
) -> None:
    """Run one client once; keep its rate, the CPU per record of this process and of the
    server, and how busy the machine was."""
    cpu0, server0, busy0 = time.process_time(), sum(map(cpu_seconds, pids)), machine_busy()[0]
    wall0 = time.perf_counter()
    elapsed = run()
    wall = time.perf_counter() - wall0
    entry = results.setdefault(
        name, {"records": n, "rates": [], "client_cpu_us": [], "server_cpu_us": [], "busy": []}
    )
    entry["rates"].append(n / elapsed)
    entry["client_cpu_us"].append((time.process_time() - cpu0) / n * 1e6)
    entry["server_cpu_us"].append((sum(map(cpu_seconds, pids)) - server0) / n * 1e6)
    entry["busy"].append((machine_busy()[0] - busy0) / wall)


def clients(
    gateway: str, storage: list[int], peers: Peers, profile: Profile, values: list[bytes]
) -> list[tuple[str, int, list[int], Callable[[], float]]]:
    """Every throughput client, in the order of a repetition: (name, records, server pids,
    run returning seconds)."""
    n, nats_values = len(values), values[: profile.nats_records]
    runs: list[tuple[str, int, list[int], Callable[[], float]]] = [
        (case.name, n, storage, partial(strom_produce, gateway, case, values))
        for case in PRODUCER_CASES
    ]
    if peers.redis_port is not None:
        port, pid = peers.redis_port, [peers.pids["redis"]]
        runs.append((REDIS_XADD, n, pid, partial(redis_xadd, port, values)))
        runs.append((REDIS_READ, n, pid, partial(redis_xread, port, n)))
        if peers.redis_benchmark:
            for name, c in ((REDIS_BENCH, REDIS_BENCHMARK_CLIENTS), (REDIS_BENCH_1, 1)):
                runs.append((name, n, pid, partial(redis_benchmark, port, n, c)))
    runs.append((STROM_READ, n, storage, partial(strom_consume, gateway, ACKS1.topic, n)))
    if peers.nats_port is not None:
        nats_port, pid = peers.nats_port, [peers.pids["nats"]]
        for name, pipelined in ((NATS_SYNC, False), (NATS_ASYNC, True)):
            publish = partial(nats_publish_sync, nats_port, nats_values, pipelined)
            runs.append((name, len(nats_values), pid, publish))
    return runs


def throughput(
    gateway: str, storage: list[int], peers: Peers, profile: Profile, values: list[bytes]
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    topics = {case.name: case.topic for case in PRODUCER_CASES}
    with Consumer(bootstrap_servers=gateway) as lookups:
        for rep in range(profile.repeat):
            for name, n, pids, run in clients(gateway, storage, peers, profile, values):
                before = end_total(lookups, topics[name]) if name in topics else 0
                measure(name, n, pids, run, results)
                if name in topics:  # every record written once (and the 6 warm-up records)
                    written = end_total(lookups, topics[name]) - before
                    if written != n + PARTITIONS:
                        raise RuntimeError(f"{name}: {written} records written, not {n}")
            progress(
                f"  repetition {rep + 1}/{profile.repeat}: "
                + ", ".join(f"{k} {v['rates'][-1] / 1e3:,.0f}k/s" for k, v in results.items())
            )
    for entry in results.values():
        entry["best"] = max(entry["rates"])
    return results


def send_split(gateway: str, values: list[bytes]) -> dict[str, float]:
    """Where the acks=1 producer's time goes, per record (us): the send() calls (wall), the
    calling thread's CPU, the background loop thread's CPU (the rest of the process's), and
    the whole run (wall, to the last acknowledgement)."""
    split: dict[str, float] = {}
    strom_produce(gateway, ACKS1, values, split=split)
    us = 1e6 / len(values)
    return {
        "send_calls_us": split["send_calls_s"] * us,
        "caller_thread_cpu_us": split["caller_thread_cpu_s"] * us,
        "loop_thread_cpu_us": (split["process_cpu_s"] - split["caller_thread_cpu_s"]) * us,
        "total_us": split["elapsed_s"] * us,
    }


def send_loop_profile(gateway: str, values: list[bytes]) -> list[dict[str, Any]]:
    """cProfile of the acks=1 send loop (this thread only); the top 10 by own time."""
    profiler = cProfile.Profile()
    strom_produce(gateway, ACKS1, values, profiler)
    stats = pstats.Stats(profiler)
    rows = []
    entries = stats.stats.items()  # type: ignore[attr-defined]
    for (path, line, func), (_cc, calls, own, total, _callers) in entries:
        rows.append(
            {
                "function": f"{Path(path).name}:{line}({func})",
                "calls": calls,
                "own_s": own,
                "cumulative_s": total,
            }
        )
    rows.sort(key=lambda r: -r["own_s"])
    return rows[:10]


# --------------------------------------------------------------------------- end to end


def paced_sends(send: Callable[[bytes], object], tag: bytes, duration_s: float) -> float:
    """Send at t0 + i/E2E_RATE for ``duration_s``; the achieved rate."""
    n = int(E2E_RATE * duration_s)
    i, t0 = 0, time.perf_counter()
    while i < n:
        due = min(n, int((time.perf_counter() - t0) * E2E_RATE) + 1)
        while i < due:
            send(e2e_value(tag, time.perf_counter_ns()))
            i += 1
        delay = t0 + i / E2E_RATE - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    return n / (time.perf_counter() - t0)


def e2e_run(
    kind: str, address: str, duration_s: float, workdir: Path, open_sender: Any
) -> dict[str, Any]:
    """One paced run against a consumer process; its latency figures."""
    tag = uuid.uuid4().bytes[:8]
    out = workdir / f"latencies-{tag.hex()}.bin"
    spec: dict[str, Any] = {
        "kind": kind,
        "address": address,
        "tag": tag.hex(),
        "expected": int(E2E_RATE * duration_s),
        "timeout_s": duration_s + 30,
        "out": str(out),
    }
    with open_sender() as sender:
        paced_sends(sender.send, uuid.uuid4().bytes[:8], 0.3)  # warm-up, before the consumer
        sender.settle()
        sender.acks = array.array("q")
        consumer = subprocess.Popen(
            [sys.executable, THIS_FILE, "--e2e-consumer", json.dumps(spec)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert consumer.stdout is not None
            line = consumer.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"the {kind} consumer did not start (said {line!r})")
            busy0 = machine_busy()[0]
            start = time.perf_counter()
            rate = paced_sends(sender.send, tag, duration_s)
            busy = (machine_busy()[0] - busy0) / (time.perf_counter() - start)
            sender.settle()
            if consumer.wait(spec["timeout_s"]) != 0:
                raise RuntimeError(f"the {kind} consumer failed ({consumer.returncode})")
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
    latencies: array.array[int] = array.array("q")
    latencies.frombytes(out.read_bytes())
    out.unlink()
    acks = latency_figures(list(sender.acks))
    return {
        **latency_figures(list(latencies)),
        "ack_p50_ms": acks["p50_ms"],
        "ack_p99_ms": acks["p99_ms"],
        "achieved_rate": rate,
        "machine_busy_cpus": busy,
    }


class Sender:
    """One record at a time through ``client``; ``acks`` holds each send's acknowledgement
    latency (ns)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.acks: array.array[int] = array.array("q")

    def send(self, value: bytes) -> None:
        raise NotImplementedError

    def settle(self) -> None:
        """Wait until every record sent so far is acknowledged."""


class StromSender(Sender):
    def send(self, value: bytes) -> None:
        sent = time.perf_counter_ns()
        future = self.client.send("e2e", value)
        # Runs on the producer's loop thread when the batch is acknowledged.
        future.add_done_callback(lambda _: self.acks.append(time.perf_counter_ns() - sent))

    def settle(self) -> None:
        self.client.flush()


class RedisSender(Sender):
    def send(self, value: bytes) -> None:
        sent = time.perf_counter_ns()
        self.client.xadd("e2e", {"v": value})
        self.acks.append(time.perf_counter_ns() - sent)


@contextlib.contextmanager
def strom_sender(gateway: str, linger_ms: float) -> Iterator[Sender]:
    with Producer(
        gateway, acks=1, enable_idempotence=False, compression_type="none", linger_ms=linger_ms
    ) as producer:
        for p in range(PARTITIONS):
            producer.send("e2e", b"warm-up", partition=p)
        producer.flush()
        yield StromSender(producer)


@contextlib.contextmanager
def redis_sender(port: int) -> Iterator[Sender]:
    client = redis_client(port)
    client.delete("e2e")
    try:
        yield RedisSender(client)
    finally:
        client.close()


def end_to_end(
    gateway: str, peers: Peers, profile: Profile, workdir: Path
) -> dict[str, dict[str, Any]]:
    cases: dict[str, tuple[str, str, Callable[[], Any]]] = {
        "strom acks=1 linger_ms=0": ("strom", gateway, lambda: strom_sender(gateway, 0)),
        "strom acks=1 linger_ms=5": ("strom", gateway, lambda: strom_sender(gateway, 5)),
    }
    if peers.redis_port is not None:
        port = peers.redis_port
        cases["redis XADD / XREAD BLOCK"] = ("redis", str(port), lambda: redis_sender(port))
    results = {}
    for name, (kind, address, sender) in cases.items():
        results[name] = e2e_run(kind, address, profile.e2e_s, workdir, sender)
        r = results[name]
        progress(
            f"  {name}: p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms (ack p50 "
            f"{r['ack_p50_ms']:.2f}, p99 {r['ack_p99_ms']:.2f} ms), "
            f"{r['achieved_rate']:,.0f} records/s, machine {r['machine_busy_cpus']:.2f} CPUs busy"
        )
    return results


def e2e_consume(spec: dict[str, Any]) -> array.array[int]:
    """The consumer process: latencies (ns) of ``expected`` tagged records."""
    tag, expected = bytes.fromhex(spec["tag"]), spec["expected"]
    latencies: array.array[int] = array.array("q")
    deadline = time.monotonic() + spec["timeout_s"]

    def take(values: Iterator[bytes], now: int) -> None:
        for value in values:
            if value[:8] == tag:
                latencies.append(now - int.from_bytes(value[8:16], "big"))

    if spec["kind"] == "strom":
        consumer = Consumer(bootstrap_servers=spec["address"], enable_auto_commit=False)
        consumer.assign(tps("e2e"))
        for tp in tps("e2e"):
            consumer.position(tp)  # the end, before the producer starts
        print("ready", flush=True)
        while len(latencies) < expected and time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=200)
            now = time.perf_counter_ns()
            for records in polled.values():
                take((r.value for r in records), now)
        consumer.close()
    else:
        client = redis_client(int(spec["address"]))
        last = b"0-0"  # the sender deleted the stream before the warm-up
        with contextlib.suppress(Exception):
            last = client.xinfo_stream("e2e")["last-generated-id"]
        print("ready", flush=True)
        while len(latencies) < expected and time.monotonic() < deadline:
            reply = client.xread({"e2e": last}, count=READ_PAGE, block=200)
            now = time.perf_counter_ns()
            if reply:
                ((_, entries),) = reply
                take((fields[b"v"] for _, fields in entries), now)
                last = entries[-1][0]
    if len(latencies) < expected:
        raise SystemExit(f"consumed {len(latencies)} of {expected} records in time")
    return latencies


# --------------------------------------------------------------------------- report


def evaluate(tp: dict[str, Any]) -> dict[str, tuple[bool | None, str]]:
    """Each target: met (None when its peer was skipped) and a line saying why."""
    checks = {
        "producer_vs_redis_benchmark": (ACKS1.name, REDIS_BENCH, "strom send() acks=1 >= "),
        "consumer_vs_redis_xread": (STROM_READ, REDIS_READ, "strom Consumer >= 2x "),
    }
    targets: dict[str, tuple[bool | None, str]] = {}
    for name, (ours, peer, text) in checks.items():
        if peer not in tp:
            targets[name] = (None, f"{text}{peer}: not measured (the peer was skipped)")
            continue
        ratio = tp[ours]["best"] / tp[peer]["best"]
        targets[name] = (
            ratio >= TARGETS[name],
            f"{text}{peer} ({tp[ours]['best']:,.0f} vs {tp[peer]['best']:,.0f} records/s: "
            f"{ratio:.2f}x)",
        )
    return targets


def report(summary: dict[str, Any], targets: dict[str, tuple[bool | None, str]]) -> None:
    tp = summary["throughput"]
    base = tp.get(REDIS_BENCH, tp.get(REDIS_XADD, tp[ACKS1.name]))["best"]
    base_name = next(k for k in (REDIS_BENCH, REDIS_XADD, ACKS1.name) if k in tp)
    print(
        f"\nthroughput, 100-byte records, one Python process per client (best of "
        f"{summary['repeat']}; CPU us: this process's CPU per record, mean; server: the "
        "servers' (3 storage nodes, redis-server or nats-server); busy: the whole machine's "
        f"busy CPUs during the runs, of {os.cpu_count()})"
    )
    head = (
        f"{'client':34} {'records':>9} {'records/s':>11} {'vs ' + base_name:>24} "
        f"{'CPU us':>7} {'server':>6} {'busy':>9}  runs (k/s)"
    )
    print(f"{head}\n{'-' * len(head)}")
    for name, r in tp.items():
        cpu = sum(r["client_cpu_us"]) / len(r["client_cpu_us"])
        server = sum(r["server_cpu_us"]) / len(r["server_cpu_us"])
        runs = " ".join(f"{x / 1e3:.0f}" for x in r["rates"])
        busy = f"{min(r['busy']):.2f}-{max(r['busy']):.2f}"
        cpu_text = "-" if name.startswith("redis-benchmark") else f"{cpu:.2f}"
        print(
            f"{name:34} {r['records']:9,} {r['best']:11,.0f} {r['best'] / base:24.2f} "
            f"{cpu_text:>7} {server:6.2f} {busy:>9}  {runs}"
        )
    if summary["skipped"]:
        for name, reason in summary["skipped"].items():
            print(f"SKIPPED {name}: {reason}")
    e2e = summary["e2e"]
    print(
        f"\nend-to-end latency, send -> poll returned, {E2E_RATE:,} records/s for "
        f"{summary['e2e_seconds']:.0f} s (ms; ack: send -> acknowledged, the producer's share)"
    )
    head = (
        f"{'case':28} {'p50':>7} {'p99':>7} {'p99.9':>7} {'max':>7} {'ack p50':>7} "
        f"{'ack p99':>7} {'sent/s':>7} {'busy':>5}"
    )
    print(f"{head}\n{'-' * len(head)}")
    for name, r in e2e.items():
        print(
            f"{name:28} {r['p50_ms']:7.2f} {r['p99_ms']:7.2f} {r['p999_ms']:7.2f} "
            f"{r['max_ms']:7.1f} {r['ack_p50_ms']:7.2f} {r['ack_p99_ms']:7.2f} "
            f"{r['achieved_rate']:7,.0f} {r['machine_busy_cpus']:5.2f}"
        )
    print(
        "\nmachine busy before the run (the benchmark idle: other tenants): "
        f"{summary['idle_busy_cpus']:.2f} CPUs"
    )
    sp = summary["send_split"]
    print(
        f"\nstrom send() acks=1 none, 200,000 records, per record: send() calls "
        f"{sp['send_calls_us']:.2f} us (wall), calling thread CPU {sp['caller_thread_cpu_us']:.2f} "
        f"us, background loop thread CPU {sp['loop_thread_cpu_us']:.2f} us; to the last "
        f"acknowledgement {sp['total_us']:.2f} us"
    )
    if "send_profile" in summary:
        print("\ncProfile of the acks=1 send loop (this thread), top 10 by own time:")
        for row in summary["send_profile"]:
            print(
                f"  {row['own_s']:7.3f} s own {row['cumulative_s']:7.3f} s cum "
                f"{row['calls']:>9,} calls  {row['function']}"
            )
    print("\ntargets")
    for name, (met, text) in targets.items():
        state = "skipped" if met is None else "met    " if met else "MISSED "
        print(f"  {state} {name}: {text}")


# --------------------------------------------------------------------------- run


def idle_busy(seconds: float = 1.0) -> float:
    busy0, start = machine_busy()[0], time.perf_counter()
    time.sleep(seconds)
    return (machine_busy()[0] - busy0) / (time.perf_counter() - start)


def run(profile: Profile, quick: bool, keep: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="strom-bench-clients-"))
    summary: dict[str, Any] = {
        "quick": quick,
        "repeat": profile.repeat,
        "records": profile.records,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "e2e_seconds": profile.e2e_s,
    }
    raw = os.urandom(VALUE_SIZE * profile.records)
    values = [raw[i : i + VALUE_SIZE] for i in range(0, len(raw), VALUE_SIZE)]
    del raw
    try:
        summary["idle_busy_cpus"] = idle_busy()
        progress(f"starting a cluster and the peers in {workdir} ...")
        with running(workdir) as (gateway, storage, peers):
            summary["skipped"] = peers.skipped
            create_topics(gateway)
            progress(f"throughput, {profile.records:,} records per client ...")
            tp = throughput(gateway, storage, peers, profile, values)
            summary["throughput"] = tp
            progress("end-to-end latency ...")
            summary["e2e"] = end_to_end(gateway, peers, profile, workdir)
            targets = evaluate(tp)
            summary["send_split"] = send_split(gateway, values[:200_000])
            if targets["producer_vs_redis_benchmark"][0] is False:
                progress("profiling the send loop ...")
                summary["send_profile"] = send_loop_profile(gateway, values[:200_000])
        progress("done")
    except BaseException:
        keep = True
        print(f"benchmark failed; data and logs kept in {workdir}", file=sys.stderr)
        raise
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report(summary, targets)
    ratios: dict[str, float] = {}
    for peer in (REDIS_BENCH, REDIS_BENCH_1, REDIS_XADD, NATS_SYNC, NATS_ASYNC):
        if peer in tp:
            ratios[f"producer_acks1_vs_{peer}"] = tp[ACKS1.name]["best"] / tp[peer]["best"]
    if REDIS_READ in tp:
        ratios["consumer_vs_redis_xread"] = tp[STROM_READ]["best"] / tp[REDIS_READ]["best"]
    summary["ratios"] = ratios
    summary["targets_met"] = {name: met for name, (met, _) in targets.items()}
    summary["targets"] = {name: text for name, (_, text) in targets.items()}
    summary["target_values"] = TARGETS
    return summary


def main() -> None:
    parser = bench_arguments(__doc__, "fewer records; under a minute")
    parser.add_argument("--e2e-consumer", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.e2e_consumer is not None:
        spec = json.loads(args.e2e_consumer)
        Path(spec["out"]).write_bytes(e2e_consume(spec).tobytes())
        return
    print_summary(lambda: run(QUICK if args.quick else FULL, args.quick, args.keep))


if __name__ == "__main__":
    main()
