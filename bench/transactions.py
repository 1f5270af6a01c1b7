"""Benchmark of transactions: what a transaction costs a producer, a read_committed reader, and a
consume-transform-produce loop, against the same work without transactions in the same run.

One real local cluster on loopback (etcd, 2 controllers, 3 storage nodes, the gateway, one
coordinator), data in a temporary directory; every process is stopped at the end, also on
failure. Topics have 6 partitions, replication factor 3, min.insync.replicas 2 (transactions
are for data that matters). Records are 100 random bytes, no key.

* producer throughput, from the first send to the last acknowledgement (the producer warmed
  up): the idempotent producer (acks=all, the baseline) against a transactional producer
  committing every 100, 1,000 and 10,000 records; each transaction's commit latency (the
  ``commit_transaction()`` call: flush of its last batches, EndTxn, the coordinator's log
  write) as p50/p99. Goal: >= 0.9 of the baseline at 1,000 records per transaction.
* the protocol's floor: one transaction of one record done with bare RPCs (no client library):
  AddPartitionsToTxn (which also waits for the previous transaction's markers), a transactional
  Produce with acks=all (the leader verifies it with the coordinator), EndTxn; its p50 per
  step. The ceiling of a producer at N records per transaction is then
  N / (N / idempotent rate + floor), and each transactional figure is also reported as a ratio
  of its ceiling: what the client adds, against what the protocol costs on this machine.
* consumer throughput over the records the 1,000-per-transaction producer wrote:
  read_committed against read_uncommitted (goal >= 0.95).
* end-to-end latency of the example consume-transform-produce application
  (clients/examples/transform.py, run as its own process: read_committed consumer in a group,
  one transaction per poll carrying its output and input offsets): input records at 1,000/s
  (``--quick``: 500/s; ``--e2e-rate``), sent one request each (``--feed-linger-ms`` lets
  the feeding producer batch), each value carrying ``time.perf_counter_ns()`` at its send; a
  read_committed reader of the output (in this process) takes each record's latency when it
  sees it. ``--example`` measures another program with the example's command line, and
  ``--compare-example`` a second one in the same run (before/after a change).

Throughput figures are the best of 2 repetitions (``--quick``: 1). The last line is
``SUMMARY {json}``.

    .venv/bin/python bench/transactions.py            # full run, a few minutes
    .venv/bin/python bench/transactions.py --quick    # under a minute
    .venv/bin/python bench/transactions.py --pipeline-only   # the floor and the pipeline only
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from benchkit import (
    bench_arguments,
    free_base_port,
    free_port,
    print_summary,
    progress,
    work_dir,
)
from replication import latency_figures, poll_until

from strom import Admin, Consumer, NewTopic, Producer, TopicPartition
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    gateway_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
    transaction_pb2,
)
from strom.records import encode_batch
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.supervisor import Supervisor

PARTITIONS = 6
EXAMPLE = Path(__file__).resolve().parents[1] / "clients" / "examples" / "transform.py"
REPLICAS = 3
VALUE_SIZE = 100
PER_TRANSACTION = (100, 1000, 10_000)
TARGETS = {"txn_1000_vs_idempotent": 0.9, "read_committed_vs_read_uncommitted": 0.95}


@dataclass(frozen=True)
class Profile:
    records: int
    repeat: int
    e2e_s: float
    e2e_rate: int
    #: linger_ms of the pipeline's feeding producer (0: one request per input record).
    feed_linger_ms: int = 0


FULL = Profile(records=200_000, repeat=2, e2e_s=10.0, e2e_rate=1000)
QUICK = Profile(records=40_000, repeat=1, e2e_s=4.0, e2e_rate=500)


@contextlib.contextmanager
def running(workdir: Path) -> Iterator[str]:
    spec = LocalClusterSpec(
        data_dir=workdir,
        etcd_client_port=free_port(),
        etcd_peer_port=free_port(),
        base_port=free_base_port(1 + 3 + 2 + 1),
        storage_nodes=3,
        controllers=2,
        coordinators=1,
    )
    processes = spec.processes()
    supervisor = Supervisor(processes, grace_s=30.0)
    try:
        supervisor.start_all(60.0)
        yield spec.gateway_address
    except BaseException:
        for process in processes:
            print(f"--- last lines of {process.log_path}:\n{process.tail(20)}", file=sys.stderr)
        raise
    finally:
        supervisor.stop_all()


def tps(topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(PARTITIONS)]


def create_topics(gateway: str, names: list[str]) -> None:
    with Admin(gateway, request_timeout_ms=30000) as admin:
        poll_until(lambda: len(admin.describe_cluster().brokers) == 3, 60, "3 storage nodes")
        configs = {"min.insync.replicas": "2"}
        admin.create_topics(
            [NewTopic(n, PARTITIONS, REPLICAS, topic_configs=configs) for n in names]
        )

        def ready() -> bool:
            return all(
                p.leader >= 0 and len(p.isr) == REPLICAS
                for t in admin.describe_topics(names)
                for p in t.partitions
            )

        poll_until(ready, 60, "a leader and a full ISR for every partition")


def produce_idempotent(gateway: str, topic: str, values: list[bytes]) -> float:
    with Producer(gateway, acks="all", enable_idempotence=True) as producer:
        for p in range(PARTITIONS):
            producer.send(topic, b"warm-up", partition=p)
        producer.flush()
        gc.collect()
        send = producer.send
        start = time.perf_counter()
        for value in values:
            last = send(topic, value)
        producer.flush()
        elapsed = time.perf_counter() - start
        last.result(0)
        return elapsed


def produce_transactional(
    gateway: str, topic: str, values: list[bytes], per_txn: int, txn_id: str
) -> tuple[float, list[float]]:
    """(seconds for every record, commit latencies in ms)."""
    commits: list[float] = []
    with Producer(gateway, transactional_id=txn_id) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for p in range(PARTITIONS):
            producer.send(topic, b"warm-up", partition=p)
        producer.commit_transaction()
        gc.collect()
        send = producer.send
        start = time.perf_counter()
        for i in range(0, len(values), per_txn):
            producer.begin_transaction()
            for value in values[i : i + per_txn]:
                send(topic, value)
            t0 = time.perf_counter()
            producer.commit_transaction()
            commits.append((time.perf_counter() - t0) * 1000)
        return time.perf_counter() - start, commits


def protocol_floor(gateway: str, topic: str, rounds: int) -> dict[str, float]:
    """p50 ms of each step of a one-record transaction done with bare RPCs (module docstring)."""
    with Admin(gateway) as admin:
        leader = admin.describe_topics([topic])[0].partitions[0].leader
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in admin.describe_cluster().brokers}
    with (
        grpc.insecure_channel(gateway) as gw_channel,
        grpc.insecure_channel(brokers[leader]) as node_channel,
    ):
        gw = gateway_pb2_grpc.GatewayStub(gw_channel)
        node = storage_pb2_grpc.StorageNodeStub(node_channel)
        init = gw.InitProducerId(
            controller_pb2.InitProducerIdRequest(
                transactional_id="bench-floor", transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1,
            )
        )  # fmt: skip
        pid, epoch = init.producer_id, init.producer_epoch
        steps: dict[str, list[float]] = {"add": [], "produce": [], "end": [], "total": []}
        for _ in range(rounds):
            t0 = time.perf_counter()
            added = gw.AddPartitionsToTxn(
                transaction_pb2.AddPartitionsToTxnRequest(
                    transactional_id="bench-floor", producer_id=pid, producer_epoch=epoch,
                    partitions=[common_pb2.TopicPartition(topic=topic, partition=0)],
                )
            )  # fmt: skip
            t1 = time.perf_counter()
            batch = encode_batch(
                [(int(time.time() * 1000), None, bytes(VALUE_SIZE))],
                producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True,
            )  # fmt: skip
            produced = node.Produce(
                storage_pb2.ProduceRequest(
                    acks=-1, timeout_ms=10000, transactional_id="bench-floor",
                    partitions=[
                        storage_pb2.ProducePartitionData(topic=topic, partition=0, records=batch)
                    ],
                )
            )  # fmt: skip
            t2 = time.perf_counter()
            ended = gw.EndTxn(
                transaction_pb2.EndTxnRequest(
                    transactional_id="bench-floor", producer_id=pid, producer_epoch=epoch,
                    committed=True,
                )
            )  # fmt: skip
            t3 = time.perf_counter()
            errors = (added.error_code, produced.partitions[0].error_code, ended.error_code)
            if any(errors):
                raise RuntimeError(f"protocol floor: error codes {errors}")
            pid, epoch = ended.producer_id, ended.producer_epoch
            for name, ms in zip(
                ("add", "produce", "end", "total"),
                ((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000, (t3 - t0) * 1000),
                strict=True,
            ):
                steps[name].append(ms)
    return {f"{name}_p50_ms": quantile(values, 0.5) for name, values in steps.items()}


def consume(gateway: str, topic: str, n: int, isolation_level: str) -> float:
    with Consumer(
        bootstrap_servers=gateway,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=isolation_level,
    ) as consumer:
        consumer.assign(tps(topic))
        gc.collect()
        got, deadline = 0, time.monotonic() + 120
        start = time.perf_counter()
        while got < n:
            for records in consume_page(consumer).values():
                got += len(records)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{isolation_level}: consumed {got} of {n} records in 120 s")
        return time.perf_counter() - start


def consume_page(consumer: Consumer) -> dict[TopicPartition, list[Any]]:
    return consumer.poll(timeout_ms=1000, max_records=10_000)


def pipeline_latency(
    gateway: str, profile: Profile, workdir: Path, example: Path = EXAMPLE, name: str = "pipe"
) -> dict[str, Any]:
    """The example application's end-to-end latency (see the module docstring): it runs as a
    process of its own, as it would in production; this process feeds its input
    (``<name>-in``) and reads its output (``<name>-out``) with read_committed."""
    stop = threading.Event()
    latencies: list[int] = []

    def read_output() -> None:
        with Consumer(
            bootstrap_servers=gateway,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
        ) as consumer:
            consumer.assign(tps(f"{name}-out"))
            while not stop.is_set():
                for records in consumer.poll(timeout_ms=100).values():
                    now = time.perf_counter_ns()
                    latencies.extend(now - int(r.value.split(b" ", 1)[0]) for r in records)

    argv = [
        sys.executable, str(example), f"{name}-in", f"{name}-out", "--bootstrap-server", gateway,
        "--group", f"bench-{name}", "--transactional-id", f"bench-{name}",
    ]  # fmt: skip
    log = open(workdir / f"{name}-example.log", "wb")  # noqa: SIM115 - closed below
    app = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    reader = threading.Thread(target=read_output)
    reader.start()
    sent = 0
    try:
        wait_for_member(gateway, f"bench-{name}")
        # Digits and spaces: the example upper-cases values, which leaves them alone.
        with Producer(
            gateway, acks="all", enable_idempotence=True, linger_ms=profile.feed_linger_ms
        ) as producer:
            start = time.perf_counter()
            total = int(profile.e2e_s * profile.e2e_rate)
            for i in range(total):
                delay = start + i / profile.e2e_rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                value = f"{time.perf_counter_ns()} ".ljust(VALUE_SIZE).encode()
                producer.send(f"{name}-in", value, partition=i % PARTITIONS)
                sent += 1
            producer.flush()
        deadline = time.monotonic() + 30
        while len(latencies) < sent and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        reader.join(60)
        app.terminate()
        try:
            app.wait(30)
        except subprocess.TimeoutExpired:
            app.kill()
        log.close()
    figures = latency_figures(latencies) if latencies else {}
    figures.update(
        rate=profile.e2e_rate,
        feed_linger_ms=profile.feed_linger_ms,
        sent=sent,
        delivered=len(latencies),
    )
    return figures


def wait_for_member(gateway: str, group: str) -> None:
    """Until the example owns partitions in its group (then its input is read at once)."""
    with Admin(gateway) as admin:

        def assigned() -> bool:
            described = admin.describe_consumer_groups([group])[group]
            return described.state == "Stable" and any(
                m.assignment.topic_partitions for m in described.members
            )

        poll_until(assigned, 120, f"the example's consumer in group {group!r}")


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_pipeline_only(
    profile: Profile, quick: bool, keep: bool, example: Path, compare: Path | None
) -> dict[str, Any]:
    """``--pipeline-only``: the protocol's floor (the baseline) and the pipeline's latency;
    with ``compare``, that program's latency too (same cluster, topics of its own)."""
    summary: dict[str, Any] = {"quick": quick, "pipeline_only": True, "cpus": os.cpu_count()}
    with work_dir("strom-bench-txn-", keep) as workdir:
        progress(f"starting a cluster in {workdir} ...")
        with running(workdir) as gateway:
            create_topics(gateway, ["pipe-in", "pipe-out", "floor", "other-in", "other-out"])
            progress("the protocol's floor ...")
            summary["protocol_floor"] = protocol_floor(gateway, "floor", 30 if quick else 100)
            progress(f"consume-transform-produce latency of {example} ...")
            summary["pipeline_e2e"] = pipeline_latency(gateway, profile, workdir, example)
            if compare is not None:
                progress(f"consume-transform-produce latency of {compare} ...")
                summary["compared_e2e"] = pipeline_latency(
                    gateway, profile, workdir, compare, "other"
                )
    floor = summary["protocol_floor"]
    ratios: dict[str, float] = {}
    for key, program in (("pipeline_e2e", example), ("compared_e2e", compare)):
        e2e = summary.get(key, {})
        if "p50_ms" not in e2e:
            continue
        ratios[f"{key}_p50_vs_floor"] = e2e["p50_ms"] / floor["total_p50_ms"]
        print(
            f"\n{program}: consume-transform-produce at {e2e['rate']}/s: p50 "
            f"{e2e['p50_ms']:.1f} ms, p99 {e2e['p99_ms']:.1f} ms ({e2e['delivered']} of "
            f"{e2e['sent']} delivered)"
        )
    if "p50_ms" in summary.get("compared_e2e", {}) and "p50_ms" in summary["pipeline_e2e"]:
        for q in ("p50_ms", "p99_ms"):
            ratios[f"pipeline_{q[:3]}_vs_compared"] = (
                summary["pipeline_e2e"][q] / summary["compared_e2e"][q]
            )
    print(f"the protocol's floor per transaction {floor['total_p50_ms']:.1f} ms; ratios {ratios}")
    summary["ratios"] = ratios
    return summary


def run(profile: Profile, quick: bool, keep: bool, example: Path = EXAMPLE) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "quick": quick,
        "records": profile.records,
        "repeat": profile.repeat,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    raw = os.urandom(VALUE_SIZE * profile.records)
    values = [raw[i : i + VALUE_SIZE] for i in range(0, len(raw), VALUE_SIZE)]
    del raw
    rates: dict[str, float] = {}
    commit_ms: dict[str, dict[str, float]] = {}
    with work_dir("strom-bench-txn-", keep) as workdir:
        progress(f"starting a cluster in {workdir} ...")
        with running(workdir) as gateway:
            topics = ["idempotent", *(f"txn-{n}" for n in PER_TRANSACTION), "pipe-in", "pipe-out",
                      "floor"]  # fmt: skip
            create_topics(gateway, topics)
            for repetition in range(profile.repeat):
                progress(f"producers, repetition {repetition + 1} of {profile.repeat} ...")
                seconds = produce_idempotent(gateway, "idempotent", values)
                rates["idempotent"] = max(rates.get("idempotent", 0), len(values) / seconds)
                for per_txn in PER_TRANSACTION:
                    name = f"transactional {per_txn}/txn"
                    seconds, commits = produce_transactional(
                        gateway, f"txn-{per_txn}", values, per_txn, f"bench-{per_txn}"
                    )
                    rates[name] = max(rates.get(name, 0), len(values) / seconds)
                    commit_ms[name] = {
                        "p50_ms": quantile(commits, 0.5),
                        "p99_ms": quantile(commits, 0.99),
                        "commits": len(commits),
                    }
                    progress(f"{name}: {rates[name]:,.0f} records/s")
            total = len(values) * profile.repeat + PARTITIONS * profile.repeat  # + warm-ups
            reads: dict[str, float] = {}
            for repetition in range(profile.repeat):
                progress(f"consumers, repetition {repetition + 1} ...")
                for level in ("read_uncommitted", "read_committed"):
                    seconds = consume(gateway, "txn-1000", total, level)
                    reads[level] = max(reads.get(level, 0), total / seconds)
            progress("the protocol's floor ...")
            summary["protocol_floor"] = protocol_floor(gateway, "floor", 30 if quick else 100)
            progress("consume-transform-produce latency ...")
            summary["pipeline_e2e"] = pipeline_latency(gateway, profile, workdir, example)
        progress("done")
    summary["producer_records_per_s"] = rates
    summary["commit_latency"] = commit_ms
    summary["consumer_records_per_s"] = reads
    ratios = {
        f"txn_{n}_vs_idempotent": rates[f"transactional {n}/txn"] / rates["idempotent"]
        for n in PER_TRANSACTION
    }
    floor_s = summary["protocol_floor"]["total_p50_ms"] / 1000
    for n in PER_TRANSACTION:
        ceiling = n / (n / rates["idempotent"] + floor_s)
        ratios[f"txn_{n}_vs_protocol_ceiling"] = rates[f"transactional {n}/txn"] / ceiling
    ratios["read_committed_vs_read_uncommitted"] = (
        reads["read_committed"] / reads["read_uncommitted"]
    )
    summary["ratios"] = ratios
    summary["targets"] = TARGETS
    summary["targets_met"] = {name: ratios[name] >= goal for name, goal in TARGETS.items()}
    print_report(summary)
    return summary


def print_report(summary: dict[str, Any]) -> None:
    base = summary["producer_records_per_s"]["idempotent"]
    print(f"\n{'producer':<28}{'records/s':>12}{'vs idempotent':>15}{'commit p50/p99 ms':>20}")
    for name, rate in summary["producer_records_per_s"].items():
        commit = summary["commit_latency"].get(name)
        latency = f"{commit['p50_ms']:.1f}/{commit['p99_ms']:.1f}" if commit else "-"
        print(f"{name:<28}{rate:>12,.0f}{rate / base:>15.2f}{latency:>20}")
    reads = summary["consumer_records_per_s"]
    print(f"\n{'consumer':<28}{'records/s':>12}")
    for level, rate in reads.items():
        print(f"{level:<28}{rate:>12,.0f}")
    floor = summary["protocol_floor"]
    print(
        f"\nprotocol floor per transaction (bare RPCs, p50): AddPartitionsToTxn "
        f"{floor['add_p50_ms']:.1f} ms, verified Produce acks=all "
        f"{floor['produce_p50_ms']:.1f} ms, "
        f"EndTxn {floor['end_p50_ms']:.1f} ms; whole {floor['total_p50_ms']:.1f} ms"
    )
    e2e = summary["pipeline_e2e"]
    if "p50_ms" in e2e:
        print(
            f"\nconsume-transform-produce at {e2e['rate']}/s: p50 {e2e['p50_ms']:.1f} ms, "
            f"p99 {e2e['p99_ms']:.1f} ms ({e2e['delivered']} of {e2e['sent']} delivered)"
        )
    print(f"ratios: { {k: round(v, 3) for k, v in summary['ratios'].items()} }\n")


def main() -> None:
    parser = bench_arguments(__doc__, "fewer records, one repetition; under a minute")
    parser.add_argument(
        "--pipeline-only",
        action="store_true",
        help="measure only the protocol's floor and the consume-transform-produce latency",
    )
    parser.add_argument(
        "--example",
        type=Path,
        default=EXAMPLE,
        help="the consume-transform-produce program to measure (the example's CLI)",
    )
    parser.add_argument(
        "--compare-example",
        type=Path,
        default=None,
        help="with --pipeline-only: a second such program, measured in the same run",
    )
    parser.add_argument(
        "--e2e-rate",
        type=int,
        default=None,
        help="input records per second of the pipeline measurement (default 1000, quick 500)",
    )
    parser.add_argument(
        "--feed-linger-ms",
        type=int,
        default=0,
        help="linger_ms of the producer feeding the pipeline (default 0: a request per record)",
    )
    args = parser.parse_args()
    profile = QUICK if args.quick else FULL
    profile = dataclasses.replace(profile, feed_linger_ms=args.feed_linger_ms)
    if args.e2e_rate is not None:
        profile = dataclasses.replace(profile, e2e_rate=args.e2e_rate)
    if args.pipeline_only:
        print_summary(
            lambda: run_pipeline_only(
                profile, args.quick, args.keep, args.example, args.compare_example
            )
        )
        return
    print_summary(lambda: run(profile, args.quick, args.keep, args.example))


if __name__ == "__main__":
    main()
