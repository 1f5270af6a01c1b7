"""``strom groups list|describe|delete|reset-offsets``: consumer groups through the gateway.

``describe`` shows, per partition, the committed offset, the log end offset, the lag (end minus
committed), the log start offset and the lead (committed minus log start: how close retention
is to deleting records the group has not read). ``reset-offsets`` computes new committed
offsets (clamped to [log start, log end], as Kafka's tool does) and only prints the plan unless
``--execute`` is given; it is refused while the group has members. Lag and plans are
``strom.group.offsets_plan``'s, which the console uses too.

Output is an aligned table, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from strom.admin import Admin
from strom.cli.admin_commands import _admin, _common
from strom.errors import ConfigurationError, GroupIdNotFoundError, StromError
from strom.group import offsets_plan
from strom.types import ConsumerGroupDescription, MemberDescription, TopicPartition


def add_parsers(commands: Any) -> None:
    groups = commands.add_parser("groups", help="list, describe, delete consumer groups; reset")
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list consumer groups")
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        help="only groups in this state (Empty, PreparingRebalance, CompletingRebalance, "
        "Stable, Dead; repeatable)",
    )
    _common(listing)
    listing.set_defaults(handler=groups_list)

    describe = actions.add_parser(
        "describe", help="committed offsets, lag and lead per partition (or members)"
    )
    describe.add_argument("group")
    describe.add_argument("--members", action="store_true", help="show the members instead")
    _common(describe)
    describe.set_defaults(handler=groups_describe)

    delete = actions.add_parser("delete", help="delete groups without members, and their offsets")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    _common(delete)
    delete.set_defaults(handler=groups_delete)

    reset = actions.add_parser(
        "reset-offsets", help="move a group's committed offsets (a dry run unless --execute)"
    )
    reset.add_argument("--group", required=True)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every topic the group has committed offsets for"
    )
    mode = reset.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="the log start offset")
    mode.add_argument("--to-latest", action="store_true", help="the log end offset")
    mode.add_argument(
        "--to-datetime",
        metavar="ISO8601",
        help="the first offset at or after this time (local time unless it has an offset, "
        "e.g. 2026-01-31T12:00:00Z)",
    )
    mode.add_argument("--to-offset", type=int, metavar="N", help="this offset")
    mode.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (N may be < 0)"
    )
    run = reset.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    _common(reset)
    reset.set_defaults(handler=groups_reset_offsets)


# -- output -----------------------------------------------------------------------------------


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [list(headers), *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _emit(args: argparse.Namespace, value: Any, text: str) -> None:
    print(json.dumps(value, indent=2, default=str) if args.json else text)


def _describe(admin: Admin, group_id: str) -> ConsumerGroupDescription:
    return admin.describe_consumer_groups([group_id])[group_id]


# -- list -------------------------------------------------------------------------------------


def groups_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        listed = admin.list_consumer_groups(args.state or None)
    _emit(
        args,
        [asdict(g) for g in listed],
        _table(
            ("GROUP", "STATE", "PROTOCOL-TYPE"),
            ((g.group_id, g.state, g.protocol_type) for g in listed),
        ),
    )
    return 0


# -- describe ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    """One row of ``groups describe``; None where unknown (no commit, topic gone)."""

    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int | None
    lag: int | None
    log_start_offset: int | None
    lead: int | None
    member_id: str | None
    host: str | None
    client_id: str | None


def _watermarks(
    admin: Admin, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, tuple[int, int]]:
    """(log start, log end) per partition, topic by topic; topics that fail are left out."""
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp)
    found: dict[TopicPartition, tuple[int, int]] = {}
    for tps in by_topic.values():
        try:
            start = admin.list_offsets(dict.fromkeys(tps, "earliest"))
            end = admin.list_offsets(dict.fromkeys(tps, "latest"))
        except StromError:
            continue  # e.g. a deleted topic: shown without offsets
        found.update({tp: (start[tp].offset, end[tp].offset) for tp in tps})
    return found


def _lag_rows(
    committed: Mapping[TopicPartition, int],
    owners: Mapping[TopicPartition, MemberDescription],
    marks: Mapping[TopicPartition, tuple[int, int]],
) -> list[PartitionLag]:
    starts = {tp: start for tp, (start, _) in marks.items()}
    ends = {tp: end for tp, (_, end) in marks.items()}
    rows = []
    for row in offsets_plan.lag_rows(committed, ends, owners, starts):
        member = owners.get(row.tp)
        rows.append(
            PartitionLag(
                topic=row.topic,
                partition=row.partition,
                committed_offset=row.committed,
                log_end_offset=row.log_end,
                lag=row.lag,
                log_start_offset=row.log_start,
                lead=row.lead,
                member_id=member.member_id if member else None,
                host=member.host if member else None,
                client_id=member.client_id if member else None,
            )
        )
    return rows


def _summary(d: ConsumerGroupDescription) -> dict[str, Any]:
    return {
        "group_id": d.group_id,
        "state": d.state,
        "protocol_type": d.protocol_type,
        "partition_assignor": d.partition_assignor,
        "generation_id": d.generation_id,
        "coordinator": asdict(d.coordinator) if d.coordinator else None,
    }


def _summary_line(d: ConsumerGroupDescription) -> str:
    where = f"{d.coordinator.node_id} ({d.coordinator.address})" if d.coordinator else "-"
    return (
        f"Group: {d.group_id}  State: {d.state}  Assignor: {_cell(d.partition_assignor)}  "
        f"Generation: {d.generation_id}  Members: {len(d.members)}  Coordinator: {where}"
    )


def groups_describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        description = _describe(admin, args.group)
        committed = {
            tp: om.offset for tp, om in admin.list_consumer_group_offsets(args.group).items()
        }
        if description.state == "Dead" and not committed:
            raise GroupIdNotFoundError(f"group {args.group} does not exist")
        if args.members:
            return _print_members(args, description)
        owners = {tp: m for m in description.members for tp in m.assignment.topic_partitions}
        marks = _watermarks(admin, set(committed) | set(owners))
    rows = _lag_rows(committed, owners, marks)
    columns = (
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LOG-START-OFFSET",
        "LEAD", "CONSUMER-ID", "HOST", "CLIENT-ID",
    )  # fmt: skip
    _emit(
        args,
        {**_summary(description), "partitions": [asdict(r) for r in rows]},
        _summary_line(description) + "\n" + _table(columns, ([*asdict(r).values()] for r in rows)),
    )
    return 0


def _print_members(args: argparse.Namespace, d: ConsumerGroupDescription) -> int:
    def assignment(m: MemberDescription) -> str:
        by_topic: dict[str, list[str]] = {}
        for tp in m.assignment.topic_partitions:
            by_topic.setdefault(tp.topic, []).append(str(tp.partition))
        return " ".join(f"{t}:{','.join(ps)}" for t, ps in by_topic.items())

    members = sorted(d.members, key=lambda m: m.member_id)
    _emit(
        args,
        {**_summary(d), "members": [asdict(m) for m in members]},
        _summary_line(d)
        + "\n"
        + _table(
            ("CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"),
            (
                (
                    m.member_id,
                    m.group_instance_id,
                    m.host,
                    m.client_id,
                    len(m.assignment.topic_partitions),
                    assignment(m),
                )
                for m in members
            ),
        ),
    )
    return 0


# -- delete -----------------------------------------------------------------------------------


def groups_delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        outcome = admin.delete_consumer_groups(args.groups)
    deleted = [g for g, error in outcome.items() if error is None]
    failed = {g: error for g, error in outcome.items() if error is not None}
    if args.json:
        print(
            json.dumps(
                {g: "deleted" if e is None else f"{e.code_name}: {e}" for g, e in outcome.items()}
            )
        )
    elif deleted:
        print(f"Deleted: {', '.join(deleted)}.")
    if failed:
        print(
            f"strom: error: could not delete {len(failed)} group(s): "
            + "; ".join(f"{error} ({error.code_name})" for error in failed.values()),
            file=sys.stderr,
        )
    return 1 if failed else 0


# -- reset-offsets ----------------------------------------------------------------------------


def _scope(
    admin: Admin, args: argparse.Namespace, committed: Iterable[TopicPartition]
) -> list[TopicPartition]:
    if args.all_topics:
        if not committed:
            raise ConfigurationError(
                f"group {args.group} has no committed offsets: name the topics with --topic"
            )
        return sorted(committed)
    wanted: dict[str, list[int] | None] = {}
    for spec in args.topic:
        topic, sep, listed = spec.partition(":")
        if not topic:
            raise ConfigurationError(f"--topic: expected TOPIC or TOPIC:P,P, got {spec!r}")
        if not sep:
            wanted[topic] = None
            continue
        try:
            numbers = [int(p) for p in listed.split(",") if p.strip()]
        except ValueError:
            raise ConfigurationError(f"--topic: bad partition list in {spec!r}") from None
        if not numbers:
            raise ConfigurationError(f"--topic: no partition in {spec!r}")
        wanted.setdefault(topic, [])
        known = wanted[topic]
        if known is not None:
            known.extend(numbers)
    counts = {t.name: len(t.partitions) for t in admin.describe_topics(sorted(wanted))}
    chosen: set[TopicPartition] = set()
    for topic, only in wanted.items():
        for p in range(counts[topic]) if only is None else only:
            if not 0 <= p < counts[topic]:
                raise ConfigurationError(
                    f"--topic: {topic} has {counts[topic]} partitions, no partition {p}"
                )
            chosen.add(TopicPartition(topic, p))
    return sorted(chosen)


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(
            f"--to-datetime: expected an ISO 8601 time such as 2026-01-31T12:00:00Z, got {text!r}"
        ) from None
    return int(moment.timestamp() * 1000)


def _reset_spec(args: argparse.Namespace) -> offsets_plan.ResetSpec:
    if args.to_earliest:
        return offsets_plan.ResetSpec("earliest")
    if args.to_latest:
        return offsets_plan.ResetSpec("latest")
    if args.to_datetime is not None:
        return offsets_plan.ResetSpec("timestamp", _timestamp_ms(args.to_datetime))
    if args.to_offset is not None:
        return offsets_plan.ResetSpec("offset", args.to_offset)
    return offsets_plan.ResetSpec("shift", args.shift_by)


def _targets(
    admin: Admin,
    args: argparse.Namespace,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    marks: Mapping[TopicPartition, tuple[int, int]],
) -> dict[TopicPartition, int]:
    """The new offset of every partition, clamped to [log start, log end]."""
    spec = _reset_spec(args)
    by_timestamp = None
    if spec.kind == "timestamp":
        found = admin.list_offsets(dict.fromkeys(partitions, spec.value))
        by_timestamp = {tp: info.offset for tp, info in found.items()}
    plan = offsets_plan.plan_reset(
        spec,
        partitions,
        group_id=args.group,
        committed=committed,
        log_starts={tp: start for tp, (start, _) in marks.items()},
        log_ends={tp: end for tp, (_, end) in marks.items()},
        by_timestamp=by_timestamp,
    )
    return {row.tp: row.target for row in plan}


def groups_reset_offsets(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        description = _describe(admin, args.group)
        offsets_plan.check_resettable(args.group, description.state, len(description.members))
        committed = {
            tp: om.offset for tp, om in admin.list_consumer_group_offsets(args.group).items()
        }
        partitions = _scope(admin, args, committed)
        marks = _watermarks(admin, partitions)
        missing = [tp for tp in partitions if tp not in marks]
        if missing:
            raise ConfigurationError(
                "cannot read the log offsets of "
                + ", ".join(f"{tp.topic}:{tp.partition}" for tp in missing)
            )
        targets = _targets(admin, args, partitions, committed, marks)
        if args.execute:
            admin.alter_consumer_group_offsets(args.group, targets)
    plan = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": committed.get(tp),
            "new_offset": offset,
        }
        for tp, offset in targets.items()
    ]
    text = _table(
        ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
        ((args.group, *row.values()) for row in plan),
    )
    if not args.execute:
        text += "\n(dry run: nothing changed; add --execute to commit these offsets)"
    _emit(args, {"group": args.group, "executed": bool(args.execute), "partitions": plan}, text)
    return 0
