"""Benchmark of the producer's per-record hot path: ``send()`` one record at a time, against
Redis's own C client and against the floor of a Python call of the same shape.

One real local cluster on loopback (etcd, 2 controllers, 3 storage nodes, the gateway with
its Kafka listener, as ``strom cluster up`` starts it), data in a temporary directory, beside it a
``redis-server --save '' --appendonly no`` on a free port (Debian's ``redis-server`` and
``redis-tools``; without them the Redis rows are skipped with a line saying so). Every process
is stopped at the end, also on failure.

Records: 1,000,000 values of 100 random bytes (``--quick``: 200,000); keys ``key-000000`` ..
(10,000 distinct); headers ``[("trace", 16 bytes), ("source", b"bench")]``. The producer:
acks=1, linger 5 ms, 256 KiB batches, no compression, a fresh 6-partition topic (RF 1) per
case. Rates run from the first call to the last acknowledgement; CPU figures are the calling
thread's per call (the cost of the call, waits excluded) and the whole process's per record
(the background loop thread's work included).

* ``send`` (the C fast path, strom.producer._native), no key; key; key + 2 headers; the
  asyncio producer's ``await producer.send(...)`` in a loop; and the same four through the
  pure-Python path (the class's ``send``, what ``STROM_PRODUCER_FAST_PATH=0`` runs): the
  before/after of issue 23 in one run. ``send_many`` in calls of 10,000.
* per call: wall microseconds of the send loop (buffer_memory backpressure included), and
  the calling thread's CPU microseconds per call (waits excluded: the cost of the call).
* ``p99`` of the ``send`` call itself: each call timed with ``perf_counter_ns`` (200,000
  calls, ``--quick`` 50,000) with a buffer_memory that never fills (backpressure excluded).
* the floor: ``strom.producer.fast_path.append_floor(buf, topic, value)``, a C function of
  the same call shape that only appends the value to a bytearray, in the same loop; and the
  empty loop.
* where a call's time goes, without a cluster: each part of the pure-Python path alone
  (``_try_send``, ``Accumulator.append``, the record writer, the clock, ``RecordFuture``,
  murmur2) and the C path, CPU microseconds per call.
* confluent-kafka (librdkafka, a C client called from Python) ``produce()`` per record, value
  only and key + 2 headers, through the gateway's Kafka listener, the same producer settings;
  its caller CPU per call beside ``send``'s.
* Redis: ``redis-benchmark XADD -P 1000`` with 50 connections (its default) and with one,
  a 100-byte field; redis-py (hiredis) ``XADD`` pipelined 1,000 per round trip.

Each figure is the best of 3 repetitions (``--quick``: 2), interleaved; the spread (worst
over best) and how busy the machine was (other tenants included) are reported as the noise.
The last line is ``SUMMARY {json}``.

    .venv/bin/python bench/producer_send.py            # full run, about 5 minutes
    .venv/bin/python bench/producer_send.py --quick    # about a minute
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import csv
import gc
import io
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from benchkit import (
    bench_arguments,
    free_port,
    local_cluster_spec,
    print_summary,
    progress,
    work_dir,
)
from replication import poll_until
from storage import VALUE_SIZE, machine_busy, tcp_open

import strom.aio
from strom import Admin, NewTopic, Producer
from strom.producer import fast_path
from strom_server.local.supervisor import ManagedProcess, Supervisor

PARTITIONS = 6
OPTIONS: dict[str, Any] = {
    "acks": 1,
    "linger_ms": 5,
    "batch_size": 256 * 1024,
    "compression_type": "none",
}
DISTINCT_KEYS = 10_000
HEADERS = [("trace", b"0123456789abcdef"), ("source", b"bench")]
SEND_MANY_CHUNK = 10_000
REDIS_PIPELINE = 1000
REDIS_BENCH_CONNECTIONS = (50, 1)
KAFKA_SHAPES = ("value", "key+headers")
INSTALL_HINT = "apt-get install redis-server redis-tools"


@dataclass(frozen=True)
class Profile:
    records: int
    repeat: int
    latency_calls: int
    redis_py_records: int
    breakdown_calls: int


FULL = Profile(
    records=1_000_000,
    repeat=3,
    latency_calls=200_000,
    redis_py_records=300_000,
    breakdown_calls=200_000,
)
QUICK = Profile(
    records=200_000,
    repeat=2,
    latency_calls=50_000,
    redis_py_records=100_000,
    breakdown_calls=50_000,
)


@dataclass(frozen=True)
class Case:
    shape: str  # "value", "key", "key+headers", "send_many"
    api: str  # "sync" or "asyncio"
    path: str  # "c" or "python"

    @property
    def name(self) -> str:
        api = "await send" if self.api == "asyncio" else "send"
        if self.shape == "send_many":
            return "send_many"
        return f"{api} {self.shape} ({self.path})"


CASES = [
    Case("value", "sync", "c"),
    Case("key", "sync", "c"),
    Case("key+headers", "sync", "c"),
    Case("value", "asyncio", "c"),
    Case("send_many", "sync", "c"),
    Case("value", "sync", "python"),
    Case("key", "sync", "python"),
    Case("key+headers", "sync", "python"),
    Case("value", "asyncio", "python"),
]


# --------------------------------------------------------------------------- the send loops


def loop_sync(send: Callable[..., Any], topic: str, shape: str, data: Data) -> None:
    if shape == "value":
        for value in data.values:
            send(topic, value)
    elif shape == "key":
        for key, value in zip(data.keys, data.values, strict=True):
            send(topic, value, key)
    else:
        headers = HEADERS
        for key, value in zip(data.keys, data.values, strict=True):
            send(topic, value, key, headers)


async def loop_async(send: Callable[..., Any], topic: str, shape: str, data: Data) -> None:
    if shape == "value":
        for value in data.values:
            await send(topic, value)
    elif shape == "key":
        for key, value in zip(data.keys, data.values, strict=True):
            await send(topic, value, key)
    else:
        headers = HEADERS
        for key, value in zip(data.keys, data.values, strict=True):
            await send(topic, value, key, headers)


@dataclass
class Data:
    values: list[bytes]
    keys: list[bytes]


@dataclass
class Run:
    """One timed run: seconds of the send loop, to the last acknowledgement, and the calling
    thread's CPU seconds in the loop."""

    loop_s: float
    total_s: float
    caller_cpu_s: float
    process_cpu_s: float


def warm(send: Callable[..., Any], topic: str) -> None:
    for p in range(PARTITIONS):  # metadata, producer id and connections before timing
        send(topic, b"warm-up", partition=p)


def run_sync(gateway: str, case: Case, topic: str, data: Data) -> Run:
    with Producer(gateway, **OPTIONS) as producer:
        send = producer.send if case.path == "c" else Producer.send.__get__(producer)
        warm(send, topic)
        producer.flush()
        gc.collect()
        t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        if case.shape == "send_many":
            values = data.values
            futures = [
                producer.send_many(topic, values[i : i + SEND_MANY_CHUNK])
                for i in range(0, len(values), SEND_MANY_CHUNK)
            ]
        else:
            loop_sync(send, topic, case.shape, data)
        t1, c1 = time.perf_counter(), time.thread_time()
        producer.flush()
        t2, p2 = time.perf_counter(), time.process_time()
        if case.shape == "send_many" and sum(f.result() for f in futures) != len(data.values):
            raise RuntimeError("send_many: not every record was acknowledged")
    return Run(t1 - t0, t2 - t0, c1 - c0, p2 - p0)


def run_async(gateway: str, case: Case, topic: str, data: Data) -> Run:
    async def main() -> Run:
        async with strom.aio.Producer(gateway, **OPTIONS) as producer:
            python_send = strom.aio.Producer.send.__get__(producer)
            send = producer.send if case.path == "c" else python_send
            for p in range(PARTITIONS):
                await send(topic, b"warm-up", partition=p)
            await producer.flush()
            gc.collect()
            t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
            await loop_async(send, topic, case.shape, data)
            t1, c1 = time.perf_counter(), time.thread_time()
            await producer.flush()
            t2, p2 = time.perf_counter(), time.process_time()
            return Run(t1 - t0, t2 - t0, c1 - c0, p2 - p0)

    return asyncio.run(main())


def send_latencies(gateway: str, topic: str, shape: str, data: Data) -> dict[str, float]:
    """Each send() call timed (ns), buffer_memory large enough never to fill: percentiles, us."""
    n = len(data.values)
    times = array.array("q", bytes(8 * n))
    ns = time.perf_counter_ns
    with Producer(gateway, **dict(OPTIONS, buffer_memory=1 << 30)) as producer:
        send = producer.send
        warm(send, topic)
        producer.flush()
        gc.collect()
        headers = HEADERS if shape == "key+headers" else None
        keys = data.keys if shape != "value" else [None] * n
        for i, (key, value) in enumerate(zip(keys, data.values, strict=True)):
            t = ns()
            send(topic, value, key, headers)
            times[i] = ns() - t
        producer.flush()
    overhead = min(_timer_overhead(ns) for _ in range(3))
    ordered = sorted(times)

    def pct(q: float) -> float:
        return max(0, ordered[min(n - 1, int(q * n))] - overhead) / 1e3

    return {
        "p50_us": pct(0.50),
        "p99_us": pct(0.99),
        "p999_us": pct(0.999),
        "max_us": (ordered[-1] - overhead) / 1e3,
        "timer_overhead_ns": overhead,
    }


def _timer_overhead(ns: Callable[[], int]) -> int:
    samples = []
    for _ in range(10_000):
        t = ns()
        samples.append(ns() - t)
    samples.sort()
    return samples[len(samples) // 2]


def floor(data: Data) -> dict[str, float]:
    """The floor of a call of send()'s shape: a C function that appends the value to a
    bytearray (and the empty loop), us per call, wall and CPU; best of 5."""
    append = fast_path.append_floor
    if append is None:
        return {}
    values, topic = data.values, "topic"
    best: dict[str, float] = {}
    for _ in range(5):
        buf = bytearray()
        gc.collect()
        t0, c0 = time.perf_counter(), time.thread_time()
        for value in values:
            append(buf, topic, value)
        t1, c1 = time.perf_counter(), time.thread_time()
        for value in values:  # noqa: B007 - the loop alone
            pass
        t2, c2 = time.perf_counter(), time.thread_time()
        for name, seconds in (
            ("append_us", t1 - t0),
            ("append_cpu_us", c1 - c0),
            ("empty_loop_us", t2 - t1),
            ("empty_loop_cpu_us", c2 - c1),
        ):
            us = seconds / len(values) * 1e6
            best[name] = min(best.get(name, us), us)
    return best


def breakdown(data: Data, calls: int) -> dict[str, float]:
    """Where a send() call's time goes, without a cluster: CPU us per call of each part of
    the pure-Python path (a never-started asyncio producer with the topic's metadata planted,
    its batches kept in memory) and of the C path, each part alone in the same loop; best
    of 3. The empty loop is included in every figure."""
    from strom.producer.partitioner import murmur2_partition, murmur2_partition_py

    values = data.values[:calls]
    keys = data.keys[: len(values)]
    n = len(values)

    def fresh() -> Any:
        p = strom.aio.Producer("127.0.0.1:1", **dict(OPTIONS, buffer_memory=1 << 30))
        p._cluster._topics["t"] = tuple(range(PARTITIONS))
        p._sticky.partition("t", PARTITIONS)
        return p

    def timed(body: Callable[[], None]) -> float:
        best = float("inf")
        for _ in range(3):
            gc.collect()
            c0 = time.thread_time()
            body()
            best = min(best, (time.thread_time() - c0) / n * 1e6)
        return best

    out: dict[str, float] = {}

    def empty() -> None:
        for value in values:  # noqa: B007 - the loop alone
            pass

    def python_send() -> None:
        send = fresh()._try_send
        for value in values:
            send("t", value, None, None, None, None, None)

    def python_send_keyed() -> None:
        send = fresh()._try_send
        headers = HEADERS
        for key, value in zip(keys, values, strict=True):
            send("t", value, key, headers, None, None, None)

    def accumulator_append() -> None:
        append = fresh()._acc.append
        for value in values:
            append("t", 0, 1_700_000_000_000, None, value, None, 112)

    def writer_append() -> None:
        p = fresh()
        batch, _ = p._acc.append("t", 0, 1, None, b"x", None, 13)
        append = batch.append
        for value in values:
            append(1_700_000_000_000, None, value, None)

    def wall_clock() -> None:
        clock = time.time
        for _ in values:
            int(clock() * 1000)

    def record_future() -> None:
        p = fresh()
        batch, _ = p._acc.append("t", 0, 1, None, b"x", None, 13)
        make = type(p._try_send("t", b"x", None, None, 0, 1, None))
        for i in range(n):
            make(batch, i, 1_700_000_000_000, -1, 100)

    def murmur_py() -> None:
        for key in keys:
            murmur2_partition_py(key, PARTITIONS)

    def murmur_c() -> None:
        for key in keys:
            murmur2_partition(key, PARTITIONS)

    def c_send() -> None:
        p = fresh()
        send = p._fast_send(None, awaitable=False)
        for value in values:
            send("t", value)

    def c_send_keyed() -> None:
        p = fresh()
        send = p._fast_send(None, awaitable=False)
        headers = HEADERS
        for key, value in zip(keys, values, strict=True):
            send("t", value, key, headers)

    parts: list[tuple[str, Callable[[], None]]] = [
        ("empty loop", empty),
        ("python: _try_send, no key (all below)", python_send),
        ("python: _try_send, key + 2 headers", python_send_keyed),
        ("python: Accumulator.append (lock, queue, batch)", accumulator_append),
        ("python: the record writer's append (C)", writer_append),
        ("python: int(time.time() * 1000)", wall_clock),
        ("python: RecordFuture(...)", record_future),
        ("python: murmur2_partition (pure)", murmur_py),
        ("c: murmur2_partition", murmur_c),
    ]
    if fast_path.IMPLEMENTATION == "c":
        parts += [("c: FastSend, no key", c_send), ("c: FastSend, key + 2 headers", c_send_keyed)]
    for name, body in parts:
        out[name] = timed(body)
    return out


# --------------------------------------------------------------------------- confluent-kafka


def kafka_produce(kafka: str, topic: str, shape: str, data: Data) -> Run:
    """librdkafka's ``produce()`` per record from Python, through the gateway's Kafka
    listener, with the same settings (acks=1, linger 5 ms, 256 KiB batches, no compression)
    and a queue that never fills."""
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka,
            "acks": 1,
            "linger.ms": OPTIONS["linger_ms"],
            "batch.size": OPTIONS["batch_size"],
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_097_151,
        }
    )
    for p in range(PARTITIONS):
        producer.produce(topic, b"warm-up", partition=p)
    if producer.flush(60):
        raise RuntimeError("confluent-kafka: the warm-up records were not delivered")
    produce = producer.produce
    gc.collect()
    t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    if shape == "value":
        for value in data.values:
            produce(topic, value)
    else:
        headers = HEADERS
        for key, value in zip(data.keys, data.values, strict=True):
            produce(topic, value, key, headers=headers)
    t1, c1 = time.perf_counter(), time.thread_time()
    if producer.flush(300):
        raise RuntimeError("confluent-kafka: records left undelivered")
    t2, p2 = time.perf_counter(), time.process_time()
    return Run(t1 - t0, t2 - t0, c1 - c0, p2 - p0)


def ends(gateway: str, topic: str) -> dict[Any, int]:
    from strom import Consumer, TopicPartition

    with Consumer(bootstrap_servers=gateway) as consumer:
        return consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])


# --------------------------------------------------------------------------- redis


@contextlib.contextmanager
def redis_server(workdir: Path, skipped: dict[str, str]) -> Iterator[int | None]:
    """A redis-server on a free port (None, with the reason in ``skipped``, when missing)."""
    missing = [b for b in ("redis-server", "redis-benchmark") if shutil.which(b) is None]
    try:
        import redis  # noqa: F401
    except ImportError:
        missing.append("the redis Python module (pip install -r requirements-dev.txt)")
    if missing:
        skipped["redis"] = f"{', '.join(missing)} not found (Debian: {INSTALL_HINT})"
        progress(f"SKIPPED Redis: {skipped['redis']}")
        yield None
        return
    port, data = free_port(), workdir / "redis"
    data.mkdir()
    process = ManagedProcess(
        name="redis",
        argv=[
            *("redis-server", "--save", "", "--appendonly", "no", "--dir", str(data)),
            *("--bind", "127.0.0.1", "--port", str(port)),
        ],
        log_path=workdir / "logs" / "redis.log",
        ready=partial(tcp_open, port),
    )
    try:
        process.start()
        process.wait_ready(30)
        yield port
    finally:
        with contextlib.suppress(Exception):
            process.stop(10.0)


def redis_benchmark(port: int, n: int, connections: int) -> float:
    """Records/s redis-benchmark reports for ``n`` XADDs of a 100-byte value, -P 1000."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(n)]
    argv += ["-c", str(connections), "-P", str(REDIS_PIPELINE), "--csv"]
    argv += ["XADD", "rb", "*", "v", "x" * VALUE_SIZE]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True).stdout
    rows = [row for row in csv.reader(io.StringIO(out)) if len(row) > 1]
    _redis(port).delete("rb")
    return float(rows[-1][1])


def _redis(port: int) -> Any:
    import redis

    return redis.Redis(host="127.0.0.1", port=port, protocol=2)


def redis_py_xadd(port: int, values: list[bytes]) -> float:
    """Records/s of redis-py XADD pipelined 1,000 per round trip."""
    client = _redis(port)
    client.delete("bench")
    pipe = client.pipeline(transaction=False)
    gc.collect()
    start = time.perf_counter()
    for i in range(0, len(values), REDIS_PIPELINE):
        for value in values[i : i + REDIS_PIPELINE]:
            pipe.xadd("bench", {"v": value})
        pipe.execute()
    elapsed = time.perf_counter() - start
    if client.xlen("bench") != len(values):
        raise RuntimeError("redis: the stream does not hold every record")
    client.delete("bench")
    client.close()
    return len(values) / elapsed


# --------------------------------------------------------------------------- the run


def create_topic(admin: Admin, topic: str) -> None:
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    poll_until(
        lambda: all(p.leader >= 0 for t in admin.describe_topics([topic]) for p in t.partitions),
        60,
        f"a leader for every partition of {topic}",
    )


def spread(values: list[float], best: float) -> float:
    """Worst over best (>= 1): the run-to-run noise of one figure."""
    worst = min(values) if best == max(values) else max(values)
    return max(worst / best, best / worst)


def run(profile: Profile, quick: bool, keep: bool) -> dict[str, Any]:
    raw = os.urandom(VALUE_SIZE * profile.records)
    data = Data(
        values=[raw[i : i + VALUE_SIZE] for i in range(0, len(raw), VALUE_SIZE)],
        keys=[b"key-%06d" % (i % DISTINCT_KEYS) for i in range(profile.records)],
    )
    del raw
    summary: dict[str, Any] = {
        "quick": quick,
        "records": profile.records,
        "repeat": profile.repeat,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "fast_path": fast_path.IMPLEMENTATION,
        "fast_path_reason": fast_path.REASON,
        "producer_options": OPTIONS,
        "skipped": {},
    }
    if fast_path.IMPLEMENTATION != "c":
        progress(f"NOTE: no C fast path ({fast_path.REASON}): both paths are the Python one")
    results: dict[str, dict[str, list[float]]] = {}

    def keep_figures(name: str, **figures: float) -> None:
        entry = results.setdefault(name, {})
        for key, value in figures.items():
            entry.setdefault(key, []).append(value)

    busy0, total0 = machine_busy()
    with work_dir("strom-bench-send-", keep) as workdir:
        progress("the floor: a C call of send()'s shape that only appends to a buffer ...")
        summary["floor"] = floor(data)
        progress("where a send() call's time goes (no cluster) ...")
        summary["breakdown_cpu_us"] = breakdown(data, profile.breakdown_calls)
        progress(f"starting a cluster and redis-server in {workdir} ...")
        spec = local_cluster_spec(workdir, storage_nodes=3, controllers=2)
        supervisor = Supervisor(spec.processes(), grace_s=30.0)
        try:
            supervisor.start_all(90.0)
            gateway = spec.gateway_address
            with (
                Admin(gateway, request_timeout_ms=30000) as admin,
                redis_server(workdir, summary["skipped"]) as redis_port,
            ):
                poll_until(lambda: len(admin.describe_cluster().brokers) == 3, 60, "3 nodes")
                for rep in range(profile.repeat):
                    for i, case in enumerate(CASES):
                        topic = f"send-{rep}-{i}"
                        create_topic(admin, topic)
                        runner = run_async if case.api == "asyncio" else run_sync
                        r = runner(gateway, case, topic, data)
                        n = profile.records
                        keep_figures(
                            case.name,
                            rate=n / r.total_s,
                            loop_us=r.loop_s / n * 1e6,
                            caller_cpu_us=r.caller_cpu_s / n * 1e6,
                            process_cpu_us=r.process_cpu_s / n * 1e6,
                        )
                    for shape in KAFKA_SHAPES:
                        topic = f"kafka-{rep}-{shape.replace('+', '-')}"
                        create_topic(admin, topic)
                        r = kafka_produce(spec.kafka_address, topic, shape, data)
                        keep_figures(
                            f"confluent-kafka produce {shape}",
                            rate=n / r.total_s,
                            loop_us=r.loop_s / n * 1e6,
                            caller_cpu_us=r.caller_cpu_s / n * 1e6,
                            process_cpu_us=r.process_cpu_s / n * 1e6,
                        )
                        written = sum(ends(gateway, topic).values()) - PARTITIONS
                        if written != n:
                            raise RuntimeError(f"confluent-kafka: {written} records, not {n}")
                    if redis_port is not None:
                        for c in REDIS_BENCH_CONNECTIONS:
                            rate = redis_benchmark(redis_port, profile.records, c)
                            keep_figures(f"redis-benchmark XADD -P 1000 -c {c}", rate=rate)
                        py_values = data.values[: profile.redis_py_records]
                        keep_figures(
                            "redis-py XADD pipelined", rate=redis_py_xadd(redis_port, py_values)
                        )
                    progress(
                        f"  repetition {rep + 1}/{profile.repeat}: "
                        + ", ".join(
                            f"{k} {v['rate'][-1] / 1e3:,.0f}k/s" for k, v in results.items()
                        )
                    )
                progress("latency of the send() call ...")
                few = Data(data.values[: profile.latency_calls], data.keys[: profile.latency_calls])
                latency: dict[str, Any] = {}
                for shape in ("value", "key+headers"):
                    topic = f"latency-{shape.replace('+', '-')}"
                    create_topic(admin, topic)
                    latency[shape] = send_latencies(gateway, topic, shape, few)
                summary["send_call_latency"] = latency
        finally:
            supervisor.stop_all()
        progress("done")
    busy1, total1 = machine_busy()
    summary["machine_busy_cpus"] = (busy1 - busy0) / (total1 - total0) * (os.cpu_count() or 1)
    table: dict[str, Any] = {}
    for name, figures in results.items():
        row: dict[str, Any] = {"rate": max(figures["rate"])}
        row["rate_spread"] = spread(figures["rate"], row["rate"])
        for key in ("loop_us", "caller_cpu_us", "process_cpu_us"):
            if key in figures:
                row[key] = min(figures[key])
        table[name] = row
    summary["results"] = table
    summary["ratios"] = ratios(table, summary.get("floor", {}))
    report(summary)
    return summary


def ratios(table: dict[str, Any], floor_figures: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for path in ("c", "python"):
        for shape in ("value", "key", "key+headers"):
            name = f"send {shape} ({path})"
            for c in REDIS_BENCH_CONNECTIONS:
                peer = table.get(f"redis-benchmark XADD -P 1000 -c {c}")
                if peer and name in table:
                    out[f"{name} / redis-benchmark -c {c}"] = table[name]["rate"] / peer["rate"]
        name = f"await send value ({path})"
        peer = table.get("redis-benchmark XADD -P 1000 -c 50")
        if peer and name in table:
            out[f"{name} / redis-benchmark -c 50"] = table[name]["rate"] / peer["rate"]
    for shape in ("value", "key", "key+headers"):
        c_row, py_row = table.get(f"send {shape} (c)"), table.get(f"send {shape} (python)")
        if c_row and py_row:
            out[f"send {shape}: c / python rate"] = c_row["rate"] / py_row["rate"]
            out[f"send {shape}: python / c caller CPU"] = (
                py_row["caller_cpu_us"] / c_row["caller_cpu_us"]
            )
    for shape in KAFKA_SHAPES:
        peer = table.get(f"confluent-kafka produce {shape}")
        c_row = table.get(f"send {shape} (c)")
        if peer and c_row:
            out[f"send {shape} (c) / confluent-kafka produce"] = c_row["rate"] / peer["rate"]
            out[f"send {shape} (c): confluent-kafka produce() caller CPU / send's"] = (
                peer["caller_cpu_us"] / c_row["caller_cpu_us"]
            )
    c_row = table.get("send value (c)")
    if c_row and floor_figures:
        out["floor / send value call (CPU)"] = (
            floor_figures["append_cpu_us"] / c_row["caller_cpu_us"]
        )
        out["floor / send value call (wall)"] = floor_figures["append_us"] / c_row["loop_us"]
    peer = table.get("redis-py XADD pipelined")
    if c_row and peer:
        out["send value (c) / redis-py XADD pipelined"] = c_row["rate"] / peer["rate"]
    return out


def report(summary: dict[str, Any]) -> None:
    print()
    print(
        f"{'client':44} {'rate/s':>11} {'spread':>7} {'loop us':>8} {'CPU us':>7} {'proc CPU':>8}"
    )
    for name, row in summary["results"].items():
        loop = f"{row['loop_us']:8.3f}" if "loop_us" in row else " " * 8
        cpu = f"{row['caller_cpu_us']:7.3f}" if "caller_cpu_us" in row else " " * 7
        proc = f"{row['process_cpu_us']:8.3f}" if "process_cpu_us" in row else " " * 8
        print(f"{name:44} {row['rate']:11,.0f} {row['rate_spread']:7.2f} {loop} {cpu} {proc}")
    print("where a send() call's time goes, CPU us per call (each part alone, loop included):")
    for name, us in summary["breakdown_cpu_us"].items():
        print(f"  {name:52} {us:7.3f}")
    fl = summary.get("floor")
    if fl:
        print(
            f"floor: append_floor {fl['append_us']:.3f} us wall, {fl['append_cpu_us']:.3f} us CPU;"
            f" empty loop {fl['empty_loop_us']:.3f} us"
        )
    for shape, lat in summary.get("send_call_latency", {}).items():
        print(
            f"send() call latency ({shape}): p50 {lat['p50_us']:.2f} us, p99 {lat['p99_us']:.2f}"
            f" us, p99.9 {lat['p999_us']:.2f} us, max {lat['max_us']:.0f} us"
        )
    for name, value in summary["ratios"].items():
        print(f"  {name}: {value:.2f}")
    print(f"machine busy: {summary['machine_busy_cpus']:.2f} of {summary['cpus']} CPUs")
    print()


def main() -> None:
    parser = bench_arguments(__doc__, "fewer records; about a minute")
    args = parser.parse_args()
    print_summary(lambda: run(QUICK if args.quick else FULL, args.quick, args.keep))


if __name__ == "__main__":
    main()
