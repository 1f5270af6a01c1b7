"""``strom transactions list|describe|describe-commit|describe-producers|find-hanging|abort``:
transactions through the gateway, as Kafka's ``kafka-transactions.sh`` (``describe-commit``:
a commit id's staged-commit decision, Strom's own).

``abort`` ends an open transaction by fencing its transactional id (InitProducerId, as a new
producer with the id would): Strom has no client-facing WriteTxnMarkers, so Kafka's
``abort --topic T --partition P --producer-id ID`` form is accepted only to look the
transactional id up (the coordinators' listing of that producer id). See docs/transactions.md.

Output is an aligned table, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from typing import Any

from strom.admin.transactions import STATES, HangingTransaction
from strom.cli.admin_commands import _admin, _common
from strom.cli.groups import _emit, _table
from strom.errors import ConfigurationError, StromError
from strom.types import StagedTransaction, TopicPartition

#: Kafka's default of find-hanging's --max-transaction-timeout, in minutes.
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15


def add_parsers(commands: Any) -> None:
    txns = commands.add_parser(
        "transactions", help="list, describe, find hanging and abort transactions"
    )
    actions = txns.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list transactional ids and their states")
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        choices=STATES,
        help="only transactions in this state (repeatable)",
    )
    listing.add_argument(
        "--producer-id", action="append", type=int, default=[], help="only this producer id"
    )
    listing.add_argument(
        "--duration-ms", type=int, default=0, help="only those open for longer than this"
    )
    listing.add_argument("--prefix", default=None, help="only transactional ids starting with this")
    _common(listing)
    listing.set_defaults(handler=transactions_list)

    describe = actions.add_parser(
        "describe", help="one transactional id's state at its coordinator"
    )
    describe.add_argument("--transactional-id", required=True)
    _common(describe)
    describe.set_defaults(handler=transactions_describe)

    commit = actions.add_parser("describe-commit", help="a commit id's last staged-commit decision")
    commit.add_argument("--commit-id", required=True)
    _common(commit)
    commit.set_defaults(handler=transactions_describe_commit)

    producers = actions.add_parser(
        "describe-producers", help="the producers a partition's leader knows"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    _common(producers)
    producers.set_defaults(handler=transactions_describe_producers)

    hanging = actions.add_parser(
        "find-hanging",
        help="open transactions on partitions that no coordinator is completing",
    )
    hanging.add_argument("--topic", help="only this topic (default: every topic)")
    hanging.add_argument("--partition", type=int, help="only this partition of --topic")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
        metavar="MINUTES",
        help="report transactions whose producer wrote nothing for longer than this "
        "(default: %(default)s, the server's transaction.max.timeout.ms)",
    )
    _common(hanging)
    hanging.set_defaults(handler=transactions_find_hanging)

    abort = actions.add_parser(
        "abort", help="abort a transactional id's open transaction (fences its producer)"
    )
    abort.add_argument("--transactional-id", help="the id whose open transaction to abort")
    abort.add_argument("--topic", help="with --partition and --producer-id: look the id up")
    abort.add_argument("--partition", type=int)
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int, help="accepted for Kafka compatibility")
    abort.add_argument("--coordinator-epoch", type=int, help="accepted for Kafka compatibility")
    _common(abort)
    abort.set_defaults(handler=transactions_abort)


def transactions_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        listed = admin.list_transactions(
            states=args.state or None,
            producer_ids=args.producer_id or None,
            duration_ms=args.duration_ms,
            transactional_id_prefix=args.prefix,
        )
    _emit(
        args,
        [asdict(t) for t in listed],
        _table(
            ("TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"),
            ((t.transactional_id, t.producer_id, t.state) for t in listed),
        ),
    )
    return 0


def transactions_describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        found = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    started = found.transaction_start_time_ms
    duration = "" if started is None else f"{(time.time() * 1000 - started) / 1000:.1f} s"
    partitions = ",".join(f"{tp.topic}-{tp.partition}" for tp in found.partitions) or "-"
    value = asdict(found)
    value["partitions"] = [asdict(tp) for tp in found.partitions]
    _emit(
        args,
        value,
        _table(
            (
                "COORDINATOR",
                "TRANSACTIONAL-ID",
                "PRODUCER-ID",
                "EPOCH",
                "STATE",
                "TIMEOUT-MS",
                "DURATION",
                "PARTITIONS",
                "GROUPS",
            ),
            [
                (
                    found.coordinator_id,
                    found.transactional_id,
                    found.producer_id,
                    found.producer_epoch,
                    found.state,
                    found.transaction_timeout_ms,
                    duration or "-",
                    partitions,
                    ",".join(found.group_ids) or "-",
                )
            ],
        ),
    )
    return 0


def transactions_describe_commit(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        found = admin.describe_staged_commit(args.commit_id)
    if found is None:
        raise StromError(f"commit id {args.commit_id!r} has no staged-commit decision")

    def names(members: tuple[StagedTransaction, ...]) -> str:
        return ",".join(f"{m.transactional_id}:{m.producer_id}:{m.producer_epoch}"
                        for m in members) or "-"  # fmt: skip

    value = asdict(found)
    value["metadata"] = found.metadata.decode(errors="replace")
    _emit(
        args,
        value,
        _table(
            ("COMMIT-ID", "SEQUENCE", "STATE", "MEMBERS", "FAILED-MEMBERS", "METADATA"),
            [
                (
                    found.commit_id,
                    found.sequence,
                    found.state,
                    names(found.members),
                    names(found.failed_members),
                    value["metadata"] or "-",
                )
            ],
        ),
    )
    return 0


def transactions_describe_producers(args: argparse.Namespace) -> int:
    tp = TopicPartition(args.topic, args.partition)
    with _admin(args) as admin:
        producers = admin.describe_producers([tp]).get(tp, [])
    _emit(
        args,
        [asdict(p) for p in producers],
        _table(
            (
                "PRODUCER-ID",
                "EPOCH",
                "LAST-SEQUENCE",
                "LAST-TIMESTAMP",
                "COORDINATOR-EPOCH",
                "CURRENT-TXN-START-OFFSET",
            ),
            (
                (
                    p.producer_id,
                    p.producer_epoch,
                    p.last_sequence,
                    _time(p.last_timestamp_ms),
                    p.coordinator_epoch,
                    "-" if p.current_txn_start_offset is None else p.current_txn_start_offset,
                )
                for p in producers
            ),
        ),
    )
    return 0


def transactions_find_hanging(args: argparse.Namespace) -> int:
    if args.max_transaction_timeout < 0:
        raise ConfigurationError("--max-transaction-timeout must be >= 0")
    if args.partition is not None and args.topic is None:
        raise ConfigurationError("--partition needs --topic")
    with _admin(args) as admin:
        partitions: list[TopicPartition] | None = None
        if args.topic is not None:
            if args.partition is not None:
                partitions = [TopicPartition(args.topic, args.partition)]
            else:
                (described,) = admin.describe_topics([args.topic])
                partitions = [TopicPartition(args.topic, p.partition) for p in described.partitions]
        found = admin.find_hanging_transactions(
            partitions, max_transaction_timeout_ms=args.max_transaction_timeout * 60_000
        )
    _emit(args, [_hanging_json(h) for h in found], _hanging_table(found))
    return 0


def _hanging_json(h: HangingTransaction) -> dict[str, Any]:
    value = asdict(h)
    value["partition"] = asdict(h.partition)
    return value


def _hanging_table(found: list[HangingTransaction]) -> str:
    return _table(
        (
            "TOPIC",
            "PARTITION",
            "PRODUCER-ID",
            "EPOCH",
            "COORDINATOR-EPOCH",
            "START-OFFSET",
            "LAST-TIMESTAMP",
            "TRANSACTIONAL-ID",
        ),
        (
            (
                h.partition.topic,
                h.partition.partition,
                h.producer_id,
                h.producer_epoch,
                h.coordinator_epoch,
                h.start_offset,
                _time(h.last_timestamp_ms),
                h.transactional_id or "-",
            )
            for h in found
        ),
    )


def transactions_abort(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        txn_id = args.transactional_id
        if txn_id is None:
            if args.producer_id is None:
                raise ConfigurationError(
                    "abort needs --transactional-id, or --topic, --partition and --producer-id"
                )
            listed = admin.list_transactions(producer_ids=[args.producer_id])
            if not listed:
                raise StromError(
                    f"no coordinator knows producer id {args.producer_id}: Strom aborts a "
                    "transaction by its transactional id (there is no client-facing "
                    "WriteTxnMarkers); see docs/transactions.md on hanging transactions"
                )
            txn_id = listed[0].transactional_id
            if args.topic is not None and args.partition is not None:
                tp = TopicPartition(args.topic, args.partition)
                current = admin.describe_transactions([txn_id])[txn_id]
                if current.state != "Ongoing" or tp not in current.partitions:
                    raise StromError(
                        f"producer id {args.producer_id} ({txn_id}) has no ongoing transaction "
                        f"on {tp.topic}-{tp.partition} at its coordinator (state "
                        f"{current.state}): an open transaction there is hanging, and Strom "
                        "cannot write its marker from a client (no client-facing "
                        "WriteTxnMarkers); see docs/transactions.md"
                    )
        after = admin.abort_transaction(txn_id)
    _emit(
        args,
        {"transactional_id": txn_id, "state": after.state, "producer_epoch": after.producer_epoch},
        f"aborted the open transaction of {txn_id} (now {after.state}, producer epoch "
        f"{after.producer_epoch}; its previous producer is fenced)",
    )
    return 0


def _time(ms: int) -> str:
    if ms < 0:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"
