"""``strom groups``: lag/lead rows, reset-offset targets (clamped), argument parsing, and the
admin's decoding of described members, without a cluster."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

import pytest

from strom.admin._calls import retriable_code as _retriable_code
from strom.admin._groups import member_description as _member
from strom.cli import groups
from strom.cli.main import build_parser
from strom.errors import ConfigurationError, ErrorCode
from strom.group.protocol import Assignment, encode_assignment
from strom.protocol.v1 import coordinator_pb2 as pb
from strom.types import MemberAssignment, MemberDescription, TopicPartition

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def reset_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["groups", "reset-offsets", "--group", "g", *argv])


def test_lag_and_lead_per_partition() -> None:
    member = MemberDescription("m-1", None, "client", "/10.0.0.1", MemberAssignment((T1, U0)))
    rows = groups._lag_rows(
        committed={T0: 7, T1: 3},
        owners={T1: member, U0: member},
        marks={T0: (2, 10), T1: (0, 3), U0: (5, 9)},
    )
    assert [(r.topic, r.partition, r.committed_offset, r.log_end_offset, r.lag,
             r.log_start_offset, r.lead, r.member_id) for r in rows] == [
        ("t", 0, 7, 10, 3, 2, 5, None),
        ("t", 1, 3, 3, 0, 0, 3, "m-1"),
        ("u", 0, None, 9, None, 5, None, "m-1"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--to-earliest",), {T0: 2, T1: 0}),
        (("--to-latest",), {T0: 10, T1: 3}),
        (("--to-offset", "5"), {T0: 5, T1: 3}),  # clamped to the log end of t-1
        (("--to-offset", "0"), {T0: 2, T1: 0}),  # clamped to the log start of t-0
        (("--shift-by", "-10"), {T0: 2, T1: 0}),
        (("--shift-by", "2"), {T0: 9, T1: 3}),
    ],
)
def test_reset_targets_are_clamped(argv: tuple[str, ...], expected: dict[Any, int]) -> None:
    args = reset_args("--topic", "t", *argv)
    targets = groups._targets(
        None,  # type: ignore[arg-type]  # no lookup needed for these modes
        args,
        [T0, T1],
        {T0: 7, T1: 1},
        {T0: (2, 10), T1: (0, 3)},
    )
    assert targets == expected


def test_shift_by_needs_a_committed_offset() -> None:
    args = reset_args("--all-topics", "--shift-by", "1")
    with pytest.raises(ConfigurationError, match="no committed offset for t:1"):
        groups._targets(None, args, [T1], {}, {T1: (0, 3)})  # type: ignore[arg-type]


def test_reset_needs_a_scope_and_exactly_one_mode() -> None:
    parser = build_parser()
    invalid = [
        ["--to-earliest"],
        ["--topic", "t"],
        ["--topic", "t", "--to-earliest", "--to-latest"],
        ["--all-topics", "--topic", "t", "--to-latest"],
        ["--all-topics", "--to-latest", "--dry-run", "--execute"],
    ]
    for argv in invalid:
        with pytest.raises(SystemExit):
            parser.parse_args(["groups", "reset-offsets", "--group", "g", *argv])
    args = reset_args("--all-topics", "--to-latest")
    assert not args.execute  # a dry run by default


def test_datetime_parsing() -> None:
    expected = int(datetime(2026, 1, 31, 12, tzinfo=UTC).timestamp() * 1000)
    assert groups._timestamp_ms("2026-01-31T12:00:00Z") == expected
    assert groups._timestamp_ms("2026-01-31T13:00:00+01:00") == expected
    with pytest.raises(ConfigurationError, match="ISO 8601"):
        groups._timestamp_ms("yesterday")


def test_table_aligns_and_marks_unknowns() -> None:
    text = groups._table(("A", "LONGER"), [("x", None), ("yyyy", 3)])
    assert text.splitlines() == ["A     LONGER", "x     -", "yyyy  3"]


def test_described_member_assignment_is_decoded() -> None:
    raw = encode_assignment(Assignment([U0, T1, T0]))
    member = pb.DescribedGroupMember(
        member_id="m", client_id="c", client_host="/h", member_assignment=raw
    )
    described = _member(member, "consumer")
    assert described.assignment.topic_partitions == (T0, T1, U0)
    assert described.group_instance_id is None
    assert _member(member, "connect").assignment.topic_partitions == ()
    garbage = pb.DescribedGroupMember(member_id="m", member_assignment=b"\x00")
    assert _member(garbage, "consumer").assignment.topic_partitions == ()


def test_retriable_codes_are_found_at_any_level() -> None:
    assert _retriable_code(pb.HeartbeatResponse()) == 0
    assert _retriable_code(pb.HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)) == 0
    assert (
        _retriable_code(pb.HeartbeatResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    )
    commit = pb.OffsetCommitResponse(
        partitions=[pb.OffsetCommitPartitionResult(error_code=ErrorCode.NOT_COORDINATOR)]
    )
    assert _retriable_code(commit) == ErrorCode.NOT_COORDINATOR
