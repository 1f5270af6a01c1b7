"""Benchmark of replication: produce throughput by replication factor and acks, and end-to-end
latency from send to consume, against baselines measured in the same run.

One real local cluster on loopback, started as ``strom cluster up`` starts it
(``strom_server.local.cluster.LocalClusterSpec``: etcd, 2 controllers, 3 storage nodes with
default settings, the gateway), data in a temporary directory, every process stopped at the end.
Topics of 6 partitions are created through the gateway (``strom.Admin``): replication factor 1,
and replication factor 3 with ``min.insync.replicas=2``; their leaders come from
``describe_topics`` (2 per node) and every request goes straight to a partition's leader.

* produce throughput: 100-byte random values in uncompressed v2 batches of at most 16 KiB,
  encoded and wrapped in serialized ProduceRequests before timing (4 distinct batches per
  partition, sent again and again), one batch per unary ``Produce``, requests dealt round robin
  over the 6 partitions with 24 in flight in all (8 per leader node on average). Three cases:
  RF 1 acks=1 (the baseline), RF 3 acks=1, RF 3 acks=all. Best of 5 repetitions (``--quick``:
  3), the cases interleaved within each repetition. Also the CPU seconds the three storage nodes
  spent per MB produced (/proc/PID/stat, all repetitions), where replication's cost shows
  without the noise of other tenants of the machine.
* end-to-end latency: a steady 5,000 records/s sent as 1,000 batches/s of 5 records (each batch
  due at t0 + i/1000 regardless of earlier ones, partitions round robin; every record's value
  carries ``time.perf_counter_ns()`` taken when its send is called; like a producer with a
  full buffer, a send waits while 500 are unanswered, and the rate achieved is reported). A
  consumer in another process (this file, ``--consumer SPEC``) long-polls ``Fetch`` on each
  leader node for that node's partitions (max_wait_ms 500, min_bytes 1) and takes the latency
  of every record the moment its response arrives (``perf_counter`` is CLOCK_MONOTONIC: one
  clock for both processes). Consumers see records only below the high watermark, so with RF 3
  this includes the followers' fetch. RF 3 acks=all is measured against RF 1 acks=1 (same
  sends, same consumer, no replication) and against a raw gRPC relay (this file,
  ``--relay-server PORT``: grpc.aio, generic handlers, no interceptors; ``Send`` keeps the
  same serialized ProduceRequests in a list in memory, ``Poll`` long-polls like Fetch and
  returns them; one process instead of three nodes), the floor of any Python gRPC service on
  this machine. Every case also runs with the same 5,000 records/s as 100 batches/s of 50
  records (a producer lingering 10 ms: a tenth of the requests); the full run adds RF 3
  acks=1. 20 s per case, as 2 interleaved rounds of 10 s (``--quick``: one round of 5 s);
  percentiles over every record of the rounds. Also the produce acknowledgement latency of the
  same sends, and the CPU share of the server (storage nodes or relay), this process, the
  consumer and the whole machine while pacing (noise from other tenants).

MB = 10^6 bytes of record batches. The nodes keep their defaults: no fsync per append (Kafka's
log.flush.* defaults), durability from replication. The last line is ``SUMMARY {json}``.

    .venv/bin/python bench/replication.py            # full run, about 4 minutes
    .venv/bin/python bench/replication.py --quick    # under a minute
    .venv/bin/python bench/replication.py --keep     # keep data and logs (kept on failure)
"""

from __future__ import annotations

import argparse
import array
import asyncio
import contextlib
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

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
from storage import (
    GRPC_OPTIONS,
    KIB,
    MIB,
    VALUE_SIZE,
    cpu_seconds,
    machine_busy,
    make_batches,
    paced,
    quantile,
    run_concurrent,
    tcp_open,
)

from strom import Admin, NewTopic
from strom.errors import for_code
from strom.protocol.v1 import common_pb2, storage_pb2
from strom.records import encode_batch, iter_records
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.supervisor import ManagedProcess, Supervisor

NODES = 3
PARTITIONS = 6
BATCH_LIMIT = 16 * KIB
DISTINCT_BATCHES = 4
CONCURRENCY = 24
PRODUCE_TIMEOUT_MS = 30_000
E2E_RECORDS_PER_S = 5000
E2E_MAX_IN_FLIGHT = 500
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = MIB
PRODUCE_METHOD = "/strom.protocol.v1.StorageNode/Produce"
FETCH_METHOD = "/strom.protocol.v1.StorageNode/Fetch"
LIST_OFFSETS_METHOD = "/strom.protocol.v1.StorageNode/ListOffsets"
RELAY_SERVICE = "strombench.Relay"

T = TypeVar("T")
THIS_FILE = str(Path(__file__).resolve())
TARGETS = {"rf3_all_vs_rf1": 0.5, "e2e_p99_ms": 10.0, "e2e_p99_ms_100bps": 10.0}


@dataclass(frozen=True)
class Case:
    """One way of producing: a topic (by replication factor), an acks setting and, for the
    end-to-end runs, how many batches per second carry the 5,000 records/s."""

    rf: int
    acks: int
    batches_per_s: int = 1000

    @property
    def name(self) -> str:
        name = (
            "grpc-relay"
            if self.rf == 0
            else f"rf{self.rf}.acks{'all' if self.acks == -1 else self.acks}"
        )
        return name if self.batches_per_s == 1000 else f"{name}.{self.batches_per_s}bps"

    @property
    def records_per_batch(self) -> int:
        return E2E_RECORDS_PER_S // self.batches_per_s


RF1, RF3_ACKS1, RF3_ALL = Case(1, 1), Case(3, 1), Case(3, -1)
RELAY = Case(0, 0)  # no storage: the raw gRPC relay (replication factor "0")
# The same 5,000 records/s in the batches a producer lingering 10 ms would send.
RELAY_100, RF1_100, RF3_ALL_100 = Case(0, 0, 100), Case(1, 1, 100), Case(3, -1, 100)
THROUGHPUT_CASES = (RF1, RF3_ACKS1, RF3_ALL)


@dataclass(frozen=True)
class Profile:
    repeat: int
    volume: int  # bytes produced per repetition and case
    e2e_rounds: int
    e2e_round_s: float
    e2e_cases: tuple[Case, ...]


FULL = Profile(
    repeat=5,
    volume=32 * MIB,
    e2e_rounds=2,
    e2e_round_s=10.0,
    e2e_cases=(RELAY, RF1, RF3_ALL, RF3_ACKS1, RELAY_100, RF1_100, RF3_ALL_100),
)
QUICK = Profile(
    repeat=3,
    volume=8 * MIB,
    e2e_rounds=1,
    e2e_round_s=5.0,
    e2e_cases=(RELAY, RF1, RF3_ALL, RELAY_100, RF1_100, RF3_ALL_100),
)


# --------------------------------------------------------------------------- the cluster


def cluster_spec(workdir: Path) -> LocalClusterSpec:
    return LocalClusterSpec(
        data_dir=workdir,
        etcd_client_port=free_port(),
        etcd_peer_port=free_port(),
        base_port=free_base_port(1 + NODES + 2),
        storage_nodes=NODES,
        controllers=2,
    )


def poll_until(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Call ``check`` every 50 ms (errors count as not yet) until it returns a truthy value."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(Exception):
            value = check()
            if value:
                return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


def create_topics(admin: Admin) -> dict[int, dict[int, str]]:
    """One 6-partition topic per replication factor; by RF, each partition's leader address,
    once every partition has a leader and a full ISR."""
    poll_until(
        lambda: len(admin.describe_cluster().brokers) == NODES, 60, "every storage node registered"
    )
    admin.create_topics(
        [
            NewTopic("rf1", PARTITIONS, 1),
            NewTopic("rf3", PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"}),
        ]
    )
    addresses = {b.node_id: b.address for b in admin.describe_cluster().brokers}

    def leaders() -> dict[int, dict[int, str]] | None:
        found: dict[int, dict[int, str]] = {}
        for topic in admin.describe_topics(["rf1", "rf3"]):
            rf = int(topic.name[2:])
            for p in topic.partitions:
                if p.leader not in addresses or len(p.isr) != rf:
                    return None
            found[rf] = {p.partition: addresses[p.leader] for p in topic.partitions}
        return found

    return poll_until(leaders, 60, "a leader and a full ISR for every partition")


def isr_health(admin: Admin) -> dict[str, Any]:
    """Partitions of the RF-3 topic whose ISR is not full, and its leaders' placement."""
    (topic,) = admin.describe_topics(["rf3"])
    return {
        "under_replicated": sum(len(p.isr) < len(p.replicas) for p in topic.partitions),
        "leaders": sorted(p.leader for p in topic.partitions),
    }


# --------------------------------------------------------------------------- the producer


class Producer:
    """Unary Produce calls on one grpc.aio channel per leader node, requests sent as bytes."""

    def __init__(self, leaders: dict[int, dict[int, str]], relay: str) -> None:
        self.leaders = {**leaders, RELAY.rf: dict.fromkeys(range(PARTITIONS), relay)}
        self.channels = {
            address: grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
            for by_partition in self.leaders.values()
            for address in by_partition.values()
        }
        self._relay = self.channels[relay].unary_unary(f"/{RELAY_SERVICE}/Send")
        self._calls = {
            address: channel.unary_unary(
                PRODUCE_METHOD, response_deserializer=storage_pb2.ProduceResponse.FromString
            )
            for address, channel in self.channels.items()
        }

    @staticmethod
    def request(rf: int, partition: int, acks: int, records: bytes) -> bytes:
        return storage_pb2.ProduceRequest(
            acks=acks,
            timeout_ms=PRODUCE_TIMEOUT_MS,
            partitions=[
                storage_pb2.ProducePartitionData(
                    topic=f"rf{rf}", partition=partition, records=records
                )
            ],
        ).SerializeToString()

    async def send(self, rf: int, partition: int, serialized: bytes) -> None:
        if rf == RELAY.rf:
            await self._relay(serialized)
            return
        response = await self._calls[self.leaders[rf][partition]](serialized)
        result = response.partitions[0]
        if result.error_code:
            message = f"produce to rf{rf}-{partition}: {result.error_message}"
            raise for_code(result.error_code, message)

    async def send_until_accepted(self, rf: int, partition: int, serialized: bytes) -> None:
        """Retry retriable errors for up to 30 s (a new leader learns its role from metadata)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                return await self.send(rf, partition, serialized)
            except Exception as e:
                if not getattr(e, "retriable", False) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()


class Usage:
    """CPU used from construction on, in CPUs (seconds per wall second): the server processes,
    this process, and the whole machine (other tenants included)."""

    def __init__(self, server_pids: list[int]) -> None:
        self.pids = server_pids
        self.start = self._sample()

    def _sample(self) -> tuple[float, float, float, float]:
        server = sum(map(cpu_seconds, self.pids))
        return time.perf_counter(), server, time.process_time(), machine_busy()[0]

    def shares(self) -> dict[str, float]:
        now = self._sample()
        wall = now[0] - self.start[0]
        server, client, machine = (
            (b - a) / wall for a, b in zip(self.start[1:], now[1:], strict=True)
        )
        return {"server_cpus": server, "client_cpus": client, "machine_busy_cpus": machine}


# --------------------------------------------------------------------------- throughput


async def throughput_cases(
    producer: Producer, profile: Profile, storage_pids: list[int]
) -> dict[str, Any]:
    batches, per_batch = make_batches(BATCH_LIMIT, DISTINCT_BATCHES)
    batch_bytes = len(batches[0])
    n_requests = profile.volume // batch_bytes
    calls = {}
    for case in THROUGHPUT_CASES:
        requests = [
            [producer.request(case.rf, p, case.acks, b) for b in batches] for p in range(PARTITIONS)
        ]

        async def call(i: int, rf: int = case.rf, requests: list[list[bytes]] = requests) -> None:
            p = i % PARTITIONS
            await producer.send(rf, p, requests[p][(i // PARTITIONS) % DISTINCT_BATCHES])

        calls[case.name] = call
        await run_concurrent(CONCURRENCY * 2, CONCURRENCY, call)  # warm-up

    times: dict[str, list[float]] = {case.name: [] for case in THROUGHPUT_CASES}
    cpu = {case.name: {"storage_s": 0.0, "client_s": 0.0} for case in THROUGHPUT_CASES}
    for rep in range(profile.repeat):
        for case in THROUGHPUT_CASES:
            server0, client0 = sum(map(cpu_seconds, storage_pids)), time.process_time()
            times[case.name].append(await run_concurrent(n_requests, CONCURRENCY, calls[case.name]))
            cpu[case.name]["storage_s"] += sum(map(cpu_seconds, storage_pids)) - server0
            cpu[case.name]["client_s"] += time.process_time() - client0
        progress(
            f"  repetition {rep + 1}/{profile.repeat}: "
            + ", ".join(
                f"{name} {n_requests * batch_bytes / t[-1] / 1e6:.1f} MB/s"
                for name, t in times.items()
            )
        )

    volume_mb = n_requests * batch_bytes / 1e6
    results: dict[str, Any] = {
        "batch_bytes": batch_bytes,
        "records_per_batch": per_batch,
        "requests_per_repetition": n_requests,
    }
    for name, elapsed in times.items():
        total_mb = volume_mb * profile.repeat
        results[name] = {
            "mbps": volume_mb / min(elapsed),
            "records_per_s": n_requests * per_batch / min(elapsed),
            "mbps_all_runs": [volume_mb / t for t in elapsed],
            "storage_cpu_s_per_mb": cpu[name]["storage_s"] / total_mb,
            "client_cpu_s_per_mb": cpu[name]["client_s"] / total_mb,
        }
    rf1, rf3_1, rf3_all = (results[c.name] for c in THROUGHPUT_CASES)
    results["rf3_all_vs_rf1"] = rf3_all["mbps"] / rf1["mbps"]
    results["rf3_acks1_vs_rf1"] = rf3_1["mbps"] / rf1["mbps"]
    results["rf3_all_vs_acks1"] = rf3_all["mbps"] / rf3_1["mbps"]
    # Each repetition's cases ran back to back: their ratio moves less with other tenants' load.
    results["rf3_all_vs_rf1_paired_median"] = statistics.median(
        a / b for a, b in zip(rf3_all["mbps_all_runs"], rf1["mbps_all_runs"], strict=True)
    )
    results["cpu_per_mb_rf3_all_vs_rf1"] = (
        rf3_all["storage_cpu_s_per_mb"] / rf1["storage_cpu_s_per_mb"]
    )
    return results


# --------------------------------------------------------------------------- end to end


def e2e_value(tag: bytes, sent_ns: int) -> bytes:
    """A record value: the run's tag, the send time (ns, big-endian), padding to 100 bytes."""
    return tag + sent_ns.to_bytes(8, "big") + bytes(VALUE_SIZE - len(tag) - 8)


async def e2e_run(
    producer: Producer, case: Case, duration_s: float, workdir: Path, server_pids: list[int]
) -> tuple[dict[str, Any], array.array[int]]:
    """One paced run with a consumer process; (figures, latencies in ns)."""
    tag = uuid.uuid4().bytes[:8]
    counter = itertools.count()
    # A producer's bounded buffer: an overloaded cluster makes sends wait (the achieved rate
    # shows it) instead of queueing without limit.
    backlog = asyncio.Semaphore(E2E_MAX_IN_FLIGHT)
    sent_at: list[float] = []

    async def send() -> None:
        sent_ns = time.perf_counter_ns()  # the application's send: buffer waits count
        async with backlog:
            sent_at.append(time.perf_counter())
            i = next(counter)
            partition = i % PARTITIONS
            value = e2e_value(tag, sent_ns)
            now_ms = int(time.time() * 1000)
            batch = encode_batch([(now_ms, None, value)] * case.records_per_batch)
            request = producer.request(case.rf, partition, case.acks, batch)
            await producer.send(case.rf, partition, request)

    await paced(send, case.batches_per_s, 0.3)  # warm-up, before the consumer starts reading
    n_batches = int(case.batches_per_s * duration_s)
    out = workdir / f"latencies-{tag.hex()}.bin"
    spec: dict[str, Any] = {
        "topic": f"rf{case.rf}",
        "relay": case.rf == RELAY.rf,
        "leaders": producer.leaders[case.rf],
        "tag": tag.hex(),
        "expected": n_batches * case.records_per_batch,
        "timeout_s": duration_s + 30,
        "out": str(out),
    }
    consumer = await asyncio.create_subprocess_exec(
        sys.executable, THIS_FILE, "--consumer", json.dumps(spec), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert consumer.stdout is not None
        line = await consumer.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"the consumer did not start (said {line!r})")
        usage = Usage(server_pids)
        sent_at.clear()
        acks = await paced(send, case.batches_per_s, duration_s)
        cpu = usage.shares()
        rest, _ = await asyncio.wait_for(consumer.communicate(), spec["timeout_s"])
        if consumer.returncode != 0:
            raise RuntimeError(f"the consumer failed with exit code {consumer.returncode}")
    finally:
        if consumer.returncode is None:
            consumer.kill()
            await consumer.wait()
    latencies: array.array[int] = array.array("q")
    latencies.frombytes(out.read_bytes())
    out.unlink()
    figures = {
        "ack_p50_ms": acks["p50_ms"],
        "ack_p99_ms": acks["p99_ms"],
        "ack_p99_from_schedule_ms": acks["p99_from_schedule_ms"],
        "achieved_batches_per_s": (len(sent_at) - 1) / (sent_at[-1] - sent_at[0]),
        **cpu,
        "consumer": json.loads(rest),
    }
    return figures, latencies


def latency_figures(latencies_ns: list[int]) -> dict[str, float]:
    ms = sorted(ns / 1e6 for ns in latencies_ns)
    return {
        "p50_ms": quantile(ms, 0.50),
        "p99_ms": quantile(ms, 0.99),
        "p999_ms": quantile(ms, 0.999),
        "max_ms": ms[-1],
        "records": len(ms),
    }


def server_of(case: Case) -> str:
    """Which processes serve a case: the relay, or the storage nodes."""
    return "relay" if case.rf == RELAY.rf else "storage-"


async def e2e_cases(
    producer: Producer, profile: Profile, workdir: Path, pids: dict[str, list[int]]
) -> dict[str, Any]:
    pooled: dict[str, list[int]] = {case.name: [] for case in profile.e2e_cases}
    rounds: dict[str, list[dict[str, Any]]] = {case.name: [] for case in profile.e2e_cases}
    for r in range(profile.e2e_rounds):
        for case in profile.e2e_cases:
            figures, latencies = await e2e_run(
                producer, case, profile.e2e_round_s, workdir, pids[server_of(case)]
            )
            figures.update(latency_figures(list(latencies)))
            rounds[case.name].append(figures)
            pooled[case.name].extend(latencies)
            progress(
                f"  round {r + 1}/{profile.e2e_rounds} {case.name}: e2e p50 "
                f"{figures['p50_ms']:.2f} p99 {figures['p99_ms']:.2f} p99.9 "
                f"{figures['p999_ms']:.2f} ms; ack p99 {figures['ack_p99_ms']:.2f} ms; machine "
                f"{figures['machine_busy_cpus']:.2f} CPUs busy (server "
                f"{figures['server_cpus']:.2f}, producer {figures['client_cpus']:.2f}, consumer "
                f"{figures['consumer']['cpu_s'] / profile.e2e_round_s:.2f})"
            )
    results: dict[str, Any] = {
        "records_per_s": E2E_RECORDS_PER_S,
        "seconds": profile.e2e_rounds * profile.e2e_round_s,
    }
    for case in profile.e2e_cases:
        runs = rounds[case.name]
        server_cpus = sum(run["server_cpus"] for run in runs) / len(runs)
        results[case.name] = {
            "batches_per_s": case.batches_per_s,
            "records_per_batch": case.records_per_batch,
            **latency_figures(pooled[case.name]),
            "ack_p50_ms": max(run["ack_p50_ms"] for run in runs),
            "ack_p99_ms": max(run["ack_p99_ms"] for run in runs),
            "achieved_batches_per_s": min(run["achieved_batches_per_s"] for run in runs),
            "server_cpus": server_cpus,
            "server_cpu_ms_per_batch": server_cpus / case.batches_per_s * 1e3,
            "rounds": runs,
        }
    rf3, rf1, relay = results[RF3_ALL.name], results[RF1.name], results[RELAY.name]
    for name, base in (("rf1", rf1), ("relay", relay)):
        results[f"rf3_all_vs_{name}_p50"] = rf3["p50_ms"] / base["p50_ms"]
        results[f"rf3_all_vs_{name}_p99"] = rf3["p99_ms"] / base["p99_ms"]
    return results


# --------------------------------------------------------------------------- relay server


def run_relay_server(port: int) -> None:
    """The raw gRPC baseline: grpc.aio, generic handlers, bytes in and out, no interceptors.

    ``Send`` appends a message to a list in memory; ``Poll`` (8 bytes: an index, -1 for "the
    end now") long-polls like Fetch and answers the next index and every message from the
    given one, each with a 4-byte length."""

    async def serve() -> None:
        messages: list[bytes] = []
        loop = asyncio.get_running_loop()
        grew = [loop.create_future()]

        async def send(request: bytes, context: Any) -> bytes:
            messages.append(request)
            grew[0], woken = loop.create_future(), grew[0]
            woken.set_result(None)
            return b""

        async def poll(request: bytes, context: Any) -> bytes:
            start = int.from_bytes(request, "big", signed=True)
            if start >= len(messages):  # -1 answers at once
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(grew[0]), FETCH_MAX_WAIT_MS / 1000)
            frames = messages[start:] if start >= 0 else []
            framed = (len(m).to_bytes(4, "big") + m for m in frames)
            return len(messages).to_bytes(8, "big") + b"".join(framed)

        server = grpc.aio.server(options=GRPC_OPTIONS)
        handlers = {
            "Send": grpc.unary_unary_rpc_method_handler(send),
            "Poll": grpc.unary_unary_rpc_method_handler(poll),
        }
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(RELAY_SERVICE, handlers)]
        )
        await serve_until_signalled(server, port)

    asyncio.run(serve())


# --------------------------------------------------------------------------- the consumer


async def consume(spec: dict[str, Any]) -> tuple[dict[str, Any], array.array[int]]:
    """Long-poll every leader from the high watermark until ``expected`` tagged records came;
    (figures, each record's latency in ns)."""
    topic, tag, expected = spec["topic"], bytes.fromhex(spec["tag"]), spec["expected"]
    by_node: dict[str, list[int]] = {}
    for partition, address in spec["leaders"].items():
        by_node.setdefault(address, []).append(int(partition))
    channels = [grpc.aio.insecure_channel(a, options=GRPC_OPTIONS) for a in by_node]
    latencies: array.array[int] = array.array("q")
    stats: dict[str, float] = {"fetches": 0, "empty_fetches": 0, "other_records": 0}
    done = asyncio.Event()

    async def positions(channel: grpc.aio.Channel, partitions: list[int]) -> dict[int, int]:
        call = channel.unary_unary(
            LIST_OFFSETS_METHOD,
            request_serializer=storage_pb2.ListOffsetsRequest.SerializeToString,
            response_deserializer=storage_pb2.ListOffsetsResponse.FromString,
        )
        response = await call(
            storage_pb2.ListOffsetsRequest(
                replica_id=-1,
                partitions=[
                    storage_pb2.ListOffsetsPartition(
                        topic=topic, partition=p, spec=common_pb2.OffsetSpec.LATEST
                    )
                    for p in partitions
                ],
            )
        )
        for result in response.partitions:
            if result.error_code:
                raise for_code(result.error_code, result.error_message)
        return {r.partition: r.offset for r in response.partitions}

    def take(records: bytes, received_ns: int, position: int = -1) -> int:
        """Latencies of the tagged records at or after ``position``; the next position."""
        for record in iter_records(records):
            if record.offset < position:
                continue  # a fetch returns a whole batch, from its base offset
            position = record.offset + 1
            value = record.value or b""
            if value[:8] == tag:
                latencies.append(received_ns - int.from_bytes(value[8:16], "big"))
            else:
                stats["other_records"] += 1
        if len(latencies) >= expected:
            done.set()
        return position

    async def relay_loop(channel: grpc.aio.Channel, position: int) -> None:
        poll = channel.unary_unary(f"/{RELAY_SERVICE}/Poll")
        while not done.is_set():
            response = await poll(position.to_bytes(8, "big", signed=True))
            now = time.perf_counter_ns()
            stats["fetches"] += 1
            position, pos = int.from_bytes(response[:8], "big"), 8
            stats["empty_fetches"] += pos == len(response)
            while pos < len(response):
                size = int.from_bytes(response[pos : pos + 4], "big")
                request = storage_pb2.ProduceRequest.FromString(response[pos + 4 : pos + 4 + size])
                take(request.partitions[0].records, now)
                pos += 4 + size

    async def fetch_loop(channel: grpc.aio.Channel, position: dict[int, int]) -> None:
        call = channel.unary_unary(
            FETCH_METHOD,
            request_serializer=storage_pb2.FetchRequest.SerializeToString,
            response_deserializer=storage_pb2.FetchResponse.FromString,
        )
        while not done.is_set():
            response = await call(
                storage_pb2.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=FETCH_MAX_WAIT_MS,
                    min_bytes=1,
                    max_bytes=FETCH_MAX_BYTES,
                    partitions=[
                        storage_pb2.FetchPartition(
                            topic=topic,
                            partition=p,
                            fetch_offset=offset,
                            current_leader_epoch=-1,
                            partition_max_bytes=FETCH_MAX_BYTES,
                        )
                        for p, offset in position.items()
                    ],
                )
            )
            now = time.perf_counter_ns()
            stats["fetches"] += 1
            stats["empty_fetches"] += not any(r.records for r in response.partitions)
            for result in response.partitions:
                if result.error_code:
                    raise for_code(result.error_code, result.error_message)
                position[result.partition] = take(result.records, now, position[result.partition])

    try:
        if spec["relay"]:
            (channel,) = channels
            end = await channel.unary_unary(f"/{RELAY_SERVICE}/Poll")(
                (-1).to_bytes(8, "big", signed=True)
            )
            loop_coros = [relay_loop(channel, int.from_bytes(end[:8], "big"))]
        else:
            starts = await asyncio.gather(
                *(positions(c, parts) for c, parts in zip(channels, by_node.values(), strict=True))
            )
            loop_coros = [fetch_loop(c, start) for c, start in zip(channels, starts, strict=True)]
        print("ready", flush=True)
        cpu0 = time.process_time()
        loops = [asyncio.ensure_future(coro) for coro in loop_coros]
        waiter = asyncio.ensure_future(done.wait())
        finished, _ = await asyncio.wait(
            [waiter, *loops], timeout=spec["timeout_s"], return_when=asyncio.FIRST_COMPLETED
        )
        for task in (waiter, *loops):
            task.cancel()
        for task in finished:
            if task is not waiter:
                task.result()  # a fetch loop ended: raise its error
        if len(latencies) < expected:
            raise RuntimeError(f"consumed {len(latencies)} of {expected} records in time")
        stats["cpu_s"] = time.process_time() - cpu0
    finally:
        for channel in channels:
            await channel.close()
    return stats, latencies


# --------------------------------------------------------------------------- report


def evaluate(summary: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    ratio = summary["throughput"]["rf3_all_vs_rf1"]
    p99 = summary["e2e"][RF3_ALL.name]["p99_ms"]
    sent = summary["e2e"][RF3_ALL.name]["achieved_batches_per_s"]
    sustained = sent >= 0.95 * RF3_ALL.batches_per_s
    p99_100 = summary["e2e"][RF3_ALL_100.name]["p99_ms"]
    return {
        "rf3_all_vs_rf1": (
            ratio >= TARGETS["rf3_all_vs_rf1"],
            f"RF 3 acks=all produce throughput >= {TARGETS['rf3_all_vs_rf1']:.2f} of RF 1 "
            f"(best of each: {ratio:.2f}; median of paired repetitions: "
            f"{summary['throughput']['rf3_all_vs_rf1_paired_median']:.2f})",
        ),
        "e2e_p99_ms": (
            p99 < TARGETS["e2e_p99_ms"] and sustained,
            f"p99 end-to-end latency, RF 3 acks=all, 5,000 records/s in 1,000 batches/s < "
            f"{TARGETS['e2e_p99_ms']:.0f} ms ({p99:.2f} ms"
            + ("" if sustained else f"; rate not sustained: {sent:,.0f} batches/s")
            + ")",
        ),
        "e2e_p99_ms_100bps": (
            p99_100 < TARGETS["e2e_p99_ms_100bps"],
            f"p99 end-to-end latency, RF 3 acks=all, 5,000 records/s in 100 batches/s < "
            f"{TARGETS['e2e_p99_ms_100bps']:.0f} ms ({p99_100:.2f} ms)",
        ),
    }


def report(summary: dict[str, Any], targets: dict[str, tuple[bool, str]]) -> None:
    tp = summary["throughput"]
    print(
        f"\nproduce throughput, 6 partitions, {tp['batch_bytes']}-byte batches of "
        f"{tp['records_per_batch']} records, {CONCURRENCY} requests in flight (best of "
        f"{summary['repeat']}; storage CPU: the 3 nodes' CPU seconds per MB, all runs)"
    )
    head = f"{'case':12} {'MB/s':>7} {'records/s':>10} {'vs rf1':>6} {'storage CPU s/MB':>16} runs"
    print(head)
    print("-" * len(head))
    base = tp[RF1.name]["mbps"]
    for case in THROUGHPUT_CASES:
        r = tp[case.name]
        runs = " ".join(f"{x:.0f}" for x in r["mbps_all_runs"])
        print(
            f"{case.name:12} {r['mbps']:7.1f} {r['records_per_s']:10,.0f} "
            f"{r['mbps'] / base:6.2f} {r['storage_cpu_s_per_mb']:16.4f} {runs}"
        )
    print(
        f"RF 3 acks=all / RF 1, median of each repetition's ratio: "
        f"{tp['rf3_all_vs_rf1_paired_median']:.2f}; RF 3: acks=all / acks=1 "
        f"{tp['rf3_all_vs_acks1']:.2f}; storage CPU per MB, RF 3 acks=all "
        f"/ RF 1: {tp['cpu_per_mb_rf3_all_vs_rf1']:.2f}x"
    )
    e2e = summary["e2e"]
    print(
        f"\nend-to-end latency, send -> consumed, {e2e['records_per_s']:,} records/s, "
        f"{e2e['seconds']:.0f} s per case (ms; ack: produce acknowledgement, worst round)"
    )
    head = (
        f"{'case':19} {'batches/s':>9} {'sent/s':>6} {'p50':>7} {'p99':>7} {'p99.9':>7} {'max':>7} "
        f"{'records':>8} {'ack p50':>7} {'ack p99':>7} {'server CPU':>10} {'ms/batch':>8}"
        "  p99 per round"
    )
    print(head)
    print("-" * len(head))
    for case in summary["e2e_cases"]:
        r = e2e[case]
        rounds = " ".join(f"{x['p99_ms']:.2f}" for x in r["rounds"])
        print(
            f"{case:19} {r['batches_per_s']:9,} {r['achieved_batches_per_s']:6,.0f} "
            f"{r['p50_ms']:7.2f} {r['p99_ms']:7.2f} "
            f"{r['p999_ms']:7.2f} "
            f"{r['max_ms']:7.1f} {r['records']:8,} {r['ack_p50_ms']:7.2f} {r['ack_p99_ms']:7.2f}"
            f" {r['server_cpus']:10.2f} {r['server_cpu_ms_per_batch']:8.2f}  {rounds}"
        )
    print(
        f"RF 3 acks=all / RF 1 acks=1: p50 {e2e['rf3_all_vs_rf1_p50']:.2f}x, "
        f"p99 {e2e['rf3_all_vs_rf1_p99']:.2f}x; / raw gRPC relay: p50 "
        f"{e2e['rf3_all_vs_relay_p50']:.2f}x, p99 {e2e['rf3_all_vs_relay_p99']:.2f}x "
        "(1,000 batches/s)"
    )
    busy = [r["machine_busy_cpus"] for c in summary["e2e_cases"] for r in e2e[c]["rounds"]]
    print(
        f"machine busy during the paced runs: {min(busy):.2f}-{max(busy):.2f} of "
        f"{os.cpu_count()} CPUs (server CPU: the 3 storage nodes' CPU seconds per second, or the "
        "relay's; "
        "ms/batch: their CPU time per batch produced, consumer fetches and replication "
        "included; sent/s: the rate achieved, worst round); RF 3 partitions under-replicated at "
        "the end: "
        f"{summary['isr_at_end']['under_replicated']}"
    )
    print("\ntargets")
    for name, (met, text) in targets.items():
        print(f"  {'met    ' if met else 'MISSED '} {name}: {text}")


# --------------------------------------------------------------------------- run


@contextlib.contextmanager
def running_cluster(
    workdir: Path,
) -> Iterator[tuple[LocalClusterSpec, list[ManagedProcess], str]]:
    """The cluster and the relay server; (spec, processes, the relay's address)."""
    spec = cluster_spec(workdir)
    relay_port = free_port()
    relay = ManagedProcess(
        name="relay",
        argv=[sys.executable, THIS_FILE, "--relay-server", str(relay_port)],
        log_path=workdir / "logs" / "relay.log",
        ready=lambda: tcp_open(relay_port),
    )
    processes = [*spec.processes(), relay]
    supervisor = Supervisor(processes, grace_s=30.0)
    try:
        supervisor.start_all(60.0)
        yield spec, processes, f"127.0.0.1:{relay_port}"
    except BaseException:
        for process in processes:
            if process.name.startswith("storage-"):
                print(f"--- last lines of {process.log_path}:\n{process.tail(20)}", file=sys.stderr)
        raise
    finally:
        supervisor.stop_all()


def run(profile: Profile, quick: bool, keep: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="strom-bench-replication-"))
    summary: dict[str, Any] = {
        "quick": quick,
        "repeat": profile.repeat,
        "concurrency": CONCURRENCY,
        "partitions": PARTITIONS,
        "e2e_cases": [case.name for case in profile.e2e_cases],
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    try:
        progress(f"starting a cluster in {workdir} ...")
        with running_cluster(workdir) as (spec, processes, relay):
            pids = {
                kind: [p.pid for p in processes if p.name.startswith(kind) and p.pid]
                for kind in ("storage-", "relay")
            }
            with Admin(spec.gateway_address, request_timeout_ms=30000) as admin:
                leaders = create_topics(admin)

                async def measure() -> None:
                    producer = Producer(leaders, relay)
                    try:
                        warm = make_batches(1024, 1)[0][0]
                        for rf, by_partition in leaders.items():
                            for p in by_partition:
                                request = producer.request(rf, p, -1, warm)
                                await producer.send_until_accepted(rf, p, request)
                        progress("produce throughput ...")
                        summary["throughput"] = await throughput_cases(
                            producer, profile, pids["storage-"]
                        )
                        progress("end-to-end latency ...")
                        summary["e2e"] = await e2e_cases(producer, profile, workdir, pids)
                    finally:
                        await producer.close()

                asyncio.run(measure())
                summary["isr_at_end"] = isr_health(admin)
        progress("done")
    except BaseException:
        keep = True
        print(f"benchmark failed; data and logs kept in {workdir}", file=sys.stderr)
        raise
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    targets = evaluate(summary)
    report(summary, targets)
    summary["targets_met"] = {name: met for name, (met, _) in targets.items()}
    summary["targets"] = {name: text for name, (_, text) in targets.items()}
    summary["target_values"] = TARGETS
    return summary


def main() -> None:
    parser = bench_arguments(__doc__, "smaller volumes; under a minute")
    parser.add_argument("--consumer", metavar="SPEC", help=argparse.SUPPRESS)
    parser.add_argument("--relay-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay_server is not None:
        run_relay_server(args.relay_server)
        return
    if args.consumer is not None:
        spec = json.loads(args.consumer)
        stats, latencies = asyncio.run(consume(spec))
        Path(spec["out"]).write_bytes(latencies.tobytes())
        print(json.dumps(stats), flush=True)
        return
    print_summary(lambda: run(QUICK if args.quick else FULL, args.quick, args.keep))


if __name__ == "__main__":
    main()
