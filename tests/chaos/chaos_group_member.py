"""One member of the chaos run's consumer group, run as its own process so that the nemesis can
kill it with SIGKILL (it then cannot leave the group: its partitions move only after its
session times out).

``python chaos_group_member.py GATEWAY GROUP TOPIC JOURNAL SESSION_MS``

It subscribes, and after processing each poll commits the next offsets synchronously
(at-least-once). The journal gets one line per event, flushed at once so that a kill loses
nothing already written: ``R <partition> <offset> <value>`` for each record consumed and
``C <partition> <offset>`` for each partition of an acknowledged commit. SIGTERM closes the
consumer (commit, leave) and exits.
"""

from __future__ import annotations

import signal
import sys
import threading

from strom import Consumer, StromError, TopicPartition
from strom.types import OffsetAndMetadata


def main(gateway: str, group: str, topic: str, journal_path: str, session_ms: int) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = Consumer(
        bootstrap_servers=gateway,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=max(100, session_ms // 5),
        request_timeout_ms=10000,
    )
    consumer.subscribe([topic])
    with open(journal_path, "a", buffering=1) as journal:
        try:
            while not stop.is_set():
                try:
                    batches = consumer.poll(timeout_ms=300)
                except StromError as exc:
                    journal.write(f"E poll {type(exc).__name__}\n")
                    continue
                if not batches:
                    continue
                offsets: dict[TopicPartition, OffsetAndMetadata] = {}
                for tp, records in batches.items():
                    for record in records:
                        value = (record.value or b"").decode()
                        journal.write(f"R {tp.partition} {record.offset} {value}\n")
                    offsets[tp] = OffsetAndMetadata(records[-1].offset + 1)
                try:
                    consumer.commit(offsets)
                except StromError as exc:  # rebalance under way, coordinator moving: retried
                    journal.write(f"E commit {type(exc).__name__}\n")  # by the next records
                    continue
                for tp, committed in offsets.items():
                    journal.write(f"C {tp.partition} {committed.offset}\n")
        finally:
            consumer.close()


if __name__ == "__main__":
    gateway, group, topic, journal_path, session_ms = sys.argv[1:6]
    main(gateway, group, topic, journal_path, int(session_ms))
