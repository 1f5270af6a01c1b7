"""``strom topics|leaders|reassign``: administration through the gateway.

``reassign generate`` computes its proposal here, with the same rack-aware placement the
controller uses (``strom.placement``), as Kafka's reassignment tool does.

Every command takes ``--bootstrap-server`` (env STROM_BOOTSTRAP_SERVERS, default
localhost:9092). Output is a plain table, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from strom.admin import Admin
from strom.cli.bootstrap import add_bootstrap_option
from strom.errors import ConfigurationError
from strom.placement import generate_reassignment_plan
from strom.topic_config import parse_config_pairs
from strom.types import NewTopic, TopicPartition


def _admin(args: argparse.Namespace) -> Admin:
    return Admin(bootstrap_servers=args.bootstrap_server, request_timeout_ms=args.timeout_ms)


def _partition_ref(text: str) -> TopicPartition:
    topic, sep, index = text.rpartition(":")
    if not sep or not topic or not index.isdigit():
        raise ConfigurationError(f"expected topic:partition, got {text!r}")
    return TopicPartition(topic, int(index))


def _ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigurationError(f"expected comma-separated broker ids, got {text!r}") from None


def _common(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_option(parser)
    parser.add_argument("--timeout-ms", type=int, default=30000, help="default: %(default)s")
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_parsers(commands: Any) -> None:
    topics = commands.add_parser("topics", help="create, list, describe, alter, delete topics")
    actions = topics.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=-1, help="default: num.partitions")
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="default: default.replication.factor"
    )
    create.add_argument(
        "--replica-assignment",
        default="",
        help="explicit placement: 1:2:3,2:3:1 (broker ids per partition)",
    )
    create.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    create.add_argument("--validate-only", action="store_true")
    _common(create)
    create.set_defaults(handler=topics_create)

    listing = actions.add_parser("list", help="list topic names")
    listing.add_argument("--include-internal", action="store_true")
    _common(listing)
    listing.set_defaults(handler=topics_list)

    describe = actions.add_parser("describe", help="partitions, leaders, ISR and configs")
    describe.add_argument("names", nargs="*", help="default: every topic")
    _common(describe)
    describe.set_defaults(handler=topics_describe)

    alter = actions.add_parser("alter", help="change configs or raise the partition count")
    alter.add_argument("name")
    alter.add_argument("--partitions", type=int, help="new total partition count")
    alter.add_argument("--add-config", action="append", default=[], metavar="NAME=VALUE")
    alter.add_argument("--delete-config", action="append", default=[], metavar="NAME")
    _common(alter)
    alter.set_defaults(handler=topics_alter)

    delete = actions.add_parser("delete", help="delete topics and their data")
    delete.add_argument("names", nargs="+")
    _common(delete)
    delete.set_defaults(handler=topics_delete)

    leaders = commands.add_parser("leaders", help="leader elections")
    leader_actions = leaders.add_subparsers(dest="action", metavar="ACTION", required=True)
    elect = leader_actions.add_parser("elect", help="elect preferred (or unclean) leaders")
    elect.add_argument("--type", choices=("preferred", "unclean"), default="preferred")
    elect.add_argument(
        "--partition",
        action="append",
        default=[],
        metavar="TOPIC:PARTITION",
        help="default: every partition",
    )
    _common(elect)
    elect.set_defaults(handler=leaders_elect)

    reassign = commands.add_parser("reassign", help="move partitions between nodes")
    reassign_actions = reassign.add_subparsers(dest="action", metavar="ACTION", required=True)
    generate = reassign_actions.add_parser(
        "generate", help="propose a rack-aware placement of topics over brokers"
    )
    generate.add_argument("--topics", required=True, help="comma-separated topic names")
    generate.add_argument("--brokers", default="", help="broker ids to use (default: all live)")
    generate.add_argument("--output", help="write the proposed plan to this file")
    _common(generate)
    generate.set_defaults(handler=reassign_generate)
    execute = reassign_actions.add_parser("execute", help="start the reassignment in a plan")
    execute.add_argument(
        "plan",
        help='JSON file: {"partitions": [{"topic", "partition", '
        '"replicas"}]}, as `reassign generate` writes',
    )
    execute.add_argument("--throttle", type=int, default=0, help="bytes/s; 0: unthrottled")
    _common(execute)
    execute.set_defaults(handler=reassign_execute)
    verify = reassign_actions.add_parser("verify", help="check whether a plan has completed")
    verify.add_argument("plan")
    _common(verify)
    verify.set_defaults(handler=reassign_verify)


def _print(args: argparse.Namespace, value: Any, text: str) -> None:
    print(json.dumps(value, indent=2, default=str) if args.json else text)


def topics_create(args: argparse.Namespace) -> int:
    assignment = None
    if args.replica_assignment:
        assignment = {
            i: _ids(part.replace(":", ","))
            for i, part in enumerate(args.replica_assignment.split(","))
        }
    topic = NewTopic(
        args.name,
        args.partitions,
        args.replication_factor,
        assignment,
        parse_config_pairs(args.config, "--config"),
    )
    with _admin(args) as admin:
        admin.create_topics([topic], validate_only=args.validate_only)
    verb = "would be created" if args.validate_only else "created"
    _print(
        args, {"topic": args.name, "created": not args.validate_only}, f"Topic {args.name} {verb}."
    )
    return 0


def topics_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        names = admin.list_topics(include_internal=args.include_internal)
    _print(args, names, "\n".join(names))
    return 0


def topics_describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        topics = admin.describe_topics(args.names or None)
        configs = {t.name: admin.describe_configs(t.name) for t in topics}
    if args.json:
        print(
            json.dumps(
                [
                    {**asdict(t), "configs": {k: asdict(v) for k, v in configs[t.name].items()}}
                    for t in topics
                ],
                indent=2,
            )
        )
        return 0
    for t in topics:
        overrides = {k: v.value for k, v in configs[t.name].items() if v.source == "TOPIC"}
        print(
            f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: {len(t.partitions)}\t"
            f"ReplicationFactor: {len(t.partitions[0].replicas) if t.partitions else 0}\t"
            f"Configs: {','.join(f'{k}={v}' for k, v in sorted(overrides.items()))}"
        )
        for p in t.partitions:
            print(
                f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                f"LeaderEpoch: {p.leader_epoch}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
                + (
                    f"\tOffline: {','.join(map(str, p.offline_replicas))}"
                    if p.offline_replicas
                    else ""
                )
            )
    return 0


def topics_alter(args: argparse.Namespace) -> int:
    if args.partitions is None and not args.add_config and not args.delete_config:
        raise ConfigurationError(
            "nothing to alter: give --partitions, --add-config or --delete-config"
        )
    with _admin(args) as admin:
        if args.add_config or args.delete_config:
            admin.alter_configs(
                args.name,
                set_configs=parse_config_pairs(args.add_config, "--add-config"),
                delete_configs=args.delete_config,
            )
        if args.partitions is not None:
            admin.create_partitions({args.name: args.partitions})
    _print(args, {"topic": args.name, "altered": True}, f"Topic {args.name} altered.")
    return 0


def topics_delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        admin.delete_topics(args.names)
    _print(args, {"deleted": args.names}, f"Deleted: {', '.join(args.names)}.")
    return 0


def leaders_elect(args: argparse.Namespace) -> int:
    partitions = [_partition_ref(p) for p in args.partition] or None
    with _admin(args) as admin:
        outcome = admin.elect_leaders(args.type, partitions)
    failed = {
        tp: code for tp, code in outcome.items() if code not in ("NONE", "ELECTION_NOT_NEEDED")
    }
    _print(
        args,
        {f"{tp.topic}:{tp.partition}": code for tp, code in outcome.items()},
        "\n".join(f"{tp.topic}:{tp.partition}\t{code}" for tp, code in sorted(outcome.items())),
    )
    if failed:  # a failure is also one line on stderr, like every other command's
        print(
            f"strom: error: election failed for {len(failed)} partition(s): "
            + ", ".join(
                f"{tp.topic}:{tp.partition} ({code})" for tp, code in sorted(failed.items())
            ),
            file=sys.stderr,
        )
    return 1 if failed else 0


def _read_plan(path: str) -> dict[TopicPartition, list[int]]:
    try:
        with open(path) as handle:
            plan = json.load(handle)
        parsed = {}
        for p in plan["partitions"]:
            # A string would be read digit by digit, and an empty list cancels a reassignment.
            if not isinstance(p["replicas"], list) or not p["replicas"]:
                raise ValueError(
                    f"replicas of {p['topic']}:{p['partition']} must be a non-empty list"
                )
            parsed[TopicPartition(p["topic"], int(p["partition"]))] = [
                int(r) for r in p["replicas"]
            ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"cannot read reassignment plan {path}: {exc}") from exc
    if not parsed:
        raise ConfigurationError(f"reassignment plan {path} lists no partitions")
    return parsed


def _plan_json(assignments: Mapping[TopicPartition, Sequence[int]]) -> dict[str, Any]:
    return {
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
            for tp, replicas in sorted(assignments.items())
        ]
    }


def reassign_generate(args: argparse.Namespace) -> int:
    names = [t.strip() for t in args.topics.split(",") if t.strip()]
    if not names:
        raise ConfigurationError("--topics names no topic")
    with _admin(args) as admin:
        brokers = {b.node_id: b.rack for b in admin.describe_cluster().brokers}
        topics = admin.describe_topics(names)
    if args.brokers:
        wanted = set(_ids(args.brokers))
        unknown = sorted(wanted - brokers.keys())
        if unknown:
            raise ConfigurationError(f"--brokers: no live broker with id {unknown}")
        brokers = {b: rack for b, rack in brokers.items() if b in wanted}
    current = {
        TopicPartition(t.name, p.partition): p.replicas for t in topics for p in t.partitions
    }
    proposal = generate_reassignment_plan(
        {t.name: {p.partition: p.replicas for p in t.partitions} for t in topics}, brokers
    )
    proposed = {TopicPartition(topic, p): replicas for (topic, p), replicas in proposal.items()}
    if args.output:
        with open(args.output, "w") as handle:
            json.dump(_plan_json(proposed), handle, indent=2)
    if args.json:
        print(json.dumps({"current": _plan_json(current), "proposed": _plan_json(proposed)}))
    else:
        print("Current partition replica assignment (keep it to roll back):")
        print(json.dumps(_plan_json(current)))
        print("Proposed partition reassignment:")
        print(json.dumps(_plan_json(proposed)))
    return 0


def reassign_execute(args: argparse.Namespace) -> int:
    plan = _read_plan(args.plan)
    with _admin(args) as admin:
        admin.alter_partition_reassignments(plan, throttle_bytes_per_sec=args.throttle)
    _print(args, {"started": len(plan)}, f"Reassignment of {len(plan)} partitions started.")
    return 0


def reassign_verify(args: argparse.Namespace) -> int:
    plan = _read_plan(args.plan)
    with _admin(args) as admin:
        ongoing = admin.list_partition_reassignments()
        current = {
            TopicPartition(t.name, p.partition): list(p.replicas)
            for t in admin.describe_topics(sorted({tp.topic for tp in plan}))
            for p in t.partitions
        }
    status = {}
    for tp, replicas in plan.items():
        if tp in ongoing:
            status[tp] = "in progress"
        elif current.get(tp) == replicas:
            status[tp] = "complete"
        else:
            status[tp] = f"not applied (replicas {current.get(tp)})"
    _print(
        args,
        {f"{tp.topic}:{tp.partition}": s for tp, s in status.items()},
        "\n".join(f"{tp.topic}:{tp.partition}\t{s}" for tp, s in sorted(status.items())),
    )
    return 0 if all(s == "complete" for s in status.values()) else 1
