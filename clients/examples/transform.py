"""An exactly-once consume-transform-produce application: read a topic, transform each record,
write the results to another topic, and commit the input offsets in the same transaction.

    python clients/examples/transform.py [--bootstrap-server localhost:9092] \\
        [--group uppercaser] [--transactional-id uppercaser-1] INPUT OUTPUT

Each ``poll`` becomes one transaction holding its output records and the next input offsets
(``send_offsets_to_transaction``). Either both commit or neither does, so after a crash the
group resumes from the last committed offsets and the output holds every input exactly once
for a read_committed reader. Run several copies with the same group and a different
``--transactional-id`` each to share the input's partitions; a restarted copy reuses its
transactional id, which fences its previous incarnation and aborts what that one left open.

Errors, as Kafka's KIP-691 classifies them:

* fenced (``ProducerFencedError``, ``InvalidProducerEpochError``): a newer copy with this
  transactional id took over; exit;
* anything else from a transaction (``TransactionAbortableError``, a failed record, the
  coordinator's timeout abort, a rebalance that moved our partitions): abort, rewind the
  consumer to the committed offsets, carry on;
* a commit that times out is retried by calling ``commit_transaction()`` again, never aborted.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from strom import Consumer, Producer, StromError, TopicPartition
from strom.errors import InvalidProducerEpochError, InvalidTxnStateError, ProducerFencedError
from strom.types import ConsumerRecord, OffsetAndMetadata

FENCED = (ProducerFencedError, InvalidProducerEpochError)
EXIT_FENCED = 3


def transform(record: ConsumerRecord) -> bytes:
    """The application's work: here, upper-case the value."""
    return (record.value or b"").upper()


def rewind(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    """Back to the group's committed offsets, so the aborted records are processed again."""
    assigned = consumer.assignment()
    for tp in partitions:
        if tp not in assigned:
            continue  # revoked meanwhile: its new owner starts from the committed offset
        committed = consumer.committed(tp)
        if committed is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, committed.offset)


def commit(producer: Producer, attempts: int = 5) -> None:
    """commit_transaction(), called again after a timeout: a commit is never aborted."""
    for attempt in range(attempts):
        try:
            producer.commit_transaction()
            return
        except StromError as exc:
            if not exc.retriable or attempt == attempts - 1:
                raise


def run(args: argparse.Namespace, stop: threading.Event) -> int:
    consumer = Consumer(
        bootstrap_servers=args.bootstrap_server,
        group_id=args.group,
        enable_auto_commit=False,  # offsets go through the transaction
        auto_offset_reset="earliest",
        isolation_level="read_committed",  # never transform another job's aborted output
    )
    producer = Producer(
        args.bootstrap_server,
        transactional_id=args.transactional_id,
        transaction_timeout_ms=args.transaction_timeout_ms,
    )
    consumer.subscribe([args.input])
    try:
        producer.init_transactions()
        while not stop.is_set():
            batches = consumer.poll(timeout_ms=500)
            if not batches:
                continue
            try:
                producer.begin_transaction()
                offsets = {}
                for tp, records in batches.items():
                    for record in records:
                        producer.send(args.output, transform(record), key=record.key)
                    offsets[tp] = OffsetAndMetadata(records[-1].offset + 1)
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                commit(producer)
            except FENCED as exc:
                print(f"fenced by a newer instance, exiting: {exc}", file=sys.stderr)
                return EXIT_FENCED
            except StromError as exc:
                print(f"transaction aborted, retrying: {exc}", file=sys.stderr)
                try:
                    producer.abort_transaction()
                except FENCED:
                    return EXIT_FENCED
                except InvalidTxnStateError:
                    # The commit kept timing out: its outcome is unknown, and a commit is
                    # never turned into an abort. A restart (same transactional id) ends it.
                    print("commit outcome unknown, exiting", file=sys.stderr)
                    return 1
                rewind(consumer, list(batches))
    finally:
        producer.close(timeout=30)
        consumer.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--bootstrap-server", default="localhost:9092")
    parser.add_argument("--group", default="uppercaser")
    parser.add_argument("--transactional-id", default="uppercaser-1")
    parser.add_argument("--transaction-timeout-ms", type=int, default=60000)
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return run(args, stop)


if __name__ == "__main__":
    sys.exit(main())
