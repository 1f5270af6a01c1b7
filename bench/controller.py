"""Benchmark of the controller (strom-controller): partition creation, failover, propagation.

Real local clusters on loopback, data in a temporary directory, every process stopped at the
end. Each cluster: one etcd (fsync on, as ``strom cluster up`` runs it), 2 controllers, 3
storage nodes and a gateway, started like ``strom_server.local.cluster.LocalClusterSpec`` does
(its process builders; the controllers with this run's ``--controller.session.timeout.ms``).
Three clusters in turn, so that trouble in one case does not spill into the next: "single",
"many" and "latency". Clients go through the gateway (``strom.Admin``) unless said otherwise.

Cases (RF 3 on 3 storage nodes, so every node is a replica of every partition):

* creation, N = 1,000 partitions (``--quick``: 300): one topic of N partitions on the empty
  "single" cluster, then a second one on top of it (does creation cost grow with what the
  cluster holds?), and N / 10 topics of 10 partitions on the empty "many" cluster, one
  CreateTopics call per topic. One run each, from just before the first CreateTopics call to
  (a) the last call returning, (b) Metadata through the gateway showing a leader for every
  partition (polled every 10 ms by a thread of this process), (c) every storage node having a
  ``<log-dir>/<topic>-<partition>/`` directory for every partition (filesystem polled every
  5 ms, 10 ms for many topics; the benchmark polls, the system does not); also when the first
  node had all of them. Given up after 120 s (60 s for the second topic): "timeout".
  Baseline, same run, same etcd (best of 2): the same keys (one per partition, one per topic,
  values of the same shape and size) written from this process with the ``etcd3`` client in
  transactions of the controller's size (at most 100 ops, each with the controller's two
  compares: the election key's value and the topic key's absence), one after the other, as
  the controller does.
* propagation ("latency" cluster): a 1-partition RF-3 topic is created; time from the call to
  every storage node having its directory (polled every 2 ms) and to Metadata through the
  gateway showing it with a leader (polled every 5 ms). 10 rounds (full: 30); p50 / p99 / max.
  Baseline, same run: etcd watch latency, a put from this process (``etcd3`` client) until a
  watch stream read by a thread of this process delivers it (100 puts; full: 300).
* failover ("latency" cluster, after propagation): controllers with a 2000 ms session timeout
  (the full run then restarts them with 6000, the default); the active one is killed with
  SIGKILL and the clock runs until (a) the standby, asked directly, names itself in Metadata,
  and (b) a CreateTopics of a 1-partition topic through the gateway succeeds (a new client
  every attempt, 1 s deadline, again every 10 ms). The killed controller is restarted as the
  new standby before the next round, 1 s before the kill. 3 rounds (full: 5 per timeout);
  median and max, and the max's ratio to the lease TTL (target: within 2x). The lease was
  last refreshed up to TTL/3 before the kill, so expiry comes 2/3 TTL to TTL after it.
* health, per cluster, counted in the process logs before stopping: storage-node
  registrations that expired, "broker left" events, partition state changes written by the
  controller; and how long stopping the cluster took (SIGTERM, SIGKILL after 10 s).

The last line is ``SUMMARY {json}``. Pollers share 2 cores with the system under test: their
own cost is in the figures.

    .venv/bin/python bench/controller.py            # full run, about 4 minutes
    .venv/bin/python bench/controller.py --quick    # about a minute
    .venv/bin/python bench/controller.py --keep     # keep data and logs (kept on failure)
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import queue
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import etcd3
import grpc
from benchkit import bench_arguments, free_base_port, free_port, print_summary, progress
from etcd3 import etcdrpc

from strom import Admin, NewTopic
from strom.errors import StromError, TopicAlreadyExistsError
from strom.protocol.v1 import controller_pb2, controller_pb2_grpc
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.supervisor import ManagedProcess
from strom_server.rpc.health_probe import grpc_serving

HOST = "127.0.0.1"
NODES = 3
CONTROLLERS = 2
RF = 3
TXN_OPS = 100  # strom_controller.managers.result.MAX_TXN_OPS
SMALL_TOPIC_PARTITIONS = 10
CREATE_TIMEOUT_S = 120.0
SECOND_TIMEOUT_S = 60.0
_T0 = time.perf_counter()


@dataclass(frozen=True)
class Profile:
    partitions: int
    failover_timeouts_ms: tuple[int, ...]
    failover_rounds: int
    propagation_rounds: int
    watch_puts: int


QUICK = Profile(300, (2000,), 3, 10, 100)
FULL = Profile(1000, (2000, 6000), 5, 30, 300)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def ms_or_none(seconds: float | None) -> float | None:
    return None if seconds is None else ms(seconds)


def fmt(value: float | None, width: int, spec: str = ",.1f") -> str:
    """A figure right-aligned in ``width``, or "timeout" when there is none."""
    return f"{'timeout':>{width}}" if value is None else f"{value:{width}{spec}}"


# ---------------------------------------------------------------- the cluster


class Cluster:
    """etcd, controllers, storage nodes and gateway; ``stop_all`` (in a finally) ends them."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.spec = LocalClusterSpec(
            data_dir=workdir,
            host=HOST,
            etcd_client_port=free_port(),
            etcd_peer_port=free_port(),
            base_port=free_base_port(1 + NODES + CONTROLLERS),
            storage_nodes=NODES,
            controllers=CONTROLLERS,
        )
        self.processes: list[ManagedProcess] = []
        self.controllers: dict[int, ManagedProcess] = {}
        self.session_ms = 0
        self._generation = 0

    @property
    def etcd_endpoint(self) -> str:
        return f"{HOST}:{self.spec.etcd_client_port}"

    @property
    def gateway(self) -> str:
        return self.spec.gateway_address

    def log_dir(self, node_id: int) -> Path:
        return self.workdir / f"storage-{node_id}"

    def _launch(self, process: ManagedProcess, timeout_s: float = 60.0) -> ManagedProcess:
        self.processes.append(process)
        process.start()
        process.wait_ready(timeout_s)
        return process

    def controller_process(self, controller_id: int) -> ManagedProcess:
        """A controller with this run's session timeout; its own log file per start."""
        self._generation += 1
        address = self.spec.controller_address(controller_id)
        argv = [
            sys.executable, "-m", "strom_controller",
            "--listen", address,
            "--etcd-endpoints", self.etcd_endpoint,
            "--controller-id", str(controller_id),
            "--controller.session.timeout.ms", str(self.session_ms),
        ]  # fmt: skip
        name = f"controller-{controller_id}"
        return ManagedProcess(
            name=name,
            argv=argv,
            log_path=self.workdir / "logs" / f"{self._generation:02d}-{name}.log",
            ready=lambda: grpc_serving(address),
            address=address,
        )

    def start(self, session_ms: int) -> None:
        self.session_ms = session_ms
        for given in self.spec.processes():
            process = given
            if given.name.startswith("controller-"):
                controller_id = int(given.name.rsplit("-", 1)[1])
                process = self.controller_process(controller_id)
                self.controllers[controller_id] = process
            self._launch(process)
        self.wait_for_cluster()

    def start_controller(self, controller_id: int) -> None:
        self.controllers[controller_id] = self._launch(self.controller_process(controller_id))

    def restart_controllers(self, session_ms: int) -> None:
        self.session_ms = session_ms
        for process in self.controllers.values():
            process.stop(10.0)
            self.processes.remove(process)
        for controller_id in sorted(self.controllers):
            self.start_controller(controller_id)
        self.wait_for_cluster()

    def wait_for_cluster(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        with Admin(self.gateway, request_timeout_ms=2000) as admin:
            while True:
                with contextlib.suppress(StromError):
                    cluster = admin.describe_cluster()
                    if cluster.controller is not None and len(cluster.brokers) >= NODES:
                        # and an admin call is served (the controller has finished activating)
                        admin.create_topics([NewTopic(f"warmup-{uuid.uuid4().hex[:8]}", 1, 1)])
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError("the cluster did not come up in time")
                time.sleep(0.1)

    def active_controller(self) -> int | None:
        """The active controller's id, as the running controllers report it."""
        for controller_id in self.controllers:
            response = metadata_of(self.spec.controller_address(controller_id), 1.0)
            if response is not None and response.HasField("controller"):
                return int(response.controller.node_id)
        return None

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(Exception):
                process.stop(10.0)
        self.processes.clear()


def metadata_of(address: str, timeout_s: float) -> Any:
    """Metadata straight from one controller; None when it does not answer."""
    with grpc.insecure_channel(address) as channel:
        try:
            return controller_pb2_grpc.ControllerStub(channel).Metadata(
                controller_pb2.MetadataRequest(), timeout=timeout_s
            )
        except grpc.RpcError:
            return None


# ---------------------------------------------------------------- pollers


class Poller(threading.Thread):
    """Calls ``check`` every ``interval_s`` until it returns True; records when it did."""

    def __init__(self, check: Callable[[], bool], interval_s: float, t0: float) -> None:
        super().__init__(daemon=True)
        self.check = check
        self.interval_s = interval_s
        self.t0 = t0
        self.elapsed: float | None = None
        self.polls = 0
        self.error: str = ""
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.polls += 1
            try:
                done = self.check()
            except Exception as exc:  # a failing poll is retried; the last error is kept
                done, self.error = False, repr(exc)
            if done:
                self.elapsed = time.perf_counter() - self.t0
                return
            self._halt.wait(self.interval_s)

    def finish(self, timeout_s: float) -> float | None:
        self.join(timeout_s)
        self._halt.set()
        self.join()
        return self.elapsed


class DirsReady:
    """A check: True once every log dir holds a directory for every name in ``expected``;
    ``done_at`` maps each log dir's name to when it was first complete."""

    def __init__(self, log_dirs: list[Path], expected: set[str]) -> None:
        self.pending = {d: set(expected) for d in log_dirs}
        self.done_at: dict[str, float] = {}

    def __call__(self) -> bool:
        for log_dir, missing in self.pending.items():
            if not missing:
                continue
            try:
                names = {e.name for e in os.scandir(log_dir) if e.is_dir()}
            except FileNotFoundError:
                continue
            missing.difference_update(names)
            if not missing:
                self.done_at[log_dir.name] = time.perf_counter()
        return not any(self.pending.values())


def leaders_ready(admin: Admin, partitions: dict[str, int]) -> Callable[[], bool]:
    """True once Metadata shows every topic with its partition count, each with a leader."""
    names = sorted(partitions)

    def check() -> bool:
        with contextlib.suppress(StromError):
            described = {t.name: t for t in admin.describe_topics(names)}
            return all(
                name in described
                and len(described[name].partitions) == count
                and all(p.leader >= 0 for p in described[name].partitions)
                for name, count in partitions.items()
            )
        return False

    return check


# ---------------------------------------------------------------- creation


def timed_creation(
    cluster: Cluster,
    admin: Admin,
    topics: list[NewTopic],
    fs_interval_s: float = 0.005,
    timeout_s: float = CREATE_TIMEOUT_S,
) -> dict[str, float | None]:
    expected = {f"{t.name}-{p}" for t in topics for p in range(t.num_partitions)}
    log_dirs = [cluster.log_dir(n) for n in range(1, NODES + 1)]
    t0 = time.perf_counter()
    dirs = DirsReady(log_dirs, expected)
    fs = Poller(dirs, fs_interval_s, t0)
    md_admin = Admin(cluster.gateway, request_timeout_ms=10000)
    md = Poller(leaders_ready(md_admin, {t.name: t.num_partitions for t in topics}), 0.01, t0)
    fs.start()
    md.start()
    try:
        for topic in topics:
            admin.create_topics([topic])
        returned = time.perf_counter() - t0
        md_elapsed = md.finish(timeout_s)
        fs_elapsed = fs.finish(timeout_s)
    finally:
        md_admin.close()
    done_at = dirs.done_at
    if md_elapsed is None or fs_elapsed is None:
        progress(
            f"  NOT COMPLETE after {timeout_s:.0f} s: leaders in metadata "
            f"{'yes' if md_elapsed is not None else 'no'}, storage nodes with every directory: "
            f"{sorted(done_at) or 'none'}"
        )
    return {
        "returned_s": returned,
        "leaders_s": md_elapsed,
        "dirs_s": fs_elapsed,
        "dirs_first_node_s": min(done_at.values()) - t0 if done_at else None,
    }


def partition_value(leader: int) -> bytes:
    return json.dumps(
        {"isr": [1, 2, 3], "leader": leader, "leader_epoch": 0, "partition_epoch": 0},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


def topic_value(partitions: int) -> bytes:
    assignment = {str(p): [(p + i) % NODES + 1 for i in range(RF)] for p in range(partitions)}
    return json.dumps(
        {"configs": {}, "partitions": assignment, "topic_id": uuid.uuid4().hex},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


def etcd_baseline(client: Any, prefix: str, topics: list[tuple[str, int]]) -> float:
    """Seconds to write the keys the controller writes for ``topics`` ([(name, partitions)]),
    in transactions of the controller's size and compares, one after the other."""
    fence_key = f"{prefix}/fence"
    fence_value = b'{"epoch":1,"host":"127.0.0.1","id":1,"port":1}'
    client.put(fence_key, fence_value)
    ops_of = []
    for name, count in topics:
        ops = [(f"{prefix}/partitions/{name}/{p}", partition_value(p % NODES + 1))
               for p in range(count)]  # fmt: skip
        ops.append((f"{prefix}/topics/{name}", topic_value(count)))
        ops_of.append((f"{prefix}/topics/{name}", ops))
    tx = client.transactions
    start = time.perf_counter()
    for topic_key, ops in ops_of:
        for first in range(0, len(ops), TXN_OPS):
            ok, _ = client.transaction(
                compare=[tx.value(fence_key) == fence_value, tx.version(topic_key) == 0],
                success=[tx.put(k, v) for k, v in ops[first : first + TXN_OPS]],
                failure=[],
            )
            if not ok:
                raise RuntimeError("baseline transaction refused")
    elapsed = time.perf_counter() - start
    client.delete_prefix(f"{prefix}/")
    return elapsed


def record_creation(summary: dict[str, Any], shape: str, run: dict[str, float | None]) -> None:
    for key in ("returned_s", "leaders_s", "dirs_s", "dirs_first_node_s"):
        summary[f"create.{shape}.{key[:-2]}_ms"] = ms_or_none(run[key])


def creation_baseline(
    summary: dict[str, Any], shape: str, client: Any, topics: list[tuple[str, int]]
) -> None:
    """The etcd baseline of one shape (best of 2) and the shape's ratios to it."""
    base = ms(min(etcd_baseline(client, f"/bench-{shape}-{i}", topics) for i in range(2)))
    summary[f"create.{shape}.etcd_baseline_ms"] = base
    summary[f"create.{shape}.txns"] = sum(-(-(count + 1) // TXN_OPS) for _, count in topics)
    for what in ("returned", "leaders", "dirs"):
        figure = summary[f"create.{shape}.{what}_ms"]
        summary[f"ratio.create.{shape}.{what}_vs_etcd"] = (
            round(figure / base, 1) if figure is not None else None
        )


def single_topic_case(
    cluster: Cluster, client: Any, profile: Profile, summary: dict[str, Any]
) -> None:
    """One topic of N partitions on an empty cluster, then a second one on top of it."""
    n = profile.partitions
    with Admin(cluster.gateway, request_timeout_ms=120000) as admin:
        progress(f"creation: 1 topic x {n} partitions, RF {RF}, empty cluster")
        record_creation(
            summary, "single", timed_creation(cluster, admin, [NewTopic("big-0", n, RF)])
        )
        creation_baseline(summary, "single", client, [("big", n)])
        progress(f"creation: a second topic of {n} partitions on top of the first")
        record_creation(
            summary,
            "second",
            timed_creation(cluster, admin, [NewTopic("big-1", n, RF)], timeout_s=SECOND_TIMEOUT_S),
        )
        creation_baseline(summary, "second", client, [("big", n)])


def many_topics_case(
    cluster: Cluster, client: Any, profile: Profile, summary: dict[str, Any]
) -> None:
    count = profile.partitions // SMALL_TOPIC_PARTITIONS
    progress(f"creation: {count} topics x {SMALL_TOPIC_PARTITIONS} partitions, RF {RF}")
    topics = [NewTopic(f"small-{t:04d}", SMALL_TOPIC_PARTITIONS, RF) for t in range(count)]
    with Admin(cluster.gateway, request_timeout_ms=120000) as admin:
        record_creation(summary, "many", timed_creation(cluster, admin, topics, fs_interval_s=0.01))
    creation_baseline(summary, "many", client, [(t.name, SMALL_TOPIC_PARTITIONS) for t in topics])


# ---------------------------------------------------------------- propagation


def watch_baseline(client: Any, endpoint: str, puts: int) -> list[float]:
    """Latency of a put (etcd3 client) until a watch stream read by a thread of this process
    (etcd's Watch gRPC API through the ``etcd3`` package's stubs) delivers it."""
    key = f"/bench-watch/{uuid.uuid4().hex}".encode()
    seen: dict[bytes, float] = {}
    arrived = threading.Condition()
    requests: queue.Queue[Any] = queue.Queue()
    requests.put(etcdrpc.WatchRequest(create_request=etcdrpc.WatchCreateRequest(key=key)))
    channel = grpc.insecure_channel(endpoint)
    created = threading.Event()

    def reader() -> None:
        with contextlib.suppress(grpc.RpcError):
            for response in etcdrpc.WatchStub(channel).Watch(iter(requests.get, None)):
                now = time.perf_counter()
                if response.created:
                    created.set()
                with arrived:
                    for event in response.events:
                        seen.setdefault(event.kv.value, now)
                    arrived.notify_all()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    latencies = []
    try:
        if not created.wait(5):
            raise RuntimeError("the etcd watch was not created")
        for i in range(puts):
            value = str(i).encode()
            start = time.perf_counter()
            client.put(key, value)
            with arrived:
                arrived.wait_for(lambda v=value: v in seen, timeout=5)
            if value in seen:
                latencies.append(seen[value] - start)
    finally:
        requests.put(None)
        channel.close()
        thread.join(5)
        client.delete(key)
    return latencies


def propagation_case(
    cluster: Cluster, client: Any, profile: Profile, summary: dict[str, Any]
) -> None:
    progress(f"propagation: {profile.propagation_rounds} topics of 1 partition, RF {RF}")
    log_dirs = [cluster.log_dir(n) for n in range(1, NODES + 1)]
    returned, dirs, leaders = [], [], []
    with (
        Admin(cluster.gateway, request_timeout_ms=10000) as admin,
        Admin(cluster.gateway, request_timeout_ms=10000) as md_admin,
    ):
        for i in range(profile.propagation_rounds):
            name = f"prop-{i:03d}"
            t0 = time.perf_counter()
            fs = Poller(DirsReady(log_dirs, {f"{name}-0"}), 0.002, t0)
            md = Poller(leaders_ready(md_admin, {name: 1}), 0.005, t0)
            fs.start()
            md.start()
            admin.create_topics([NewTopic(name, 1, RF)])
            returned.append(time.perf_counter() - t0)
            md_s, fs_s = md.finish(10), fs.finish(10)
            if md_s is None or fs_s is None:
                raise RuntimeError(f"{name}: not ready after 10 s (metadata {md_s}, dirs {fs_s})")
            dirs.append(fs_s)
            leaders.append(md_s)
            time.sleep(0.05)
    progress(f"propagation: etcd watch baseline, {profile.watch_puts} puts")
    watch = watch_baseline(client, cluster.etcd_endpoint, profile.watch_puts)
    for label, values in (("returned", returned), ("dirs", dirs), ("leaders", leaders),
                          ("etcd_watch", watch)):  # fmt: skip
        summary[f"propagation.{label}.p50_ms"] = ms(quantile(values, 0.5))
        summary[f"propagation.{label}.p99_ms"] = ms(quantile(values, 0.99))
        summary[f"propagation.{label}.max_ms"] = ms(max(values))
        summary[f"propagation.{label}.n"] = len(values)
    for label in ("dirs", "leaders"):
        for q in ("p50", "p99"):
            summary[f"ratio.propagation.{label}.{q}_vs_etcd_watch"] = round(
                summary[f"propagation.{label}.{q}_ms"]
                / max(summary[f"propagation.etcd_watch.{q}_ms"], 0.001),
                1,
            )


# ---------------------------------------------------------------- failover


def failover_round(cluster: Cluster, round_no: int) -> dict[str, Any]:
    active = cluster.active_controller()
    if active is None:
        raise RuntimeError("no active controller before the kill")
    standby = next(c for c in cluster.controllers if c != active)
    standby_address = cluster.spec.controller_address(standby)
    victim = cluster.controllers[active]
    assert victim.popen is not None
    t0 = time.perf_counter()

    def standby_names_itself() -> bool:
        response = metadata_of(standby_address, 0.5)
        return (
            response is not None
            and response.HasField("controller")
            and response.controller.node_id == standby
        )

    already_existed = [False]
    attempts = [0]

    def admin_succeeds() -> bool:
        attempts[0] += 1
        with Admin(cluster.gateway, request_timeout_ms=1000) as admin:
            try:
                admin.create_topics([NewTopic(f"fo-{cluster.session_ms}-{round_no}", 1, 1)])
            except TopicAlreadyExistsError:  # an earlier timed-out attempt went through
                already_existed[0] = True
            return True

    named = Poller(standby_names_itself, 0.005, t0)
    served = Poller(admin_succeeds, 0.01, t0)
    os.kill(victim.popen.pid, signal.SIGKILL)
    t0 = time.perf_counter()
    named.t0 = served.t0 = t0
    named.start()
    served.start()
    limit = 10 * cluster.session_ms / 1000 + 10
    named_s, served_s = named.finish(limit), served.finish(limit)
    victim.popen.wait()
    cluster.processes.remove(victim)
    if named_s is None or served_s is None:
        raise RuntimeError(
            f"failover not done after {limit:.0f} s (standby named itself {named_s}, admin "
            f"served {served_s}; last error {served.error})"
        )
    new_active = cluster.active_controller()
    # The killed one comes back as the standby for the next round.
    cluster.start_controller(active)
    return {
        "killed": active,
        "new_active": new_active,
        "named_s": named_s,
        "served_s": served_s,
        "already_existed": already_existed[0],
        "attempts": attempts[0],
    }


def failover_case(cluster: Cluster, profile: Profile, summary: dict[str, Any]) -> None:
    for session_ms in profile.failover_timeouts_ms:
        if session_ms != cluster.session_ms:
            progress(f"failover: restarting the controllers with a {session_ms} ms session")
            cluster.restart_controllers(session_ms)
        ttl_s = session_ms / 1000
        rounds = []
        for i in range(profile.failover_rounds):
            time.sleep(1.0)  # the new standby has loaded its metadata and watches
            result = failover_round(cluster, i)
            rounds.append(result)
            progress(
                f"failover ({session_ms} ms): killed {result['killed']}, controller "
                f"{result['new_active']} named itself after {result['named_s'] * 1000:.0f} ms, "
                f"admin served after {result['served_s'] * 1000:.0f} ms"
            )
        key = f"failover.{session_ms}"
        named = [r["named_s"] for r in rounds]
        served = [r["served_s"] for r in rounds]
        summary[f"{key}.lease_ttl_s"] = ttl_s
        summary[f"{key}.rounds"] = len(rounds)
        summary[f"{key}.named_self.median_ms"] = ms(statistics.median(named))
        summary[f"{key}.named_self.max_ms"] = ms(max(named))
        summary[f"{key}.admin_served.median_ms"] = ms(statistics.median(served))
        summary[f"{key}.admin_served.max_ms"] = ms(max(served))
        summary[f"{key}.admin_served.all_ms"] = [ms(s) for s in served]
        summary[f"{key}.admin_retries_already_existed"] = sum(r["already_existed"] for r in rounds)
        summary[f"ratio.{key}.admin_served.median_vs_ttl"] = round(
            statistics.median(served) / ttl_s, 2
        )
        summary[f"ratio.{key}.admin_served.max_vs_ttl"] = round(max(served) / ttl_s, 2)
        summary[f"target.{key}.within_2x_ttl_met"] = max(served) <= 2 * ttl_s


# ---------------------------------------------------------------- report


def report(summary: dict[str, Any], profile: Profile) -> None:
    s = summary
    n = profile.partitions
    print(
        f"\nstrom controller: {NODES} storage nodes, {CONTROLLERS} controllers, 1 etcd (fsync "
        f"on), gateway; RF {RF}; Python {s['python']}; {os.cpu_count()} cores"
        + ("; QUICK run: " + f"{n} partitions instead of 1,000, fewer rounds" if s["quick"] else "")
    )
    print(
        f"\ncreate {n} partitions (ms from the first CreateTopics call; one run each; "
        "etcd baseline: best of 2)"
    )
    head = (f"{'shape':34} {'txns':>5} {'calls returned':>15} {'leaders in md':>14} "
            f"{'dirs: 1st node':>15} {'all nodes':>10} {'etcd baseline':>14} "
            f"{'returned/etcd':>14} {'dirs/etcd':>10}")  # fmt: skip
    print(head)
    print("-" * len(head))
    shapes = (("single", f"1 topic x {n}, empty cluster"),
              ("second", f"1 topic x {n}, on top of the first"),
              ("many", f"{n // SMALL_TOPIC_PARTITIONS} topics x {SMALL_TOPIC_PARTITIONS}, "
                       "empty cluster"))  # fmt: skip
    for shape, label in shapes:
        p = f"create.{shape}"
        print(
            f"{label:34} {s[p + '.txns']:5d} {fmt(s[p + '.returned_ms'], 15)} "
            f"{fmt(s[p + '.leaders_ms'], 14)} {fmt(s[p + '.dirs_first_node_ms'], 15)} "
            f"{fmt(s[p + '.dirs_ms'], 10)} {fmt(s[p + '.etcd_baseline_ms'], 14)} "
            f"{fmt(s[f'ratio.{p}.returned_vs_etcd'], 14)} {fmt(s[f'ratio.{p}.dirs_vs_etcd'], 10)}"
        )
    if any(s[f"create.{shape}.dirs_ms"] is None for shape, _ in shapes):
        print(
            f"  timeout = not reached within {CREATE_TIMEOUT_S:.0f} s "
            f"({SECOND_TIMEOUT_S:.0f} s for the second topic)"
        )
    print(
        f"\nmetadata propagation, 1-partition RF-{RF} topic, {s['propagation.dirs.n']} rounds "
        f"(ms from the CreateTopics call)"
    )
    head = f"{'what':44} {'p50':>8} {'p99':>8} {'max':>8}"
    print(head)
    print("-" * len(head))
    for label, key in (("CreateTopics returned", "returned"),
                       ("directory on every storage node", "dirs"),
                       ("Metadata via gateway shows it with a leader", "leaders"),
                       (f"baseline: etcd put -> watch callback (n={s['propagation.etcd_watch.n']})",
                        "etcd_watch")):  # fmt: skip
        p = f"propagation.{key}"
        print(f"{label:44} {s[p + '.p50_ms']:8.1f} {s[p + '.p99_ms']:8.1f} {s[p + '.max_ms']:8.1f}")
    print(
        f"  dirs / etcd watch: p50 {s['ratio.propagation.dirs.p50_vs_etcd_watch']}x, "
        f"p99 {s['ratio.propagation.dirs.p99_vs_etcd_watch']}x"
    )
    print(
        f"\nfailover: SIGKILL of the active controller ({profile.failover_rounds} rounds each; ms)"
    )
    head = (f"{'session timeout':16} {'standby named itself':>21} {'admin call served':>18} "
            f"{'max':>8} {'max/TTL':>8} {'<= 2x TTL':>10}")  # fmt: skip
    print(head + "\n" + " " * 17 + f"{'median / max':>21} {'median':>18}")
    print("-" * len(head))
    for session_ms in profile.failover_timeouts_ms:
        p = f"failover.{session_ms}"
        print(
            f"{str(session_ms) + ' ms':16} "
            f"{s[p + '.named_self.median_ms']:>10,.0f} / {s[p + '.named_self.max_ms']:<8,.0f} "
            f"{s[p + '.admin_served.median_ms']:18,.0f} {s[p + '.admin_served.max_ms']:8,.0f} "
            f"{s[f'ratio.{p}.admin_served.max_vs_ttl']:8.2f} "
            f"{'met' if s[f'target.{p}.within_2x_ttl_met'] else 'NOT met':>10}"
        )
    print(f"  metadata during failover: {s['failover.metadata_partitions']:,} partitions in "
          f"{s['failover.metadata_topics']} topics")  # fmt: skip
    print("\nhealth, from the process logs of each cluster:")
    head = (f"{'cluster':10} {'storage registrations expired':>30} {'broker left':>12} "
            f"{'partition state changes':>24} {'stopping took (s)':>18}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for name in ("single", "many", "latency"):
        p = f"health.{name}"
        print(
            f"{name:10} {s[p + '.storage_lease_expirations']:30d} "
            f"{s[p + '.broker_left_events']:12d} {s[p + '.partition_state_changes']:24,d} "
            f"{s[p + '.stop_s']:18.1f}"
        )
    print()


def log_evidence(log_dir: Path) -> dict[str, int]:
    """Counts of tell-tale events in the processes' logs: storage-node registrations that
    expired, "broker left" as seen by one controller (the most any controller log holds: every
    controller logs them), and partition state changes (only the active controller writes
    them; each controller start has its own log file, so they add up)."""
    expired = left = changes = 0
    for path in sorted(log_dir.glob("*.log")):
        text = path.read_text(errors="replace")
        if path.name.startswith("storage-"):
            expired += text.count("registration lease expired")
        elif "controller-" in path.name:
            changes += text.count('"partition state changed"')
            left = max(left, text.count('"broker left'))
    return {"storage_lease_expirations": expired, "broker_left_events": left,
            "partition_state_changes": changes}  # fmt: skip


@contextlib.contextmanager
def fresh_cluster(
    root: Path, name: str, session_ms: int, summary: dict[str, Any]
) -> Iterator[tuple[Cluster, Any]]:
    """A cluster of its own in ``root/name``, stopped on exit; the health counts of its logs
    (before stopping) and the time stopping took (SIGTERM, SIGKILL after 10 s) go to
    ``summary`` under ``health.<name>.``."""
    workdir = root / name
    workdir.mkdir()
    cluster = Cluster(workdir)
    client = None
    progress(f"{name}: starting a cluster in {workdir} (controller session {session_ms} ms)")
    try:
        cluster.start(session_ms)
        client = etcd3.client(HOST, cluster.spec.etcd_client_port)
        yield cluster, client
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
        # Counted before stopping: stopping storage nodes makes the controller move leaders.
        for key, value in log_evidence(workdir / "logs").items():
            summary[f"health.{name}.{key}"] = value
        stop_started = time.perf_counter()
        cluster.stop_all()
        summary[f"health.{name}.stop_s"] = round(time.perf_counter() - stop_started, 1)


def run(profile: Profile, quick: bool, keep: bool) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "quick": quick,
        "python": platform.python_version(),
        "partitions": profile.partitions,
        "replication_factor": RF,
        "storage_nodes": NODES,
        "controllers": CONTROLLERS,
    }
    root = Path(tempfile.mkdtemp(prefix="strom-bench-controller-"))
    session_ms = profile.failover_timeouts_ms[0]
    try:
        with fresh_cluster(root, "single", session_ms, summary) as (cluster, client):
            single_topic_case(cluster, client, profile, summary)
        with fresh_cluster(root, "many", session_ms, summary) as (cluster, client):
            many_topics_case(cluster, client, profile, summary)
        with fresh_cluster(root, "latency", session_ms, summary) as (cluster, client):
            propagation_case(cluster, client, profile, summary)
            with Admin(cluster.gateway, request_timeout_ms=30000) as admin:
                described = admin.describe_topics()
            summary["failover.metadata_topics"] = len(described)
            summary["failover.metadata_partitions"] = sum(len(t.partitions) for t in described)
            failover_case(cluster, profile, summary)
    except BaseException:
        keep = True
        print(f"benchmark failed; data and logs kept in {root}", file=sys.stderr)
        raise
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    report(summary, profile)
    return summary


def main() -> None:
    args = bench_arguments(
        __doc__, "300 partitions, 3 failovers (2 s session only), 10 propagation rounds"
    ).parse_args()
    print_summary(lambda: run(QUICK if args.quick else FULL, args.quick, args.keep))


if __name__ == "__main__":
    main()
