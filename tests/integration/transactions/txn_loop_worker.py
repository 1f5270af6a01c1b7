"""One ``strom.TransactionalLoop`` process for tests/integration/transactions/test_txn_loop.py,
so that a test can kill it with SIGKILL mid-transaction or stop it with SIGTERM.

``python txn_loop_worker.py GATEWAY GROUP IN_TOPIC OUT_TOPIC TRANSACTIONAL_ID [FLAG ...]``

Copies each input value to OUT_TOPIC, small transactions (at most 50 input records) so that
a kill lands between or inside them; flag ``long`` makes them last 1.5 s instead (a
rebalance then finds one open). Flag ``static`` makes the consumer a static member (its
transactional id as ``group_instance_id``): a restarted process takes its predecessor's place
in the group at once instead of waiting for its session to expire. SIGTERM stops the loop
(the open transaction commits) and the process prints its ``LoopStats`` as one JSON line; a
fenced loop exits with 3.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from collections.abc import Iterator

from strom import OutputRecord, TransactionalLoop
from strom.errors import StromError
from strom.producer import is_fatal
from strom.types import ConsumerRecord


def main(argv: list[str]) -> int:
    gateway, group, in_topic, out_topic, txn_id, *flags = argv
    long = "long" in flags

    def copy(record: ConsumerRecord) -> Iterator[OutputRecord]:
        yield OutputRecord(out_topic, record.value)

    loop = TransactionalLoop(
        gateway,
        input_topics=in_topic,
        group_id=group,
        transactional_id=txn_id,
        transform=copy,
        max_batch_records=10_000 if long else 50,
        max_batch_interval_ms=1500 if long else 50,
        poll_timeout_ms=200,
        consumer_options={
            "auto_offset_reset": "earliest",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 300,
            "group_instance_id": txn_id if "static" in flags else None,
        },
        producer_options={"transaction_timeout_ms": 10000},
    )
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    try:
        loop.run()
    except StromError as exc:
        if is_fatal(exc):
            return 3
        raise
    print(json.dumps(dataclasses.asdict(loop.stats)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
