"""The transactional workload of the fault harness, and its checker (Jepsen's 2024 Kafka
findings are what it looks for).

Workload, on a 3-node cluster with two coordinators (RF 3, min.insync.replicas 2):

* writers (threads, one transactional id each) run transactions of 3 to 20 uniquely numbered
  records spread over the 3 partitions of ``txn``, committing 4 in 5 and aborting the rest; each
  transaction's fate is recorded as the client saw it: committed, aborted, or unknown (the
  commit call raised; the transaction may have committed);
* a consume-transform-produce pipeline: a plain idempotent producer writes numbered records to
  ``txn-in``; worker processes (chaos_txn_worker.py, one transactional id per slot) read it with
  read_committed in a group and write each record to ``txn-out`` in transactions that also
  commit the input offsets (``send_offsets_to_transaction``);
* a read_committed reader follows ``txn`` live.

Nemesis: chaos_harness.Nemesis (kill -9 / SIGSTOP of storage nodes, the active controller and
coordinators), whose "group member" faults kill -9 a pipeline worker mid-transaction; a new
worker with the killed one's transactional id replaces it.

Checker, after healing and draining (every count must be 0):

* aborted reads: a read_committed reader (live or final) saw a record of an aborted transaction;
* committed writes lost: a record of a transaction whose commit returned is not readable;
* transactions seen partially: a transaction (whatever its fate) with some but not all of its
  records visible to the final read_committed read;
* duplicates: a record visible twice in ``txn``;
* non-monotonic offsets: the live reader went backwards within a partition;
* pipeline records missing / duplicated: an acknowledged ``txn-in`` record absent from, or
  present more than once in, ``txn-out`` (exactly-once processing across worker kills). Each
  duplicated input is explained from the log (``txn_attribution``): every committed copy with
  its offset, transactional id, producer id and epoch (the transaction) and commit marker; the
  table shows the first ones, ``pipeline-duplicates.txt`` in the run's directory all of them.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from chaos_harness import (
    Nemesis,
    create_chaos_topics,
    seed_from_env,
    start_chaos_cluster,
    wait_for_full_isr,
)
from cluster_testkit import LocalCluster, read_values
from txn_attribution import committed_copies, describe_duplicates

from strom import Consumer, Producer, StromError, TopicPartition
from strom.errors import InvalidProducerEpochError, ProducerFencedError

__all__ = ["TxnChaosSettings", "seed_from_env", "txn_chaos_run"]

TXN_TOPIC = "txn"
IN_TOPIC = "txn-in"
OUT_TOPIC = "txn-out"
PARTITIONS = 3
REPLICAS = 3
PIPELINE_GROUP = "txn-pipeline"
WORKER_SCRIPT = Path(__file__).with_name("chaos_txn_worker.py")
#: How many duplicated inputs the table explains (the file has them all).
_DUPLICATES_SHOWN = 10


def worker_transactional_id(slot: int) -> str:
    """The transactional id of the pipeline worker in ``slot`` (kept across its restarts)."""
    return f"chaos-pipeline-{slot}"


_FATAL = (ProducerFencedError, InvalidProducerEpochError)


@dataclass
class TxnChaosSettings:
    seed: int
    duration_s: float
    writers: int = 2
    workers: int = 2
    input_records_per_second: int = 100
    fault_gap_s: tuple[float, float] = (3.0, 7.0)
    abort_ratio: float = 0.2


@dataclass
class TxnOutcome:
    """What the workload saw; filled by the threads, read by the checker."""

    #: transaction name -> (record ids, "committed" | "aborted" | "unknown")
    transactions: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    error_examples: dict[str, str] = field(default_factory=dict)
    live_seen: set[str] = field(default_factory=set)
    live_backwards: int = 0
    input_acked: set[str] = field(default_factory=set)
    #: records of aborted transactions that a read_uncommitted reader finds in the log
    aborted_in_log: int = 0
    faults: list[str] = field(default_factory=list)
    #: Input partitions whose committed offset never reached the end of txn-in.
    pipeline_behind: int = 0
    #: One line per duplicated pipeline input: who wrote each committed copy.
    duplicates_explained: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, where: str, exc: BaseException) -> None:
        name = f"{where}: {type(exc).__name__}"
        with self.lock:
            self.errors[name] += 1
            self.error_examples.setdefault(name, str(exc)[:300])


# -- workload -------------------------------------------------------------------------------------


def _transactional_producer(cluster: LocalCluster, txn_id: str) -> Producer:
    producer = Producer(
        bootstrap_servers=cluster.gateway,
        transactional_id=txn_id,
        transaction_timeout_ms=10000,
        linger_ms=2,
        request_timeout_ms=5000,
        delivery_timeout_ms=60000,
        max_block_ms=60000,
    )
    producer.init_transactions()
    return producer


def run_writer(
    cluster: LocalCluster,
    index: int,
    settings: TxnChaosSettings,
    outcome: TxnOutcome,
    stop: threading.Event,
) -> None:
    """Transactions of random size and fate until ``stop``; see the module docstring."""
    rng = random.Random(settings.seed * 1000 + index)
    txn_id = f"chaos-writer-{index}"
    producer: Producer | None = None
    number = 0
    while not stop.is_set():
        if producer is None:
            try:
                producer = _transactional_producer(cluster, txn_id)
            except StromError as exc:
                outcome.error(f"writer init {index}", exc)
                stop.wait(1)
                continue
        name = f"w{index}-{number}"
        number += 1
        ids = [f"{name}-{k}" for k in range(rng.randint(3, 20))]
        commit = rng.random() >= settings.abort_ratio
        fate = "aborted"
        try:
            producer.begin_transaction()
            with outcome.lock:
                outcome.transactions[name] = (ids, "unknown")
            for k, record_id in enumerate(ids):
                producer.send(TXN_TOPIC, value=record_id.encode(), partition=k % PARTITIONS)
            if commit:
                try:
                    producer.commit_transaction()
                    fate = "committed"
                except StromError as exc:
                    outcome.error("commit", exc)
                    fate = "unknown"  # the commit may have been decided before the error
                    raise
            else:
                producer.flush()  # the aborted records reach the log: a reader could see them
                producer.abort_transaction()
        except StromError as exc:
            if fate != "unknown":
                outcome.error("transaction", exc)
                fate = _abort_or_unknown(producer, outcome)
            if fate == "unknown" or isinstance(exc, _FATAL):
                producer.close(timeout=30)
                producer = None  # a new incarnation fences this one and ends what it left open
        with outcome.lock:
            outcome.transactions[name] = (ids, fate)
    if producer is not None:
        producer.close(timeout=30)


def _abort_or_unknown(producer: Producer, outcome: TxnOutcome) -> str:
    try:
        producer.abort_transaction()
        return "aborted"
    except StromError as exc:
        outcome.error("abort", exc)
        return "unknown"


def run_input_producer(
    cluster: LocalCluster, settings: TxnChaosSettings, outcome: TxnOutcome, stop: threading.Event
) -> None:
    producer = Producer(
        bootstrap_servers=cluster.gateway,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        request_timeout_ms=5000,
        delivery_timeout_ms=120000,
        max_block_ms=120000,
    )
    interval = 1 / settings.input_records_per_second
    started = time.monotonic()
    n = 0
    try:
        while not stop.is_set():
            record_id = f"i{n}"
            future = producer.send(IN_TOPIC, value=record_id.encode(), partition=n % PARTITIONS)

            def settle(done: object, record_id: str = record_id) -> None:
                if done.exception() is None:  # type: ignore[attr-defined]
                    with outcome.lock:
                        outcome.input_acked.add(record_id)

            future.add_done_callback(settle)
            n += 1
            delay = started + n * interval - time.monotonic()
            if delay > 0:
                stop.wait(delay)
    finally:
        producer.close(timeout=150)


def run_live_reader(cluster: LocalCluster, outcome: TxnOutcome, stop: threading.Event) -> None:
    consumer = Consumer(
        bootstrap_servers=cluster.gateway,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    consumer.assign([TopicPartition(TXN_TOPIC, p) for p in range(PARTITIONS)])
    last: dict[int, int] = {}
    try:
        while not stop.is_set():
            try:
                polled = consumer.poll(timeout_ms=500)
            except StromError as exc:
                outcome.error("live reader", exc)
                continue
            for tp, records in polled.items():
                for record in records:
                    with outcome.lock:
                        if record.offset <= last.get(tp.partition, -1):
                            outcome.live_backwards += 1
                        outcome.live_seen.add((record.value or b"").decode())
                    last[tp.partition] = record.offset
    finally:
        consumer.close()


class PipelineWorkers:
    """The pipeline's worker processes; the nemesis kills them as "group members"."""

    def __init__(self, cluster: LocalCluster, count: int) -> None:
        self.cluster = cluster
        self._dir = cluster.spec.data_dir / "pipeline"
        self._dir.mkdir(exist_ok=True)
        self.slots: list[subprocess.Popen[bytes] | None] = [None] * count
        self._killed: list[int] = []
        self._starts = 0

    def start_slot(self, slot: int) -> None:
        self._starts += 1
        journal = self._dir / f"worker-{slot}-{self._starts}.log"
        argv = [
            sys.executable, str(WORKER_SCRIPT), self.cluster.gateway, PIPELINE_GROUP,
            IN_TOPIC, OUT_TOPIC, worker_transactional_id(slot), str(journal),
        ]  # fmt: skip
        with open(journal.with_suffix(".out"), "wb") as log:
            self.slots[slot] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def start_all(self) -> None:
        for slot in range(len(self.slots)):
            self.start_slot(slot)

    def kill_one(self, rng: random.Random) -> int:
        alive = [i for i, p in enumerate(self.slots) if p is not None and p.poll() is None]
        slot = rng.choice(alive) if alive else 0
        popen = self.slots[slot]
        if popen is not None:
            popen.kill()
            popen.wait()
        self._killed.append(slot)
        return slot

    def start_one(self) -> int:
        """Restart the slot killed last (same transactional id), or any dead one."""
        dead = [i for i, p in enumerate(self.slots) if p is None or p.poll() is not None]
        slot = self._killed.pop() if self._killed else (dead[0] if dead else 0)
        self.start_slot(slot)
        return slot

    def revive(self) -> None:
        for slot, popen in enumerate(self.slots):
            if popen is None or popen.poll() is not None:
                self.start_slot(slot)

    def stop_all(self) -> None:
        for popen in self.slots:
            if popen is not None and popen.poll() is None:
                popen.terminate()
        for popen in self.slots:
            if popen is None:
                continue
            try:
                popen.wait(60)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


# -- checker --------------------------------------------------------------------------------------


def check(cluster: LocalCluster, outcome: TxnOutcome, workers: int) -> dict[str, int]:
    final = read_values(cluster, TXN_TOPIC, isolation_level="read_committed", timeout_s=120)
    visible = Counter(final)
    aborted_reads = lost = partial = 0
    for ids, fate in outcome.transactions.values():
        seen = sum(1 for i in ids if i in visible)
        if fate == "aborted":
            aborted_reads += sum(1 for i in ids if i in visible or i in outcome.live_seen)
        if fate == "committed":
            lost += len(ids) - seen
        partial += 0 < seen < len(ids)
    # The checker can only catch an aborted read if aborted records are in the log at all.
    everything = set(read_values(cluster, TXN_TOPIC, isolation_level="read_uncommitted"))
    outcome.aborted_in_log = sum(
        1 for ids, fate in outcome.transactions.values() if fate == "aborted"
        for i in ids if i in everything
    )  # fmt: skip
    output_values = read_values(cluster, OUT_TOPIC, isolation_level="read_committed", timeout_s=120)
    output = Counter(v.split(":", 2)[2] for v in output_values)
    explained = explain_duplicates(cluster, outcome, workers)
    counted = {input_id for input_id, n in output.items() if n > 1}
    return {
        "aborted reads": aborted_reads,
        "committed writes lost": lost,
        "transactions seen partially": partial,
        "duplicates": sum(n - 1 for n in visible.values()),
        "non-monotonic offsets (live reader)": outcome.live_backwards,
        "pipeline records missing": sum(1 for i in outcome.input_acked if i not in output),
        "pipeline partitions not caught up": outcome.pipeline_behind,
        "pipeline records duplicated": sum(n - 1 for n in output.values()),
        # The read_committed read and the log's own markers must agree on what was duplicated.
        "pipeline duplicates read vs log differ": len(counted ^ explained),
    }


def explain_duplicates(cluster: LocalCluster, outcome: TxnOutcome, workers: int) -> set[str]:
    """Fill ``outcome.duplicates_explained`` from ``txn-out``'s log and write it to
    ``pipeline-duplicates.txt`` in the run's directory; the input ids committed more than once
    according to the log."""
    txn_ids = [worker_transactional_id(slot) for slot in range(workers)]
    with cluster.admin() as admin:
        owners = {
            d.producer_id: d.transactional_id for d in admin.describe_transactions(txn_ids).values()
        }
    copies = committed_copies(cluster, OUT_TOPIC, PARTITIONS)
    outcome.duplicates_explained = describe_duplicates(copies, OUT_TOPIC, owners)
    path = cluster.spec.data_dir / "pipeline-duplicates.txt"
    path.write_text("".join(line + "\n" for line in outcome.duplicates_explained))
    return {input_id for input_id, found in copies.items() if len(found) > 1}


def table(results: dict[str, int], outcome: TxnOutcome, settings: TxnChaosSettings) -> str:
    fates = Counter(fate for _, fate in outcome.transactions.values())
    width = max(len(k) for k in results)
    lines = [
        f"transactional chaos run: seed {settings.seed}, {settings.duration_s:.0f} s, "
        f"{len(outcome.faults)} nemesis events",
        f"transactions {dict(fates)} ({outcome.aborted_in_log} aborted records in the log), "
        f"pipeline input acknowledged {len(outcome.input_acked)}, "
        f"errors {dict(outcome.errors)}",
        *(f"  e.g. {name}: {message}" for name, message in outcome.error_examples.items()),
        f"{'check'.ljust(width)}  count",
        f"{'-' * width}  -----",
        *(f"{name.ljust(width)}  {count}" for name, count in results.items()),
    ]
    if outcome.duplicates_explained:
        shown = outcome.duplicates_explained[:_DUPLICATES_SHOWN]
        lines += [
            f"duplicated pipeline inputs ({len(outcome.duplicates_explained)}; the first "
            f"{len(shown)}, all in pipeline-duplicates.txt):",
            *(f"  {line}" for line in shown),
        ]
    return "\n".join(lines)


# -- the run --------------------------------------------------------------------------------------


def txn_chaos_run(data_dir: Path, settings: TxnChaosSettings) -> tuple[dict[str, int], TxnOutcome]:
    print(f"txn chaos seed {settings.seed} (replay: STROM_CHAOS_SEED={settings.seed})", flush=True)
    rng = random.Random(settings.seed)
    outcome = TxnOutcome()
    runner = start_chaos_cluster(
        data_dir,
        coordinator_flags=(
            "--transaction.state.log.num.partitions", "6",
            "--transaction.abort.timed.out.transaction.cleanup.interval.ms", "1000",
        ),
    )  # fmt: skip
    cluster = next(runner)
    try:
        create_chaos_topics(cluster, [TXN_TOPIC, IN_TOPIC, OUT_TOPIC])
        stop_writers = threading.Event()
        stop_readers = threading.Event()
        writers = [
            threading.Thread(target=run_writer, args=(cluster, i, settings, outcome, stop_writers))
            for i in range(settings.writers)
        ]
        writers.append(
            threading.Thread(
                target=run_input_producer, args=(cluster, settings, outcome, stop_writers)
            )
        )
        reader = threading.Thread(target=run_live_reader, args=(cluster, outcome, stop_readers))
        for thread in (*writers, reader):
            thread.start()
        workers = PipelineWorkers(cluster, settings.workers)
        workers.start_all()
        nemesis = Nemesis(cluster, rng, outcome, workers)  # type: ignore[arg-type]
        deadline = time.monotonic() + settings.duration_s
        try:
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(*settings.fault_gap_s))
                if time.monotonic() < deadline:
                    nemesis.one_fault()
        finally:
            nemesis.heal()
            workers.revive()
            for topic in (TXN_TOPIC, IN_TOPIC, OUT_TOPIC):
                wait_for_full_isr(cluster, 90, topic=topic)
            stop_writers.set()
            for thread in writers:
                thread.join(180)
            try:
                wait_for_pipeline(cluster, outcome, 120)
            finally:
                workers.stop_all()
                stop_readers.set()
                reader.join(60)
        results = check(cluster, outcome, settings.workers)
        print(table(results, outcome, settings), flush=True)
        return results, outcome
    finally:
        next(runner, None)


def wait_for_pipeline(cluster: LocalCluster, outcome: TxnOutcome, timeout_s: float) -> None:
    """Until the pipeline group's committed offsets reach the end of ``txn-in``; the
    partitions still behind at ``timeout_s`` go to ``outcome.pipeline_behind`` (a stuck
    pipeline, told apart from records it lost)."""
    with cluster.admin() as admin:
        latest = admin.list_offsets(
            {TopicPartition(IN_TOPIC, p): "latest" for p in range(PARTITIONS)}
        )
    ends = {tp.partition: info.offset for tp, info in latest.items()}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with cluster.admin() as admin:
                found = admin.list_consumer_group_offsets(PIPELINE_GROUP)
            committed = {tp.partition: o.offset for tp, o in found.items() if tp.topic == IN_TOPIC}
        except StromError:
            committed = {}
        behind = {p for p, end in ends.items() if committed.get(p, -1) < end}
        outcome.pipeline_behind = len(behind)
        if not behind:
            return
        time.sleep(1)
