"""``strom.group.offsets_plan``: reset plans and lag as Kafka's kafka-consumer-groups computes
them, shared by ``strom groups`` and the console."""

from __future__ import annotations

import pytest

from strom.errors import NonEmptyGroupError
from strom.group.offsets_plan import (
    OffsetPlanError,
    ResetSpec,
    check_resettable,
    lag_rows,
    plan_reset,
    total_lag,
)
from strom.types import TopicPartition

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def test_reset_plans_for_every_strategy() -> None:
    parts = [A1, A0]
    committed = {A0: 50, A1: 7}
    starts, ends = {A0: 10, A1: 0}, {A0: 100, A1: 20}

    def targets(kind: str, value: str = "", by_time: dict | None = None) -> list[int]:
        plan = plan_reset(
            ResetSpec.parse(kind, value), parts, group_id="g", committed=committed,
            log_starts=starts, log_ends=ends, by_timestamp=by_time,
        )  # fmt: skip
        assert [r.partition for r in plan] == [0, 1]
        return [r.target for r in plan]

    assert targets("earliest") == [10, 0]
    assert targets("latest") == [100, 20]
    assert targets("offset", "15") == [15, 15]
    assert targets("offset", "500") == [100, 20]  # clamped
    assert targets("shift", "-45") == [10, 0]  # clamped at the log start
    assert targets("shift", "5") == [55, 12]
    assert targets("timestamp", "1000", {A0: 60, A1: -1}) == [60, 20]


def test_a_reset_row_says_when_it_was_clamped_and_the_lag_after() -> None:
    (row,) = plan_reset(
        ResetSpec.parse("offset", "1"), [A0], group_id="g", committed={}, log_starts={A0: 10},
        log_ends={A0: 30},
    )  # fmt: skip
    assert (row.current, row.target, row.clamped, row.lag_after) == (None, 10, True, 20)


def test_shift_needs_a_committed_offset_as_in_kafka() -> None:
    """Kafka's tool refuses to shift a partition without a committed offset (the console
    shifted from the log start, the CLI refused: both refuse now)."""
    with pytest.raises(OffsetPlanError, match="group g has no committed offset for a:1"):
        plan_reset(
            ResetSpec("shift", 1), [A0, A1], group_id="g", committed={A0: 3},
            log_starts={A0: 0, A1: 0}, log_ends={A0: 9, A1: 9},
        )  # fmt: skip


def test_reset_refusals() -> None:
    with pytest.raises(OffsetPlanError, match="unknown reset strategy"):
        ResetSpec.parse("random")
    with pytest.raises(OffsetPlanError, match="expected a shift"):
        ResetSpec.parse("shift", "a lot")
    with pytest.raises(OffsetPlanError, match=">= 0"):
        ResetSpec.parse("offset", "-3")
    with pytest.raises(NonEmptyGroupError, match="Stable"):
        check_resettable("g", "Stable")
    with pytest.raises(NonEmptyGroupError, match="1 active member"):
        check_resettable("g", "Empty", members=1)
    check_resettable("g", "Empty")
    with pytest.raises(OffsetPlanError, match="unknown"):
        plan_reset(
            ResetSpec("earliest"), [A0], group_id="g", committed={}, log_starts={}, log_ends={}
        )


def test_lag_rows_and_totals() -> None:
    rows = lag_rows({A0: 5}, {A0: 9, A1: 4}, [A1], log_starts={A0: 2})
    assert [(r.partition, r.committed, r.log_end, r.lag, r.log_start, r.lead) for r in rows] == [
        (0, 5, 9, 4, 2, 3),
        (1, None, 4, None, None, None),
    ]
    # A committed offset past the log end (the log was truncated) lags negatively, as in
    # Kafka's tool (the console clamped it at 0, the CLI did not).
    assert total_lag(lag_rows({A0: 5, A1: 10}, {A0: 9, A1: 8})) == 2
