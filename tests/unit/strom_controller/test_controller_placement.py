"""Rack-aware replica placement (Kafka's AdminUtils scheme), plans and higher replication."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from strom.errors import InvalidReplicationFactorError
from strom.placement import (
    assign_replicas,
    generate_reassignment_plan,
    rack_alternated,
    raise_replication_factor,
)


def test_rack_unaware_layout_is_kafkas() -> None:
    racks = dict.fromkeys(range(5), "")
    got = assign_replicas(racks, 10, 3, start=0, shift=0)
    # Kafka's documented example (5 brokers, 10 partitions, RF 3, start 0, shift 0).
    assert got == {
        0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
        5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2),
    }  # fmt: skip


def test_rack_alternated_order() -> None:
    assert rack_alternated({1: "a", 2: "a", 3: "b", 4: "c"}) == [1, 3, 4, 2]
    assert rack_alternated({0: "r1", 1: "r1", 2: "r2", 3: "r2", 4: "r3", 5: "r3"}) == [
        0, 2, 4, 1, 3, 5
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_spreads_replicas_and_balances_leaders(seed: int) -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    got = assign_replicas(racks, 12, 3, rng=random.Random(seed))
    assert sorted(got) == list(range(12))
    for replicas in got.values():
        assert len(set(replicas)) == 3
        assert len({racks[b] for b in replicas}) == 3  # one replica per rack
    leaders = Counter(r[0] for r in got.values())
    assert set(leaders.values()) == {2}  # 12 partitions, 6 brokers: 2 leaders each
    load = Counter(b for r in got.values() for b in r)
    assert set(load.values()) == {6}


def test_rack_aware_with_fewer_racks_than_replicas() -> None:
    racks = {1: "a", 2: "a", 3: "b"}
    for replicas in assign_replicas(racks, 6, 3, rng=random.Random(1)).values():
        assert sorted(replicas) == [1, 2, 3]
    for replicas in assign_replicas(racks, 6, 2, rng=random.Random(2)).values():
        assert {racks[b] for b in replicas} == {"a", "b"}


def test_start_partition_and_errors() -> None:
    racks = dict.fromkeys((1, 2, 3), "")
    got = assign_replicas(racks, 2, 1, start=0, shift=0, first_partition=3)
    assert sorted(got) == [3, 4]
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 3"):
        assign_replicas(racks, 1, 4)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(racks, 1, 0)


def test_reassignment_plan_and_raising_the_replication_factor() -> None:
    racks = {1: "a", 2: "b", 3: "a", 4: "b"}
    topics = {"t": {0: (1,), 1: (1,), 2: (1,), 3: (1,)}}
    plan = generate_reassignment_plan(topics, racks, rng=random.Random(3))
    final = {p: plan.get(("t", p), replicas) for p, replicas in topics["t"].items()}
    assert Counter(r[0] for r in final.values()) == dict.fromkeys((1, 2, 3, 4), 1)
    assert all(len(r) == 1 for r in final.values())  # the replication factor is kept
    assert all(plan[k] != topics["t"][k[1]] for k in plan)  # only changes are listed
    raised = raise_replication_factor({0: (1,), 1: (2,)}, racks, 2)
    assert raised[0][0] == 1 and raised[1][0] == 2  # leaders kept
    assert racks[raised[0][1]] == "b" and racks[raised[1][1]] == "a"  # other rack first
    with pytest.raises(InvalidReplicationFactorError):
        raise_replication_factor({0: (1,)}, racks, 5)
