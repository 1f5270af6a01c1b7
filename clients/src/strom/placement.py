"""Replica placement: Kafka's rack-aware assignment, reassignment plans, a higher replication
factor.

``assign_replicas`` follows the scheme of Kafka's ``AdminUtils.assignReplicasToBrokers``:

- Without racks, partition ``p``'s first replica (its preferred leader) is broker
  ``(p + start) % n`` of the sorted ids, so leaders go round the brokers evenly; the followers
  come after it at a distance that grows by one every ``n`` partitions (the "shift"), so that
  the followers of one broker's partitions are spread over the others.
- With racks, the brokers are first listed alternating between racks (``rack_alternated``),
  the same walk picks leaders, and each follower is the next candidate on a rack that holds no
  replica of the partition yet (and on a broker that holds none), until every rack has one.

``start`` and ``shift`` are random unless given (tests give them). Pure functions.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence

from strom.errors import InvalidReplicationFactorError

__all__ = [
    "assign_replicas",
    "generate_reassignment_plan",
    "rack_alternated",
    "raise_replication_factor",
]


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Broker ids ordered rack by rack in turn: {1:a,2:a,3:b,4:c} -> [1, 3, 4, 2]."""
    by_rack: dict[str, list[int]] = defaultdict(list)
    for broker in sorted(racks):
        by_rack[racks[broker]].append(broker)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        for queue in queues:
            if depth < len(queue):
                out.append(queue[depth])
        depth += 1
    return out


def assign_replicas(
    racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    *,
    start: int | None = None,
    shift: int | None = None,
    first_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Replicas (preferred leader first) of partitions ``first_partition ..`` + ``num_partitions``.

    ``racks`` maps broker id to rack ("" = none); placement is rack-aware when every broker
    has a rack. Raises ``InvalidReplicationFactorError`` when there are too few brokers.
    """
    n = len(racks)
    if replication_factor < 1:
        raise InvalidReplicationFactorError("replication factor must be at least 1")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {n} available broker(s)"
        )
    rng = rng or random.Random()
    start = rng.randrange(n) if start is None else start
    shift = rng.randrange(n) if shift is None else shift
    rack_aware = all(racks.values()) and len(set(racks.values())) > 1
    brokers = rack_alternated(racks) if rack_aware else sorted(racks)
    num_racks = len(set(racks.values()))
    out: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        if not rack_aware:
            replicas += [
                brokers[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            used_racks = {racks[brokers[first]]}
            k = 0
            while len(replicas) < replication_factor:
                candidate = brokers[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack_ok = racks[candidate] not in used_racks or len(used_racks) == num_racks
                if rack_ok and candidate not in replicas:
                    replicas.append(candidate)
                    used_racks.add(racks[candidate])
                if k > 4 * n * n:  # cannot happen with valid input; guards an endless loop
                    raise InvalidReplicationFactorError("no rack-aware placement found")
        out[p] = tuple(replicas)
    return out


def generate_reassignment_plan(
    topics: Mapping[str, Mapping[int, Sequence[int]]],
    racks: Mapping[int, str],
    *,
    rng: random.Random | None = None,
) -> dict[tuple[str, int], tuple[int, ...]]:
    """A fresh placement of every partition of ``topics`` over the brokers in ``racks``,
    keeping each partition's replication factor (what ``kafka-reassign-partitions --generate``
    proposes). Only partitions whose replicas change are returned."""
    plan: dict[tuple[str, int], tuple[int, ...]] = {}
    for topic, partitions in sorted(topics.items()):
        if not partitions:
            continue
        rf = len(next(iter(partitions.values())))
        proposal = assign_replicas(racks, len(partitions), rf, rng=rng)
        for p, replicas in proposal.items():
            if tuple(partitions.get(p, ())) != replicas:
                plan[(topic, p)] = replicas
    return plan


def raise_replication_factor(
    partitions: Mapping[int, Sequence[int]],
    racks: Mapping[int, str],
    replication_factor: int,
) -> dict[int, tuple[int, ...]]:
    """Targets that keep each partition's replicas (and leader) and add brokers up to
    ``replication_factor``, preferring racks the partition lacks, then the least loaded."""
    if replication_factor > len(racks):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {len(racks)} "
            "available broker(s)"
        )
    load: dict[int, int] = dict.fromkeys(racks, 0)
    for replicas in partitions.values():
        for b in replicas:
            if b in load:
                load[b] += 1
    out: dict[int, tuple[int, ...]] = {}
    for p, current in sorted(partitions.items()):
        replicas = list(current)
        while len(replicas) < replication_factor:
            used = {racks.get(b, "") for b in replicas}
            candidates = [b for b in sorted(racks) if b not in replicas]
            candidates.sort(key=lambda b: (racks[b] in used, load[b], b))
            choice = candidates[0]
            replicas.append(choice)
            load[choice] += 1
        out[p] = tuple(replicas)
    return out
