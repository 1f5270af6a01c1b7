"""``strom log-dirs describe``: each storage node's log directories, as Kafka's
``kafka-log-dirs.sh --describe`` (its ``--topic-list`` / ``--broker-list`` are ``--topic`` /
``--broker``, repeatable or comma-separated).

Output: a table of directories (filesystem size, usable space, replicas and their bytes) and
one of replicas; ``--json`` prints Kafka's JSON layout (``brokers`` → ``logDirs`` →
``partitions`` with ``size``, ``offsetLag``, ``isFuture``) plus each directory's
``totalBytes`` and ``usableBytes``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from strom.admin.log_dirs import BrokerLogDirs
from strom.cli.admin_commands import _admin, _common, _ids
from strom.cli.groups import _table


def add_parsers(commands: Any) -> None:
    log_dirs = commands.add_parser(
        "log-dirs", help="storage nodes' log directories: disk use and replica sizes"
    )
    actions = log_dirs.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = actions.add_parser(
        "describe", help="each directory's filesystem and the size of every replica in it"
    )
    describe.add_argument(
        "--topic",
        action="append",
        default=[],
        help="only replicas of this topic (repeatable or comma-separated; default: all)",
    )
    describe.add_argument(
        "--broker",
        action="append",
        default=[],
        help="only this storage node id (repeatable or comma-separated; default: every live one)",
    )
    _common(describe)
    describe.set_defaults(handler=log_dirs_describe)


def _split(values: list[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def as_json(found: list[BrokerLogDirs]) -> dict[str, Any]:
    """Kafka's ``kafka-log-dirs.sh`` layout, with the filesystem figures added."""
    return {
        "version": 1,
        "brokers": [
            {
                "broker": b.node_id,
                "address": b.address,
                "error": b.error or None,
                "logDirs": [
                    {
                        "logDir": d.path,
                        "error": d.error or None,
                        "totalBytes": d.total_bytes,
                        "usableBytes": d.usable_bytes,
                        "partitions": [
                            {
                                "partition": f"{tp.topic}-{tp.partition}",
                                "size": r.size_bytes,
                                "offsetLag": r.offset_lag,
                                "isFuture": r.is_future,
                            }
                            for tp, r in sorted(d.replicas.items())
                        ],
                    }
                    for d in b.log_dirs
                ],
            }
            for b in found
        ],
    }


_DIR_HEADERS = ("BROKER", "ADDRESS", "LOG-DIR", "TOTAL-BYTES", "USABLE-BYTES", "REPLICAS", "SIZE",
                "ERROR")  # fmt: skip


def as_text(found: list[BrokerLogDirs]) -> str:
    dirs = _table(
        _DIR_HEADERS,
        [
            (b.node_id, b.address, "-", "-", "-", "-", "-", f"{b.error}: {b.error_message}")
            for b in found
            if b.error
        ]
        + [
            (
                b.node_id,
                b.address,
                d.path,
                d.total_bytes,
                d.usable_bytes,
                len(d.replicas),
                d.size_bytes,
                d.error or "",
            )
            for b in found
            for d in b.log_dirs
        ],
    )
    replicas = _table(
        ("BROKER", "TOPIC", "PARTITION", "SIZE", "OFFSET-LAG", "IS-FUTURE", "LOG-DIR"),
        sorted(
            (b.node_id, tp.topic, tp.partition, r.size_bytes, r.offset_lag, r.is_future, path)
            for b in found
            for tp, path, r in b.replicas()
        ),
    )
    return f"{dirs}\n\n{replicas}"


def log_dirs_describe(args: argparse.Namespace) -> int:
    brokers = _ids(",".join(args.broker))
    with _admin(args) as admin:
        found = admin.describe_log_dirs(_split(args.topic), brokers)
    print(json.dumps(as_json(found), indent=2) if args.json else as_text(found))
    return 1 if any(b.error for b in found) else 0
