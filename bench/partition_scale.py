"""Benchmark of partition count: creating thousands of RF-3 partitions on a live cluster.

A real local cluster on loopback (``strom_server.local.cluster.LocalClusterSpec``: etcd with
fsync on, one controller, three storage nodes, a gateway; no coordinator), data in a temporary
directory, every process stopped at the end. The storage nodes run with
``--broker.session.timeout.ms`` (default 4000, what the chaos harnesses use): a node whose
etcd session lapses is declared dead by the controller, which then moves leadership around.

Rounds add topics of 10 partitions, RF 3 (every node a replica of every partition), until the
cluster holds 100, 300, 600 and 1,000 topics (``--quick``: 30 and 100), i.e. 1,000 / 3,000 /
6,000 / 10,000 partitions and three times as many replicas. A node keeps 3 files open per
partition, so a round needing more than the open-files limit (``ulimit -n``, which the nodes
inherit from this process) is skipped and ends the run: 10,000 partitions need ~30,300.
Per round, from just before the first CreateTopics call (50 topics per call, through the
gateway):

* ``created``: the last CreateTopics call returned;
* ``dirs``: every storage node has a log directory for every partition (filesystem polled
  every 50 ms);
* ``writable``: one record written with acks=all to every new partition succeeded (a leader
  serving and its whole ISR fetching), measured from the same start;
* the longest answer of a gRPC health check to each storage node, sent every 50 ms by a thread
  of this process (the health service shares the node's event loop, so this is how long the
  loop was held, seen from outside), and the longest stall the nodes logged themselves
  (``event loop stalled``, 250 ms and more; absent in builds before the loop watch);
* a round that fails (CreateTopics refused because nodes were declared dead) is reported as
  its error, and ends the run;
* health: registrations that expired ("registration lease expired") and "broker left" events
  in the logs (should be 0), and partitions whose ISR is not full in the metadata at the end.

Baseline, same run, same etcd: the keys the controller writes for the round's topics, written
from this process with the ``etcd3`` client in transactions of the controller's size and
compares (``bench/controller.py``'s ``etcd_baseline``). Ratios: ``dirs`` and ``writable`` to it.

The last line is ``SUMMARY {json}``. Probes and pollers share the machine's cores with the
cluster: their cost is in the figures, and so is any other load (the 1-minute load average is
reported).

    .venv/bin/python bench/partition_scale.py            # full run, several minutes
    .venv/bin/python bench/partition_scale.py --quick    # under a minute
    .venv/bin/python bench/partition_scale.py --keep     # keep data and logs (kept on failure)
"""

from __future__ import annotations

import json
import os
import resource
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import etcd3
import grpc
from benchkit import (
    bench_arguments,
    local_cluster_spec,
    print_summary,
    progress,
    work_dir,
)
from controller import etcd_baseline, log_evidence
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strom import Admin, NewTopic, Producer
from strom.errors import StromError
from strom_server.local.supervisor import Supervisor

NODES = 3
RF = 3
PARTITIONS = 10
TOPICS_PER_CALL = 50
PROBE_INTERVAL_S = 0.05
ROUND_TIMEOUT_S = 600.0
FULL = (100, 300, 600, 1000)
#: Files a storage node keeps open per hosted partition (log, offset index, time index), and
#: besides them (sockets, etcd, its own logs): a round the node's limit cannot hold is skipped.
FILES_PER_PARTITION = 3
FILES_SPARE = 300
QUICK = (30, 100)


class LoopProbe(threading.Thread):
    """Health checks to one storage node every PROBE_INTERVAL_S; the longest answer since the
    last ``take``."""

    def __init__(self, address: str) -> None:
        super().__init__(daemon=True)
        self._channel = grpc.insecure_channel(address)
        self._stub = health_pb2_grpc.HealthStub(self._channel)
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._longest = 0.0
        self.failures = 0

    def run(self) -> None:
        while not self._halt.wait(PROBE_INTERVAL_S):
            start = time.perf_counter()
            try:
                self._stub.Check(health_pb2.HealthCheckRequest(), timeout=60)
            except grpc.RpcError:
                self.failures += 1
            took = time.perf_counter() - start
            with self._lock:
                self._longest = max(self._longest, took)

    def take(self) -> float:
        with self._lock:
            longest, self._longest = self._longest, 0.0
        return longest

    def stop(self) -> None:
        self._halt.set()
        self.join(5)
        self._channel.close()


def dirs_ready(log_dirs: list[Path], expected: int) -> bool:
    """Whether every node holds at least ``expected`` partition directories."""
    for log_dir in log_dirs:
        try:
            if len(os.listdir(log_dir)) < expected:
                return False
        except FileNotFoundError:
            return False
    return True


def wait_until(check: Any, timeout_s: float, interval_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)
    return True


def write_everywhere(gateway: str, names: list[str]) -> int:
    """One acks=all record to every partition of ``names``; returns how many failed."""
    failed = 0
    with Producer(gateway, acks="all", linger_ms=20) as producer:
        futures = [
            producer.send(name, value=b"x", partition=p)
            for name in names
            for p in range(PARTITIONS)
        ]
        producer.flush()
        for future in futures:
            try:
                future.result(timeout=ROUND_TIMEOUT_S)
            except Exception:
                failed += 1
    return failed


class LogReader:
    """New lines of the storage nodes' logs since the last ``stalls`` call."""

    def __init__(self, log_dir: Path) -> None:
        self._paths = sorted(log_dir.glob("storage-*.log"))
        self._offsets = {p: p.stat().st_size for p in self._paths}

    def stalls(self) -> list[int]:
        """stall_ms of every ``event loop stalled`` line logged since the last call."""
        found = []
        for path in self._paths:
            with path.open("rb") as f:
                f.seek(self._offsets[path])
                data = f.read()
            self._offsets[path] += len(data)
            for line in data.splitlines():
                if b"event loop stalled" in line:
                    try:
                        found.append(int(json.loads(line)["stall_ms"]))
                    except (ValueError, KeyError):
                        continue
        return found


def not_full_isr(admin: Admin, names: list[str]) -> int:
    described = admin.describe_topics(names)
    return sum(1 for t in described for p in t.partitions if p.leader < 0 or len(p.isr) < RF)


def run(totals: tuple[int, ...], session_ms: int, keep: bool) -> dict[str, Any]:
    open_files_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    summary: dict[str, Any] = {"session_ms": session_ms, "nodes": NODES, "rf": RF,
                               "open_files_limit": open_files_limit}  # fmt: skip
    with work_dir("strom-bench-partition-scale-", keep) as workdir:
        spec = local_cluster_spec(
            workdir,
            storage_nodes=NODES,
            controllers=1,
            coordinators=0,
            storage_flags=("--broker.session.timeout.ms", str(session_ms)),
        )
        supervisor = Supervisor(spec.processes(), grace_s=30.0)
        probes: list[LoopProbe] = []
        try:
            supervisor.start_all(90.0)
            progress("cluster up")
            etcd = etcd3.client(host=spec.host, port=spec.etcd_client_port)
            log_dirs = [workdir / f"storage-{n}" for n in range(1, NODES + 1)]
            probes = [LoopProbe(spec.storage_address(n)) for n in range(1, NODES + 1)]
            for probe in probes:
                probe.start()
            watched = Watched(log_dirs, probes, LogReader(workdir / "logs"))
            gateway = spec.gateway_address
            made = 0
            with Admin(gateway, request_timeout_ms=300_000) as admin:
                for total in totals:
                    needed = FILES_PER_PARTITION * total * PARTITIONS + FILES_SPARE
                    if needed > open_files_limit:
                        summary[f"partitions_{total * PARTITIONS}"] = {
                            "skipped": f"needs ~{needed} open files per node, limit "
                            f"{open_files_limit} (ulimit -n)"
                        }
                        progress(f"{total * PARTITIONS:,} partitions: skipped (open-files limit)")
                        break
                    names = [f"scale-{i:05d}" for i in range(made, total)]
                    try:
                        figures = one_round(admin, gateway, names, watched, total=total)
                    except StromError as exc:  # e.g. nodes declared dead: no more rounds
                        summary[f"partitions_{total * PARTITIONS}"] = {"error": str(exc)[:300]}
                        progress(f"{total * PARTITIONS:,} partitions: failed: {exc}")
                        break
                    figures["etcd_baseline_s"] = round(
                        etcd_baseline(etcd, f"/bench-scale-{total}",
                                      [(n, PARTITIONS) for n in names]), 3)  # fmt: skip
                    for what in ("dirs", "writable"):
                        value = figures[f"{what}_s"]
                        figures[f"ratio_{what}_vs_etcd"] = (
                            round(value / figures["etcd_baseline_s"], 1) if value else None
                        )
                    figures["load_1m"] = round(os.getloadavg()[0], 1)
                    summary[f"partitions_{total * PARTITIONS}"] = figures
                    progress(f"{total * PARTITIONS:,} partitions: {json.dumps(figures)}")
                    made = total
            summary["health"] = log_evidence(workdir / "logs")
        finally:
            try:
                for probe in probes:
                    probe.stop()
            finally:
                stopping = time.perf_counter()
                supervisor.stop_all()
                progress(f"cluster stopped in {time.perf_counter() - stopping:.1f} s")
    return summary


@dataclass(frozen=True)
class Watched:
    """What a round watches: the nodes' log dirs, their probes, their logs."""

    log_dirs: list[Path]
    probes: list[LoopProbe]
    logs: LogReader


def one_round(
    admin: Admin, gateway: str, names: list[str], watched: Watched, *, total: int
) -> dict[str, Any]:
    """Create ``names`` (bringing the cluster to ``total`` topics); the round's figures."""
    log_dirs, probes, logs = watched.log_dirs, watched.probes, watched.logs
    for probe in probes:
        probe.take()
    logs.stalls()
    t0 = time.perf_counter()
    for first in range(0, len(names), TOPICS_PER_CALL):
        batch = names[first : first + TOPICS_PER_CALL]
        admin.create_topics([NewTopic(n, PARTITIONS, RF) for n in batch])
    created = time.perf_counter() - t0
    expected = total * PARTITIONS
    ready = wait_until(lambda: dirs_ready(log_dirs, expected), ROUND_TIMEOUT_S, 0.05)
    dirs = time.perf_counter() - t0 if ready else None
    failed = write_everywhere(gateway, names)
    writable = time.perf_counter() - t0 if failed == 0 else None
    stalls = logs.stalls()
    return {
        "new_partitions": len(names) * PARTITIONS,
        "created_s": round(created, 2),
        "dirs_s": None if dirs is None else round(dirs, 2),
        "writable_s": None if writable is None else round(writable, 2),
        "failed_writes": failed,
        "max_probe_ms": round(max(p.take() for p in probes) * 1000),
        "max_logged_stall_ms": max(stalls, default=0),
        "logged_stalls": len(stalls),
        "not_full_isr": not_full_isr(admin, names),
    }


def main() -> None:
    parser = bench_arguments(__doc__ or "", "30 and 100 topics instead of 100, 300, 600 and 1,000")
    parser.add_argument(
        "--session-ms", type=int, default=4000, help="storage nodes' broker.session.timeout.ms"
    )
    args = parser.parse_args()
    print_summary(lambda: run(QUICK if args.quick else FULL, args.session_ms, args.keep))


if __name__ == "__main__":
    main()
