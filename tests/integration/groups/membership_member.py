"""A group member in its own process, for tests that kill it with SIGKILL.

    python membership_member.py GATEWAY GROUP TOPIC [--commit-after-processing]
        [--session-timeout-ms N] [--max-records N]

It subscribes to TOPIC in GROUP and polls forever, printing one JSON line per event:
``{"assigned": [[topic, p], ...]}`` / ``{"revoked": ...}`` / ``{"lost": ...}`` from its
listener, ``{"processed": [[p, offset], ...]}`` after "processing" each poll's records, and
with ``--commit-after-processing`` (auto-commit off) ``{"committed": {p: offset}}`` after each
synchronous commit.
"""

from __future__ import annotations

import argparse
import json
import sys

from strom import Consumer, TopicPartition


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Listener:
    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        emit({"assigned": sorted([tp.topic, tp.partition] for tp in partitions)})

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        emit({"revoked": sorted([tp.topic, tp.partition] for tp in partitions)})

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        emit({"lost": sorted([tp.topic, tp.partition] for tp in partitions)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("gateway")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("--commit-after-processing", action="store_true")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--max-records", type=int, default=50)
    args = parser.parse_args()
    consumer = Consumer(
        bootstrap_servers=args.gateway,
        group_id=args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=not args.commit_after_processing,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=500,
        max_poll_records=args.max_records,
    )
    consumer.subscribe([args.topic], listener=Listener())
    while True:
        batches = consumer.poll(timeout_ms=200)
        if not batches:
            continue
        emit({"processed": [[r.partition, r.offset] for rs in batches.values() for r in rs]})
        if args.commit_after_processing:
            offsets = {tp: rs[-1].offset + 1 for tp, rs in batches.items()}
            consumer.commit(offsets)
            emit({"committed": {str(tp.partition): o for tp, o in offsets.items()}})


if __name__ == "__main__":
    main()
