"""Both workloads of the fault harness under network partitions, on one cluster.

The idempotent workload (chaos_harness: acks=all producers, an assigned consumer, a consumer
group of member processes) and the transactional one (txn_chaos_harness: transactional
writers, a read_committed reader, the consume-transform-produce pipeline) run side by side on
a cluster whose server processes talk through the partition proxy (partitions.py), while
``PartitionNemesis`` isolates a storage node, the active controller or a coordinator, or
splits the servers in two halves, and heals. After the last heal both checkers run unchanged
and both tables are printed; every count must be 0.

Replay a run with the seed it prints: ``STROM_CHAOS_SEED=<seed> make chaos``.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chaos_harness as idempotent
import txn_chaos_harness as transactional
from chaos_harness import (
    ChaosSettings,
    Outcome,
    create_chaos_topics,
    start_chaos_cluster,
    wait_for_full_isr,
)
from partitions import PartitionNemesis, ProxiedCluster
from txn_chaos_harness import TxnChaosSettings, TxnOutcome

TOPICS = (idempotent.TOPIC, transactional.TXN_TOPIC, transactional.IN_TOPIC,
          transactional.OUT_TOPIC)  # fmt: skip


@dataclass
class PartitionRun:
    """What one run found: both checkers' counts and what the workloads saw."""

    results: dict[str, int]
    txn_results: dict[str, int]
    outcome: Outcome
    txn_outcome: TxnOutcome
    proxy_stats: dict[str, Any]


def start_partition_chaos_cluster(data_dir: Path) -> Iterator[ProxiedCluster]:
    """The chaos cluster (both workloads' settings) behind the partition proxy."""
    runner = start_chaos_cluster(
        data_dir,
        coordinator_flags=(
            "--transaction.state.log.num.partitions", "6",
            "--transaction.abort.timed.out.transaction.cleanup.interval.ms", "1000",
        ),
        cluster_class=ProxiedCluster,
    )  # fmt: skip
    for cluster in runner:
        assert isinstance(cluster, ProxiedCluster)
        yield cluster


def partition_chaos_run(
    cluster: ProxiedCluster,
    seed: int,
    duration_s: float,
    *,
    fault_gap_s: tuple[float, float] = (2.0, 6.0),
) -> PartitionRun:
    """Both workloads on ``cluster`` (started by ``start_partition_chaos_cluster``) under the
    partition nemesis for ``duration_s``, then the checks. ``fault_gap_s``: how long the
    network stays whole between two cuts (each cut outlasts the etcd sessions)."""
    print(f"partition chaos seed {seed} (replay: STROM_CHAOS_SEED={seed})", flush=True)
    rng = random.Random(seed)
    settings = ChaosSettings(seed=seed, duration_s=duration_s, fault_gap_s=fault_gap_s)
    txn_settings = TxnChaosSettings(seed=seed, duration_s=duration_s, fault_gap_s=fault_gap_s)
    outcome, txn_outcome = Outcome(), TxnOutcome()
    create_chaos_topics(cluster, TOPICS)
    stop_writers, stop_readers = threading.Event(), threading.Event()
    writers = [
        threading.Thread(
            target=idempotent.run_producer, args=(cluster, i, settings, outcome, stop_writers)
        )
        for i in range(settings.producers)
    ]
    writers += [
        threading.Thread(
            target=transactional.run_writer,
            args=(cluster, i, txn_settings, txn_outcome, stop_writers),
        )
        for i in range(txn_settings.writers)
    ]
    writers.append(
        threading.Thread(
            target=transactional.run_input_producer,
            args=(cluster, txn_settings, txn_outcome, stop_writers),
        )
    )
    readers = [
        threading.Thread(target=idempotent.run_consumer, args=(cluster, outcome, stop_readers)),
        threading.Thread(
            target=transactional.run_live_reader, args=(cluster, txn_outcome, stop_readers)
        ),
    ]
    for thread in (*writers, *readers):
        thread.start()
    group = idempotent.GroupMembers(cluster, outcome)
    for _ in range(settings.group_members):
        group.start_one()
    workers = transactional.PipelineWorkers(cluster, txn_settings.workers)
    workers.start_all()
    nemesis = PartitionNemesis(cluster, rng, outcome, group)
    deadline = time.monotonic() + duration_s
    try:
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(*fault_gap_s))
            if time.monotonic() < deadline:
                nemesis.one_fault()
    finally:
        try:
            nemesis.heal()
            workers.revive()
            for topic in TOPICS:
                wait_for_full_isr(cluster, 120, topic=topic)
        finally:
            stop_writers.set()
            for thread in writers:
                thread.join(180)
        try:
            behind = idempotent.wait_for_group(cluster, 120)
            transactional.wait_for_pipeline(cluster, txn_outcome, 120)
        finally:
            group.stop_all()
            workers.stop_all()
            stop_readers.set()
            for thread in readers:
                thread.join(60)
    txn_outcome.faults = list(outcome.faults)
    assert cluster.control is not None
    stats = cluster.control.stats()
    for topic in TOPICS:
        wait_for_full_isr(cluster, 60, topic=topic)
    results = idempotent.check(cluster, outcome, behind)
    txn_results = transactional.check(cluster, txn_outcome, txn_settings.workers)
    print(idempotent.table(results, outcome, settings), flush=True)
    print(transactional.table(txn_results, txn_outcome, txn_settings), flush=True)
    print("nemesis events:", *outcome.faults, sep="\n  ", flush=True)
    return PartitionRun(results, txn_results, outcome, txn_outcome, stats)
