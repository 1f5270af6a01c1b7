"""One consume-transform-produce worker of the transactional chaos run, a process of its own so
that the nemesis can kill it with SIGKILL mid-transaction.

``python chaos_txn_worker.py GATEWAY GROUP IN_TOPIC OUT_TOPIC TRANSACTIONAL_ID JOURNAL``

It reads IN_TOPIC with read_committed in GROUP and, per poll, in one transaction writes
``<in partition>:<in offset>:<value>`` for each record to OUT_TOPIC (same partition number) and
the next input offsets with ``send_offsets_to_transaction``, then commits. An abortable error
aborts and rewinds each partition to the first offset the aborted transaction read (kept here,
as ``strom.TransactionalLoop`` does: asking the coordinator for the committed offsets can fail
while it moves, and no answer may ever send the worker back to the start of its input); a
fenced producer exits 3 (a newer worker with the
same transactional id took over). A restarted worker with the same transactional id fences the
killed one and aborts whatever it left open. The journal gets ``B`` for each transaction begun,
``C <n>`` after each commit of n records, ``A <error>`` after each abort.
"""

from __future__ import annotations

import signal
import sys
import threading

from strom import Consumer, Producer, StromError, TopicPartition
from strom.errors import InvalidProducerEpochError, ProducerFencedError
from strom.types import OffsetAndMetadata

FENCED_EXIT = 3


def main(argv: list[str]) -> int:
    gateway, group, in_topic, out_topic, txn_id, path = argv
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = Consumer(
        bootstrap_servers=gateway,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        request_timeout_ms=10000,
    )
    producer = Producer(
        bootstrap_servers=gateway,
        transactional_id=txn_id,
        transaction_timeout_ms=10000,
        linger_ms=5,
        request_timeout_ms=5000,
        delivery_timeout_ms=60000,
        max_block_ms=60000,
    )
    consumer.subscribe([in_topic])
    with open(path, "a", buffering=1) as journal:
        try:
            producer.init_transactions()
            while not stop.is_set():
                batches = consumer.poll(timeout_ms=300)
                if not batches:
                    continue
                journal.write("B\n")
                try:
                    producer.begin_transaction()
                    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
                    count = 0
                    for tp, records in batches.items():
                        for record in records:
                            text = (record.value or b"").decode()
                            value = f"{tp.partition}:{record.offset}:{text}"
                            producer.send(out_topic, value=value.encode(), partition=tp.partition)
                            count += 1
                        offsets[tp] = OffsetAndMetadata(records[-1].offset + 1)
                    producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                    producer.commit_transaction()
                    journal.write(f"C {count}\n")
                except (ProducerFencedError, InvalidProducerEpochError) as exc:
                    journal.write(f"F {type(exc).__name__}\n")
                    return FENCED_EXIT
                except StromError as exc:
                    journal.write(f"A {type(exc).__name__}: {str(exc)[:200]}\n")
                    try:
                        producer.abort_transaction()
                    except (ProducerFencedError, InvalidProducerEpochError):
                        return FENCED_EXIT
                    rewind(consumer, {tp: records[0].offset for tp, records in batches.items()})
        finally:
            producer.close(timeout=30)
            consumer.close()
    return 0


def rewind(consumer: Consumer, started: dict[TopicPartition, int]) -> None:
    """Back to where the aborted transaction started reading, so that its records are processed
    again (partitions no longer assigned start from the committed offsets at their new owner)."""
    assigned = consumer.assignment()
    for tp, offset in started.items():
        if tp in assigned:
            consumer.seek(tp, offset)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:7]))
