"""A Jepsen-style fault harness: a workload, a nemesis, and a checker over a real cluster.

Workload: producers (the real ``strom.Producer``, acks=all, idempotent) write uniquely numbered
records to a replicated topic and remember, for every acknowledged record, the partition and
offset they were told; a consumer (``strom.Consumer``, assigned every partition) reads alongside
and records every poll. Nemesis (seeded ``random.Random``): kill -9 and restart a storage node,
kill -9 and restart the active controller, SIGSTOP a storage node or the active controller for
longer than its session and SIGCONT it. At most one storage node is faulty at a time, so with
replication factor 3 and min.insync.replicas 2 the cluster should stay writable most of the
time; safety is checked regardless. At the end every fault is healed, the ISRs are waited
for, and the checker reads every partition from every replica (Fetch with the debugging
replica id, up to each replica's high watermark) and counts violations (every count must be 0):

* lost: acknowledged records missing from the partition's leader;
* duplicated: records present more than once (idempotence must prevent it);
* wrong offset: acknowledged records found at another offset than the one acknowledged;
* conflicting offsets: offsets holding different records on different replicas;
* replica divergence: replicas whose log below their high watermark is not a prefix of the
  leader's;
* consumer skips and non-monotonic polls: the consumer saw an offset gap or went backwards
  within its session.

Group churn: a consumer group of member processes (chaos_group_member.py, committing after
processing) reads the topic too; the nemesis also kills -9 members (a replacement starts),
kills -9 a coordinator or pauses it past its session (two coordinators share
``__consumer_offsets``). After the heal the group must catch up with the log, then:

* group records never consumed: acknowledged records no member ever read (at-least-once);
* group commits lost: partitions whose final committed offset is below an offset a member
  was told it committed;
* group not caught up: partitions whose committed offset never reached the log end.

Replay a run with the seed it prints: ``STROM_CHAOS_SEED=<seed> make chaos``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_testkit import LocalCluster, start_local_cluster, wait_until

from strom import Consumer, NewTopic, Producer, TopicPartition
from strom.errors import InvalidReplicationFactorError

TOPIC = "chaos"
PARTITIONS = 3
REPLICAS = 3
STORAGE_NODES = 3
SESSION_MS = 4000  # storage nodes', controllers' and coordinators' etcd sessions
LAG_MAX_MS = 3000
GROUP = "chaos-group"
MEMBER_SESSION_MS = 3000
MEMBER_SCRIPT = Path(__file__).with_name("chaos_group_member.py")


@dataclass
class ChaosSettings:
    seed: int
    duration_s: float
    producers: int = 2
    records_per_second: int = 200  # per producer
    fault_gap_s: tuple[float, float] = (2.0, 6.0)
    group_members: int = 3


@dataclass
class Outcome:
    """What the workload saw; filled by the threads, read by the checker."""

    acked: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (partition, offset)
    failed: Counter[str] = field(default_factory=Counter)  # error class -> count
    failure_examples: dict[str, str] = field(default_factory=dict)  # error class -> a message
    sent: int = 0
    consumed: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    consumer_skips: int = 0
    consumer_backwards: int = 0
    faults: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    group_journals: list[Path] = field(default_factory=list)


# -- workload -------------------------------------------------------------------------------------


def run_producer(
    cluster: LocalCluster,
    index: int,
    settings: ChaosSettings,
    outcome: Outcome,
    stop: threading.Event,
) -> None:
    """Send ``p<index>-<n>`` records paced at ``records_per_second`` until ``stop``."""
    producer = Producer(
        bootstrap_servers=cluster.gateway,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        retry_backoff_ms=100,
        request_timeout_ms=5000,
        delivery_timeout_ms=120000,
        max_block_ms=120000,
    )
    interval = 1 / settings.records_per_second
    started = time.monotonic()
    n = 0
    try:
        while not stop.is_set():
            record_id = f"p{index}-{n}"
            future = producer.send(TOPIC, value=record_id.encode(), partition=n % PARTITIONS)

            def settle(done: Any, record_id: str = record_id) -> None:
                error = done.exception()
                with outcome.lock:
                    if error is None:
                        metadata = done.result()
                        outcome.acked[record_id] = (metadata.partition, metadata.offset)
                    else:
                        outcome.failed[type(error).__name__] += 1
                        outcome.failure_examples.setdefault(type(error).__name__, str(error))

            future.add_done_callback(settle)
            with outcome.lock:
                outcome.sent += 1
            n += 1
            delay = started + n * interval - time.monotonic()
            if delay > 0:
                stop.wait(delay)
    finally:
        producer.close(timeout=150)


def run_consumer(cluster: LocalCluster, outcome: Outcome, stop: threading.Event) -> None:
    consumer = Consumer(
        bootstrap_servers=cluster.gateway, auto_offset_reset="earliest", enable_auto_commit=False
    )
    consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    last: dict[int, int] = {}
    try:
        while not stop.is_set():
            for tp, records in consumer.poll(timeout_ms=500).items():
                for record in records:
                    previous = last.get(tp.partition, -1)
                    with outcome.lock:
                        if record.offset <= previous:
                            outcome.consumer_backwards += 1
                        elif record.offset != previous + 1:
                            outcome.consumer_skips += 1
                        outcome.consumed.setdefault(tp.partition, []).append(
                            (record.offset, (record.value or b"").decode())
                        )
                    last[tp.partition] = record.offset
    finally:
        consumer.close()


class GroupMembers:
    """The consumer group's member processes, each with its own journal."""

    def __init__(self, cluster: LocalCluster, outcome: Outcome) -> None:
        self.cluster = cluster
        self.outcome = outcome
        self.members: list[subprocess.Popen[bytes]] = []
        self._dir = cluster.spec.data_dir / "group"
        self._dir.mkdir(exist_ok=True)

    def start_one(self) -> int:
        journal = self._dir / f"member-{len(self.outcome.group_journals)}.log"
        self.outcome.group_journals.append(journal)
        argv = [
            sys.executable, str(MEMBER_SCRIPT),
            self.cluster.gateway, GROUP, TOPIC, str(journal), str(MEMBER_SESSION_MS),
        ]  # fmt: skip
        log = open(journal.with_suffix(".out"), "wb")  # noqa: SIM115 - closed with the process
        self.members.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        log.close()
        return len(self.members) - 1

    def kill_one(self, rng: random.Random) -> int:
        alive = [i for i, p in enumerate(self.members) if p.poll() is None]
        index = rng.choice(alive)
        self.members[index].kill()
        self.members[index].wait()
        return index

    def stop_all(self) -> None:
        for member in self.members:
            if member.poll() is None:
                member.terminate()
        for member in self.members:
            try:
                member.wait(30)
            except subprocess.TimeoutExpired:
                member.kill()
                member.wait()


def read_journals(journals: list[Path]) -> tuple[set[str], dict[int, int]]:
    """(values read by any member, highest acknowledged commit per partition)."""
    read: set[str] = set()
    committed: dict[int, int] = {}
    for journal in journals:
        if not journal.exists():
            continue
        for line in journal.read_text().splitlines():
            parts = line.split(" ")
            if parts[0] == "R" and len(parts) == 4:
                read.add(parts[3])
            elif parts[0] == "C" and len(parts) == 3:
                partition, offset = int(parts[1]), int(parts[2])
                committed[partition] = max(committed.get(partition, 0), offset)
    return read, committed


def group_offsets(cluster: LocalCluster) -> dict[int, int]:
    with cluster.admin() as admin:
        found = admin.list_consumer_group_offsets(GROUP)
    return {tp.partition: o.offset for tp, o in found.items() if tp.topic == TOPIC}


def wait_for_group(cluster: LocalCluster, timeout_s: float) -> dict[int, int]:
    """Committed offsets once every partition's reached the log end (or the timeout)."""
    with cluster.admin() as admin:
        end = admin.list_offsets({TopicPartition(TOPIC, p): "latest" for p in range(PARTITIONS)})
    ends = {tp.partition: info.offset for tp, info in end.items()}
    deadline = time.monotonic() + timeout_s
    offsets: dict[int, int] = {}
    while time.monotonic() < deadline:
        try:
            offsets = group_offsets(cluster)
        except Exception:
            offsets = {}
        if all(offsets.get(p, -1) >= ends[p] for p in range(PARTITIONS)):
            break
        time.sleep(1)
    return {p: offsets.get(p, -1) - ends[p] for p in range(PARTITIONS)}


# -- nemesis --------------------------------------------------------------------------------------


class Nemesis:
    """Faults on the cluster's processes, chosen by a seeded random generator."""

    def __init__(
        self, cluster: LocalCluster, rng: random.Random, outcome: Outcome, group: GroupMembers
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.outcome = outcome
        self.group = group

    def _note(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        print(f"nemesis: {line}", flush=True)
        self.outcome.faults.append(line)

    def _kill(self, name: str) -> None:
        popen = self.cluster.processes[name].popen
        assert popen is not None
        popen.kill()
        popen.wait()

    def active_controller(self) -> str | None:
        try:
            with self.cluster.admin() as admin:
                controller = admin.describe_cluster().controller
        except Exception:
            return None
        if controller is None or controller.node_id < 0:
            return None  # none active right now (an election is under way)
        return f"controller-{controller.node_id}"

    def one_fault(self) -> None:
        kind = self.rng.choice(
            [
                "kill storage", "kill storage", "pause storage", "kill controller",
                "pause controller", "kill member", "kill member", "kill coordinator",
                "pause coordinator",
            ]
        )  # fmt: skip
        if kind == "kill member":
            index = self.group.kill_one(self.rng)
            self._note(f"kill -9 group member {index}")
            self._note(f"started group member {self.group.start_one()}")
            return
        if kind in ("kill coordinator", "pause coordinator"):
            name = f"coordinator-{self.rng.randint(1, 2)}"
            if kind == "pause coordinator":
                self._pause(name, self.rng.uniform(SESSION_MS / 1000 + 0.5, SESSION_MS / 1000 + 3))
                return
            self._note(f"kill -9 {name}")
            self._kill(name)
            time.sleep(self.rng.uniform(0.5, SESSION_MS / 1000 + 2))
            self.cluster.restart(name)
            self._note(f"restarted {name}")
            return
        if kind == "pause controller":
            name = self.active_controller()
            if name is None:
                return
            self._pause(name, self.rng.uniform(SESSION_MS / 1000 + 0.5, SESSION_MS / 1000 + 3))
            return
        if kind == "kill controller":
            name = self.active_controller()
            if name is None:
                return
            self._note(f"kill -9 {name} (the active controller)")
            self._kill(name)
            time.sleep(self.rng.uniform(0.5, 3.0))
            self.cluster.restart(name)
            self._note(f"restarted {name}")
            return
        name = f"storage-{self.rng.randint(1, STORAGE_NODES)}"
        if kind == "kill storage":
            self._note(f"kill -9 {name}")
            self._kill(name)
            time.sleep(self.rng.uniform(0.5, SESSION_MS / 1000 + 2))
            self.cluster.restart(name)
            self._note(f"restarted {name}")
            return
        self._pause(name, self.rng.uniform(SESSION_MS / 1000 + 0.5, SESSION_MS / 1000 + 3))

    def _pause(self, name: str, seconds: float) -> None:
        """SIGSTOP for longer than the session (the process is declared dead), then SIGCONT:
        it wakes up believing it still leads or is registered, and must be fenced."""
        popen = self.cluster.processes[name].popen
        assert popen is not None
        self._note(f"SIGSTOP {name} for {seconds:.1f} s (session {SESSION_MS / 1000:.0f} s)")
        os.kill(popen.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(popen.pid, signal.SIGCONT)
        self._note(f"SIGCONT {name}")

    def heal(self) -> None:
        """Every process running again."""
        for name, process in self.cluster.processes.items():
            if process.popen is not None and process.exit_code() is None:
                os.kill(process.popen.pid, signal.SIGCONT)
            elif name != "etcd":
                self._note(f"heal: restarting {name}")
                self.cluster.restart(name)


# -- checker --------------------------------------------------------------------------------------


def read_replica(cluster: LocalCluster, node_id: int, partition: int) -> tuple[int, list[str]]:
    """(high watermark, record ids at offsets 0..hw-1) of one replica."""
    high_watermark, records = cluster.replica_records(node_id, TOPIC, partition)
    assert [r.offset for r in records] == list(range(len(records))), "offsets have gaps"
    return high_watermark, [(r.value or b"").decode() for r in records]


def check(
    cluster: LocalCluster, outcome: Outcome, behind: dict[int, int] | None = None
) -> dict[str, int]:
    """Count every violation (see the module docstring); ``behind`` is the group's committed
    offset minus the log end per partition after the catch-up wait."""
    lost = duplicated = wrong_offset = conflicting = divergent = 0
    for partition in range(PARTITIONS):
        leader = cluster.describe(TOPIC).partitions[partition].leader
        copies = {n: read_replica(cluster, n, partition) for n in range(1, STORAGE_NODES + 1)}
        _, log = copies[leader]
        at: dict[str, list[int]] = {}
        for offset, record_id in enumerate(log):
            at.setdefault(record_id, []).append(offset)
        duplicated += sum(len(offsets) - 1 for offsets in at.values())
        for record_id, (acked_partition, acked_offset) in outcome.acked.items():
            if acked_partition != partition:
                continue
            if record_id not in at:
                lost += 1
            elif acked_offset not in at[record_id]:
                wrong_offset += 1
        for offset in range(max(len(values) for _, values in copies.values())):
            held = {values[offset] for _, values in copies.values() if offset < len(values)}
            conflicting += len(held) > 1
        divergent += sum(values != log[: len(values)] for _, values in copies.values())
    read, acked_commits = read_journals(outcome.group_journals)
    final = group_offsets(cluster) if outcome.group_journals else {}
    behind = behind or {}
    return {
        "acknowledged records lost": lost,
        "duplicates": duplicated,
        "records at another offset than acknowledged": wrong_offset,
        "offsets holding different records across replicas": conflicting,
        "consumer poll skips": outcome.consumer_skips,
        "consumer non-monotonic polls": outcome.consumer_backwards,
        "replica divergence below the high watermark": divergent,
        "group records never consumed": (
            sum(record_id not in read for record_id in outcome.acked) if read or final else 0
        ),
        "group commits lost": sum(final.get(p, -1) < offset for p, offset in acked_commits.items()),
        "group partitions not caught up": sum(gap < 0 for gap in behind.values()),
    }


def table(results: dict[str, int], outcome: Outcome, settings: ChaosSettings) -> str:
    width = max(len(k) for k in results)
    lines = [
        f"chaos run: seed {settings.seed}, {settings.duration_s:.0f} s, "
        f"{len(outcome.faults)} nemesis events",
        f"records sent {outcome.sent}, acknowledged {len(outcome.acked)}, "
        f"failed {sum(outcome.failed.values())} {dict(outcome.failed)}, "
        f"consumed {sum(len(v) for v in outcome.consumed.values())}",
        *(f"  e.g. {name}: {message[:300]}" for name, message in outcome.failure_examples.items()),
        f"{'check'.ljust(width)}  count",
        f"{'-' * width}  -----",
        *(f"{name.ljust(width)}  {count}" for name, count in results.items()),
    ]
    return "\n".join(lines)


# -- the run --------------------------------------------------------------------------------------


def start_chaos_cluster(
    data_dir: Path,
    coordinator_flags: tuple[str, ...] = (),
    cluster_class: type[LocalCluster] = LocalCluster,
) -> Iterator[LocalCluster]:
    """The chaos runs' cluster: two coordinators, sessions of SESSION_MS everywhere, a short
    replica lag bound (``coordinator_flags`` are added to the coordinators' own;
    ``cluster_class``: see ``start_local_cluster``)."""
    return start_local_cluster(
        data_dir,
        cluster_class,
        coordinators=2,
        coordinator_flags=(
            "--coordinator.session.timeout.ms", str(SESSION_MS),
            "--group.initial.rebalance.delay.ms", "0",
            "--group.min.session.timeout.ms", "500",
            "--offsets.topic.num.partitions", "6",
            *coordinator_flags,
        ),
        storage_flags=(
            "--broker.session.timeout.ms", str(SESSION_MS),
            "--replica.lag.time.max.ms", str(LAG_MAX_MS),
            "--replica.fetch.backoff.ms", "200",
        ),
        controller_flags=("--controller.session.timeout.ms", str(SESSION_MS)),
    )  # fmt: skip


def chaos_run(data_dir: Path, settings: ChaosSettings) -> tuple[dict[str, int], Outcome]:
    print(f"chaos seed {settings.seed} (replay: STROM_CHAOS_SEED={settings.seed})", flush=True)
    rng = random.Random(settings.seed)
    outcome = Outcome()
    runner = start_chaos_cluster(data_dir)
    cluster = next(runner)
    try:
        create_chaos_topics(cluster, [TOPIC])
        stop = threading.Event()
        workers = [
            threading.Thread(
                target=run_producer,
                args=(cluster, i, settings, outcome, stop),
                name=f"producer-{i}",
            )
            for i in range(settings.producers)
        ]
        workers.append(
            threading.Thread(target=run_consumer, args=(cluster, outcome, stop), name="consumer")
        )
        for worker in workers:
            worker.start()
        group = GroupMembers(cluster, outcome)
        for _ in range(settings.group_members):
            group.start_one()
        nemesis = Nemesis(cluster, rng, outcome, group)
        deadline = time.monotonic() + settings.duration_s
        try:
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(*settings.fault_gap_s))
                if time.monotonic() < deadline:
                    nemesis.one_fault()
        finally:
            nemesis.heal()
            wait_for_full_isr(cluster, 90)
            stop.set()
            for worker in workers:
                worker.join(180)
            try:
                behind = wait_for_group(cluster, 120)
            finally:
                group.stop_all()
        wait_for_full_isr(cluster, 60)
        results = check(cluster, outcome, behind)
        print(table(results, outcome, settings), flush=True)
        return results, outcome
    finally:
        next(runner, None)


def create_chaos_topics(
    cluster: LocalCluster, topics: Sequence[str], timeout_s: float = 60
) -> None:
    """Create ``topics`` (PARTITIONS x REPLICAS, min.insync.replicas 2) and wait for their full
    ISR. Short sessions on a loaded machine can let a node's session lapse while the cluster
    settles: a refusal for too few live brokers is retried until ``timeout_s``."""
    pending = list(topics)
    configs = {"min.insync.replicas": "2"}
    deadline = time.monotonic() + timeout_s
    while pending:
        with cluster.admin() as admin:
            try:
                admin.create_topics(
                    [NewTopic(t, PARTITIONS, REPLICAS, topic_configs=configs) for t in pending]
                )
                pending = []
            except InvalidReplicationFactorError:
                if time.monotonic() > deadline:
                    raise
                existing = set(admin.list_topics())
                pending = [t for t in pending if t not in existing]
                time.sleep(0.5)
    for topic in topics:
        wait_for_full_isr(cluster, timeout_s, topic=topic)


def wait_for_full_isr(cluster: LocalCluster, timeout_s: float, *, topic: str = TOPIC) -> None:
    def full() -> bool:
        try:
            partitions = cluster.describe(topic).partitions
        except Exception:
            return False
        return all(len(p.isr) == REPLICAS and p.leader >= 0 for p in partitions)

    wait_until(full, timeout_s, f"every partition of {topic} to have {REPLICAS} replicas in sync")


def seed_from_env() -> int:
    raw = os.environ.get("STROM_CHAOS_SEED")
    return int(raw) if raw else random.SystemRandom().randrange(1 << 32)
