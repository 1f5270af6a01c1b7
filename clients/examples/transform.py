"""An exactly-once consume-transform-produce application: read a topic, transform each record,
write the results to another topic, and commit the input offsets in the same transaction.

    python clients/examples/transform.py [--bootstrap-server localhost:9092] \\
        [--group uppercaser] [--transactional-id uppercaser-1] INPUT OUTPUT

It is ``strom.TransactionalLoop`` with a transform function: each poll becomes one
transaction holding its output records and the next input offsets (with
``--max-batch-interval-ms N``, a transaction takes the polls of N ms after its first record,
up to ``--max-batch-records`` input records: fewer, larger transactions). Either both
commit or neither does, so after a crash the group resumes from the last committed offsets
and the output holds every input exactly once for a read_committed reader. Run several copies
with the same group and a different ``--transactional-id`` each to share the input's
partitions; a restarted copy reuses its transactional id, which fences its previous
incarnation and aborts what that one left open.

Errors, as Kafka's KIP-691 classifies them (the loop does this):

* fenced (``ProducerFencedError``, ``InvalidProducerEpochError``): a newer copy with this
  transactional id took over; exit with status 3;
* anything else from a transaction (``TransactionAbortableError``, a failed record, the
  coordinator's timeout abort, a rebalance that moved our partitions): abort, rewind the
  consumer to where the aborted transaction started reading (offsets the loop kept), carry on;
* a commit that times out is retried by calling ``commit_transaction()`` again, never aborted.

SIGINT or SIGTERM commits the open transaction and exits with status 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator

from strom import OutputRecord, TransactionalLoop
from strom.eos import Transform
from strom.errors import StromError
from strom.producer import is_fatal
from strom.types import ConsumerRecord

EXIT_FENCED = 3


def uppercase(output: str) -> Transform:
    """The application's work: here, upper-case the value (same key) into ``output``."""

    def transform(record: ConsumerRecord) -> Iterator[OutputRecord]:
        yield OutputRecord(output, (record.value or b"").upper(), key=record.key)

    return transform


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--bootstrap-server", default="localhost:9092")
    parser.add_argument("--group", default="uppercaser")
    parser.add_argument("--transactional-id", default="uppercaser-1")
    parser.add_argument("--transaction-timeout-ms", type=int, default=60000)
    parser.add_argument("--max-batch-records", type=int, default=1000)
    parser.add_argument("--max-batch-interval-ms", type=int, default=0)
    args = parser.parse_args(argv)
    loop = TransactionalLoop(
        args.bootstrap_server,
        input_topics=[args.input],
        group_id=args.group,
        transactional_id=args.transactional_id,
        transform=uppercase(args.output),
        max_batch_records=args.max_batch_records,
        max_batch_interval_ms=args.max_batch_interval_ms,
        consumer_options={"auto_offset_reset": "earliest"},
        producer_options={"transaction_timeout_ms": args.transaction_timeout_ms},
    )
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: loop.stop())
    try:
        loop.run()
    except StromError as exc:
        if is_fatal(exc):
            print(f"fenced by a newer instance, exiting: {exc}", file=sys.stderr)
            return EXIT_FENCED
        raise
    stats = loop.stats
    print(
        f"{stats.transactions_committed} transactions committed "
        f"({stats.records_consumed} records in, {stats.records_produced} out), "
        f"{stats.transactions_aborted} aborted",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
