"""Benchmark of consumer groups: rebalance time (eager vs cooperative-sticky), offset-commit
throughput, and how long a standby coordinator takes to serve after kill -9 of the group's
coordinator; each beside a baseline measured in the same run.

One real local cluster on loopback as ``strom cluster up`` starts it
(``strom_server.local.cluster.LocalClusterSpec``: etcd, 2 controllers, 3 storage nodes, the
gateway) with two coordinators at their defaults (``__consumer_offsets``: 50 partitions,
replication factor 3, commits acknowledged with acks=all), data in a temporary directory,
every process stopped at the end.

* rebalance: 10 members (``strom.aio.Consumer``, one event loop, each polling in its own task)
  subscribed to a 100-partition topic. Two events: a 10th member joins 9 stable ones, and one
  of 10 leaves with ``close()``. Members either poll back to back or spend 500 ms "processing"
  after each poll (an asyncio sleep: heartbeats go on, but a member rejoins only in its next
  poll, as in Kafka; each member starts its loop after a random delay so that they do not poll
  in lockstep). Measured from the event to the moment every member holds a
  disjoint share covering all 100 partitions, and the partition-seconds during which a
  partition was assigned to no member (sampled every 5 ms): eager (``range``) revokes every
  partition at each rebalance, cooperative-sticky only the ones that move (it takes two
  rebalances). The ratio is cooperative-sticky / eager. Median of 3 runs each (``--quick``: 1).
* commit throughput: OffsetCommit of one partition, raw gRPC to the group's coordinator
  (sequential, then 16 groups concurrently), and ``Consumer.commit()`` through the client
  library (sequential). The baseline is what one commit costs at least: a Produce of one
  small record with acks=all to a replication-factor-3 topic, sent straight to its leader
  (sequential and 16 concurrently). Ratios: commits/s over produces/s.
* takeover: a client commits in a loop; the group's coordinator is killed with SIGKILL; the time
  until a commit succeeds again, against the coordinators' etcd lease
  (``coordinator.session.timeout.ms``), which bounds how soon the survivor may take over.
  The killed coordinator is restarted (and takes its partitions back) between runs.

The last line is ``SUMMARY {json}``.

    .venv/bin/python bench/groups.py            # full run, about 4 minutes
    .venv/bin/python bench/groups.py --quick    # about 90 s
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
from benchkit import bench_arguments, free_base_port, free_port, print_summary, progress
from replication import poll_until

from strom import Admin, NewTopic, TopicPartition
from strom.aio import Consumer
from strom.protocol.v1 import (
    coordinator_pb2,
    coordinator_pb2_grpc,
    gateway_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
)
from strom.records import encode_batch
from strom.types import OffsetAndMetadata
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.supervisor import ManagedProcess, Supervisor

NODES = 3
MEMBERS = 10
PARTITIONS = 100
CONCURRENT = 16
SAMPLE_S = 0.005
#: Time a member spends "processing" after each poll: none, and half a heartbeat interval.
PROCESSING_S = (0.0, 0.5)
REBALANCE_TOPIC = "bench-rebalance"
COMMIT_TOPIC = "bench-commits"
BASELINE_TOPIC = "bench-baseline"
SESSION_TIMEOUT_MS = 10_000
LEASE_MS = 9000  # the coordinators' default coordinator.session.timeout.ms
#: Coordinators restarted by the takeover runs, stopped with the cluster.
RESTARTED: list[ManagedProcess] = []


# --------------------------------------------------------------------------- the cluster


@contextlib.contextmanager
def running_cluster(workdir: Path) -> Iterator[tuple[LocalClusterSpec, dict[str, ManagedProcess]]]:
    spec = LocalClusterSpec(
        data_dir=workdir,
        etcd_client_port=free_port(),
        etcd_peer_port=free_port(),
        base_port=free_base_port(1 + NODES + 2 + 2),
        storage_nodes=NODES,
        controllers=2,
        coordinators=2,
    )
    processes = spec.processes()
    supervisor = Supervisor(processes, grace_s=30.0)
    try:
        supervisor.start_all(60.0)
        yield spec, {p.name: p for p in processes}
    finally:
        for process in RESTARTED:
            process.stop(30.0)
        supervisor.stop_all()


def create_topics(admin: Admin) -> None:
    admin.create_topics(
        [
            NewTopic(REBALANCE_TOPIC, PARTITIONS, 1),
            NewTopic(COMMIT_TOPIC, 1, 1),
            NewTopic(BASELINE_TOPIC, 1, 3, topic_configs={"min.insync.replicas": "2"}),
        ]
    )

    def ready() -> bool:
        topics = {
            t.name: t
            for t in admin.describe_topics([REBALANCE_TOPIC, COMMIT_TOPIC, BASELINE_TOPIC])
        }
        return all(p.leader >= 0 for t in topics.values() for p in t.partitions) and all(
            len(p.isr) == 3 for p in topics[BASELINE_TOPIC].partitions
        )

    poll_until(ready, 60, "the benchmark topics' leaders")


# --------------------------------------------------------------------------- rebalance


class Member:
    """One group member polling in its own task."""

    def __init__(self, gateway: str, group: str, strategy: str, process_s: float) -> None:
        self.process_s = process_s
        self.consumer = Consumer(
            bootstrap_servers=gateway,
            group_id=group,
            partition_assignment_strategy=(strategy,),
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=1000,
            enable_auto_commit=False,
            auto_offset_reset="latest",
        )
        self.consumer.subscribe([REBALANCE_TOPIC])
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        # Members created together would poll in lockstep; real ones do not.
        await asyncio.sleep(random.uniform(0, self.process_s + 0.05))
        while True:
            await self.consumer.poll(timeout_ms=50)
            if self.process_s:
                await asyncio.sleep(self.process_s)  # "processing": heartbeats go on meanwhile

    def assignment(self) -> set[TopicPartition]:
        return self.consumer.assignment()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.consumer.close()


def settled(members: list[Member]) -> bool:
    shares = [m.assignment() for m in members]
    covered: set[TopicPartition] = set()
    for share in shares:
        if not share or covered & share:
            return False
        covered |= share
    return len(covered) == PARTITIONS


async def wait_settled(members: list[Member], timeout_s: float) -> tuple[float, float]:
    """(seconds until settled, partition-seconds unassigned meanwhile)."""
    started = last = time.perf_counter()
    unassigned = 0.0
    while True:
        now = time.perf_counter()
        covered = set().union(*(m.assignment() for m in members))
        unassigned += (PARTITIONS - len(covered)) * (now - last)
        last = now
        if settled(members):
            return now - started, unassigned
        if now - started > timeout_s:
            raise RuntimeError(f"the group did not settle within {timeout_s:.0f} s")
        await asyncio.sleep(SAMPLE_S)


async def rebalance_run(
    gateway: str, strategy: str, run: int, process_s: float
) -> dict[str, float]:
    group = f"bench-rebalance-{strategy}-{run}-{process_s}"
    members = [Member(gateway, group, strategy, process_s) for _ in range(MEMBERS - 1)]
    try:
        await wait_settled(members, 120)
        members.append(Member(gateway, group, strategy, process_s))
        join_s, join_unassigned = await wait_settled(members, 120)
        leaving = members.pop(0)
        left_at = time.perf_counter()
        await leaving.close()
        leave_s, leave_unassigned = await wait_settled(members, 120)
        leave_s = time.perf_counter() - left_at
        return {
            "join_s": join_s,
            "join_unassigned_partition_s": join_unassigned,
            "leave_s": leave_s,
            "leave_unassigned_partition_s": leave_unassigned,
        }
    finally:
        await asyncio.gather(*(m.close() for m in members))


async def rebalance_cases(gateway: str, repeat: int, process_s: float) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {"range": [], "cooperative-sticky": []}
    for run in range(repeat):
        for strategy in ("range", "cooperative-sticky"):
            progress(f"rebalance {strategy}, {process_s:.1f} s processing, run {run + 1}/{repeat}")
            runs[strategy].append(await rebalance_run(gateway, strategy, run, process_s))
    result: dict[str, Any] = {}
    for strategy, values in runs.items():
        result[strategy] = {key: statistics.median(v[key] for v in values) for key in values[0]}
    eager, coop = result["range"], result["cooperative-sticky"]
    result["ratios_cooperative_over_eager"] = {
        key: coop[key] / eager[key] if eager[key] else None for key in eager
    }
    return result


# --------------------------------------------------------------------------- commits


async def find_coordinator(gateway: gateway_pb2_grpc.GatewayStub, group: str) -> str:
    while True:
        found = await gateway.FindCoordinator(
            coordinator_pb2.FindCoordinatorRequest(group_id=group), timeout=30
        )
        if found.error_code == 0:
            return f"{found.coordinator.host}:{found.coordinator.port}"
        await asyncio.sleep(0.1)


def commit_request(group: str, offset: int) -> coordinator_pb2.OffsetCommitRequest:
    return coordinator_pb2.OffsetCommitRequest(
        group_id=group,
        generation_id=-1,
        partitions=[
            coordinator_pb2.OffsetCommitPartition(
                topic=COMMIT_TOPIC, partition=0, committed_offset=offset
            )
        ],
    )


async def timed_loop(
    call: Callable[[int], Any], seconds: float, concurrency: int
) -> tuple[float, list[float]]:
    """Run ``call(i)`` back to back in ``concurrency`` tasks for ``seconds``:
    (calls per second, latencies in ms)."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        i = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await call(index * 1_000_000 + i)
            latencies.append((time.perf_counter() - started) * 1000)
            i += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    return len(latencies) / (time.perf_counter() - started), latencies


def latency_summary(rate: float, latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "per_s": rate,
        "p50_ms": ordered[len(ordered) // 2],
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    }


async def commit_cases(spec: LocalClusterSpec, admin: Admin, seconds: float) -> dict[str, Any]:
    result: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(spec.gateway_address) as gateway_channel:
        gateway = gateway_pb2_grpc.GatewayStub(gateway_channel)
        leader = admin.describe_topics([BASELINE_TOPIC])[0].partitions[0].leader
        batch = encode_batch([(int(time.time() * 1000), b"key", b"v" * 60)])
        produce = storage_pb2.ProduceRequest(
            acks=-1,
            timeout_ms=10000,
            partitions=[
                storage_pb2.ProducePartitionData(topic=BASELINE_TOPIC, partition=0, records=batch)
            ],
        )
        async with grpc.aio.insecure_channel(spec.storage_address(leader)) as channel:
            storage = storage_pb2_grpc.StorageNodeStub(channel)

            async def produce_one(_: int) -> None:
                response = await storage.Produce(produce, timeout=30)
                assert response.partitions[0].error_code == 0, response

            # The leader may not host the new partition yet: warm up until it answers.
            for _ in range(600):
                warm = await storage.Produce(produce, timeout=30)
                if warm.partitions[0].error_code == 0:
                    break
                await asyncio.sleep(0.1)
            for concurrency in (1, CONCURRENT):
                progress(f"baseline: acks=all produce x{concurrency} ...")
                rate, latencies = await timed_loop(produce_one, seconds, concurrency)
                result[f"baseline_produce_x{concurrency}"] = latency_summary(rate, latencies)

        groups = [f"bench-commit-{k}" for k in range(CONCURRENT)]
        addresses = {g: await find_coordinator(gateway, g) for g in groups}
        channels = {a: grpc.aio.insecure_channel(a) for a in set(addresses.values())}
        try:
            stubs = {
                g: coordinator_pb2_grpc.GroupCoordinatorStub(channels[a])
                for g, a in addresses.items()
            }

            for group in groups:  # the first commits may find partitions still loading
                for _ in range(600):
                    warm = await stubs[group].OffsetCommit(commit_request(group, 0), timeout=30)
                    if warm.partitions[0].error_code == 0:
                        break
                    await asyncio.sleep(0.1)

            async def commit_one(i: int) -> None:
                group = groups[i // 1_000_000]
                response = await stubs[group].OffsetCommit(commit_request(group, i), timeout=30)
                assert response.partitions[0].error_code == 0, response

            for concurrency in (1, CONCURRENT):
                progress(f"raw OffsetCommit x{concurrency} ...")
                rate, latencies = await timed_loop(commit_one, seconds, concurrency)
                result[f"raw_commit_x{concurrency}"] = latency_summary(rate, latencies)
        finally:
            for channel in channels.values():
                await channel.close()

    consumer = Consumer(bootstrap_servers=spec.gateway_address, group_id="bench-commit-client")
    consumer.assign([TopicPartition(COMMIT_TOPIC, 0)])
    try:

        async def client_commit(i: int) -> None:
            await consumer.commit({TopicPartition(COMMIT_TOPIC, 0): OffsetAndMetadata(i)})

        progress("Consumer.commit() ...")
        rate, latencies = await timed_loop(client_commit, seconds, 1)
        result["client_commit_x1"] = latency_summary(rate, latencies)
    finally:
        await consumer.close()
    result["ratios"] = {
        "raw_commit_x1_vs_produce_x1": result["raw_commit_x1"]["per_s"]
        / result["baseline_produce_x1"]["per_s"],
        f"raw_commit_x{CONCURRENT}_vs_produce_x{CONCURRENT}": result[f"raw_commit_x{CONCURRENT}"][
            "per_s"
        ]
        / result[f"baseline_produce_x{CONCURRENT}"]["per_s"],
        "client_commit_x1_vs_produce_x1": result["client_commit_x1"]["per_s"]
        / result["baseline_produce_x1"]["per_s"],
    }
    return result


# --------------------------------------------------------------------------- takeover


async def takeover_run(
    spec: LocalClusterSpec, processes: dict[str, ManagedProcess], run: int
) -> dict[str, float]:
    group = f"bench-takeover-{run}"
    tp = TopicPartition(COMMIT_TOPIC, 0)
    consumer = Consumer(
        bootstrap_servers=spec.gateway_address,
        group_id=group,
        request_timeout_ms=60000,
        retry_backoff_ms=50,
    )
    consumer.assign([tp])
    try:
        await consumer.commit({tp: OffsetAndMetadata(1)})
        async with grpc.aio.insecure_channel(spec.gateway_address) as channel:
            address = await find_coordinator(gateway_pb2_grpc.GatewayStub(channel), group)
        victim = next(p for p in processes.values() if p.address == address)
        assert victim.popen is not None
        killed_at = time.perf_counter()
        victim.popen.send_signal(signal.SIGKILL)
        victim.popen.wait()
        offset = 2
        while True:
            try:
                await consumer.commit({tp: OffsetAndMetadata(offset)})
                break
            except Exception:
                offset += 1
                await asyncio.sleep(0.02)
        served_after = time.perf_counter() - killed_at
        committed = await consumer.committed(tp)
        assert committed is not None and committed.offset == offset, committed
    finally:
        await consumer.close()
    restarted = ManagedProcess(
        name=victim.name,
        argv=list(victim.argv),
        log_path=victim.log_path,
        ready=victim.ready,
        env=dict(victim.env),
        address=victim.address,
    )
    processes[victim.name] = restarted
    RESTARTED.append(restarted)
    restarted.start()
    restarted.wait_ready(60)
    return {"served_after_s": served_after, "killed": float(victim.name.rsplit("-", 1)[1])}


async def takeover_cases(
    spec: LocalClusterSpec, processes: dict[str, ManagedProcess], repeat: int
) -> dict[str, Any]:
    runs = []
    for run in range(repeat):
        progress(f"takeover run {run + 1}/{repeat} ...")
        runs.append(await takeover_run(spec, processes, run))
        await asyncio.sleep(LEASE_MS / 1000 + 3)  # the restarted one takes its share back
    served = [r["served_after_s"] for r in runs]
    return {
        "runs_s": served,
        "median_s": statistics.median(served),
        "lease_s": LEASE_MS / 1000,
        "ratio_median_over_lease": statistics.median(served) / (LEASE_MS / 1000),
    }


# --------------------------------------------------------------------------- run


def report(summary: dict[str, Any]) -> None:
    for case, rebalance in summary["rebalance"].items():
        print(f"\nrebalance of {MEMBERS} members over {PARTITIONS} partitions, {case} (median):")
        print(
            f"  {'':22} {'join s':>8} {'unassigned p*s':>15} {'leave s':>8} {'unassigned p*s':>15}"
        )
        for strategy in ("range", "cooperative-sticky"):
            r = rebalance[strategy]
            print(
                f"  {strategy:22} {r['join_s']:8.2f} {r['join_unassigned_partition_s']:15.1f} "
                f"{r['leave_s']:8.2f} {r['leave_unassigned_partition_s']:15.1f}"
            )
        ratios = rebalance["ratios_cooperative_over_eager"]
        print("  cooperative / eager: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v))
    commits = summary["commits"]
    print("\noffset commits (one partition each):")
    for key, value in commits.items():
        if key != "ratios":
            print(
                f"  {key:26} {value['per_s']:8.0f}/s  p50 {value['p50_ms']:6.2f} ms  "
                f"p99 {value['p99_ms']:6.2f} ms"
            )
    for key, value in commits["ratios"].items():
        print(f"  {key:38} {value:.2f}")
    takeover = summary["takeover"]
    print(
        f"\nstandby coordinator serving after kill -9: median {takeover['median_s']:.2f} s "
        f"(runs {', '.join(f'{s:.2f}' for s in takeover['runs_s'])}); lease "
        f"{takeover['lease_s']:.0f} s; ratio {takeover['ratio_median_over_lease']:.2f}"
    )


def run(quick: bool, keep: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="strom-bench-groups-"))
    repeat = 1 if quick else 3
    summary: dict[str, Any] = {
        "quick": quick,
        "repeat": repeat,
        "members": MEMBERS,
        "partitions": PARTITIONS,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    try:
        progress(f"starting a cluster in {workdir} ...")
        with (
            running_cluster(workdir) as (spec, processes),
            Admin(spec.gateway_address, request_timeout_ms=30000) as admin,
        ):
            create_topics(admin)

            async def measure() -> None:
                summary["commits"] = await commit_cases(spec, admin, 3.0 if quick else 8.0)
                summary["rebalance"] = {
                    f"{process_s * 1000:.0f} ms processing per poll": await rebalance_cases(
                        spec.gateway_address, repeat, process_s
                    )
                    for process_s in PROCESSING_S
                }
                summary["takeover"] = await takeover_cases(spec, processes, repeat)

            asyncio.run(measure())
        progress("done")
    except BaseException:
        keep = True
        print(f"benchmark failed; data and logs kept in {workdir}", file=sys.stderr)
        raise
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report(summary)
    return summary


def main() -> None:
    args = bench_arguments(__doc__, "one run of each; about a minute").parse_args()
    print_summary(lambda: run(args.quick, args.keep))


if __name__ == "__main__":
    main()
