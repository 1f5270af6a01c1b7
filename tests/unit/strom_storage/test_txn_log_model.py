"""Random interleavings of transactional and plain writes, commits and aborts of a few
producers: a read_committed reader that applies ``aborted_transactions`` the way a Kafka
consumer does sees exactly the committed (and plain) records, in offset order, before and after
a restart, a crash, and on a follower."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from strom.records import BatchBuilder, decode_batch, walk_batches
from strom.records.control import ControlRecordType, decode_control_record
from strom_server.runtime.clock import ManualClock
from strom_storage.log import FetchIsolation, Log

TS = 1_700_000_000_000
PIDS = (11, 22, 33)


def _batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=pid >= 0
    )
    for value in values:
        builder.append(TS, None, value)
    return builder.build()


def read_committed(log: Log, max_bytes: int) -> list[bytes]:
    """What a read_committed consumer returns, fetching ``max_bytes`` at a time: batches of
    aborted transactions dropped (KafkaConsumer's algorithm), control batches skipped."""
    values: list[bytes] = []
    pending: list[tuple[int, int]] = []  # reported aborted (first offset, pid), not yet reached
    aborted_pids: set[int] = set()
    offset = log.log_start_offset
    while offset < log.last_stable_offset:
        read = log.reader.read(offset, max_bytes, isolation=FetchIsolation.TXN_COMMITTED)
        assert read.records, f"no progress at {offset}"
        pending.extend((first, pid) for pid, first in read.aborted_transactions)
        pending.sort()
        for pos, header in walk_batches(read.records):
            while pending and pending[0][0] <= header.last_offset:
                aborted_pids.add(pending.pop(0)[1])
            batch = decode_batch(bytes(read.records[pos : pos + header.size]))
            if header.is_control:
                record = batch.records[0]
                control = decode_control_record(record.key, record.value)
                if control.type == ControlRecordType.ABORT:
                    aborted_pids.discard(header.producer_id)
            elif not (header.is_transactional and header.producer_id in aborted_pids):
                values.extend(r.value for r in batch.records if r.offset >= offset)  # type: ignore[misc]
            offset = header.next_offset
    return values


class Model:
    """Drives a log at random and remembers what a committed reader must see."""

    def __init__(self, log: Log, rng: random.Random) -> None:
        self.log, self.rng = log, rng
        self.epoch = dict.fromkeys(PIDS, 0)
        self.seq = dict.fromkeys(PIDS, 0)
        self.open: dict[int, list[tuple[int, bytes]]] = {}  # pid -> (offset, value) written
        self.visible: list[tuple[int, bytes]] = []  # committed or plain: (offset, value)
        self.ended: list[tuple[int, int]] = []  # (first offset, marker offset) of transactions
        self.counter = 0

    def _values(self) -> list[bytes]:
        n = self.rng.randint(1, 3)
        self.counter += n
        return [b"v%d" % (self.counter - n + i) for i in range(n)]

    def step(self) -> None:
        rng, log = self.rng, self.log
        action = rng.random()
        pid = rng.choice(PIDS)
        if action < 0.45:
            values = self._values()
            epoch = self.epoch[pid]
            data = _batch(values, pid=pid, epoch=epoch, seq=self.seq[pid])
            verified = log.transactions_to_verify(data)
            assert verified == (set() if pid in self.open else {(pid, epoch)})
            info = log.append_as_leader(data, verified=verified)
            self.seq[pid] += len(values)
            self.open.setdefault(pid, []).extend(
                (info.first_offset + i, v) for i, v in enumerate(values)
            )
        elif action < 0.6:
            values = self._values()
            info = log.append_as_leader(_batch(values))
            self.visible.extend((info.first_offset + i, v) for i, v in enumerate(values))
        elif action < 0.8:
            committed = rng.random() < 0.5
            marker = log.append_txn_marker(
                pid, self.epoch[pid], committed=committed, coordinator_epoch=1, leader_epoch=0
            )
            assert marker is not None
            written = self.open.pop(pid, [])
            if written:
                self.ended.append((written[0][0], marker.first_offset))
            if committed:
                self.visible.extend(written)
            self.epoch[pid] += 1
            self.seq[pid] = 0
        elif action < 0.95:
            log.update_high_watermark(rng.randint(log.high_watermark, log.log_end_offset))
        else:
            log.roll()

    def expected(self, log: Log) -> list[bytes]:
        lso = log.last_stable_offset
        return [v for o, v in sorted(self.visible) if o < lso]


@pytest.mark.parametrize("seed", range(12))
def test_read_committed_sees_exactly_the_committed_records(
    open_log: Callable[..., Log], tmp_path: Path, clock: ManualClock, seed: int
) -> None:
    rng = random.Random(seed)
    log = open_log(segment_bytes=rng.choice([400, 1000, 1 << 20]))
    model = Model(log, rng)
    for _ in range(rng.randint(40, 120)):
        model.step()
        if rng.random() < 0.1:
            assert read_committed(log, rng.choice([1, 200, 1 << 20])) == model.expected(log)
    # The LSO: the high watermark, or the first offset of the earliest open transaction, or of
    # an ended one whose marker is not below the high watermark yet.
    hw = log.high_watermark
    firsts = [written[0][0] for written in model.open.values()]
    firsts += [first for first, marker in model.ended if marker >= hw]
    assert log.last_stable_offset == min([hw, *firsts])
    for max_bytes in (1, 300, 1 << 20):
        assert read_committed(log, max_bytes) == model.expected(log)
    expected = read_committed(log, 1 << 20)

    # A follower replaying the leader's bytes sees the same.
    follower = Log.open(tmp_path / "follower-0", log.config, clock=clock)
    offset = 0
    while offset < log.log_end_offset:
        chunk = log.reader.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END).records
        follower.append_as_follower(chunk)
        offset = [h for _, h in walk_batches(chunk)][-1].next_offset
    follower.update_high_watermark(log.high_watermark)
    assert follower.last_stable_offset == log.last_stable_offset
    assert read_committed(follower, 1 << 20) == expected
    assert follower.active_producers() == log.active_producers()
    follower.close()

    # So does the log after a clean restart, and after a crash. (A restart forgets which ended
    # transactions wait for their marker to be replicated, so the LSO may be higher: up to the
    # high watermark or the first open transaction.)
    log.close()
    reopened = open_log(log.config)
    assert read_committed(reopened, 1 << 20) == model.expected(reopened)
    assert reopened.last_stable_offset >= log.last_stable_offset
    reopened.checkpoint()
    reopened.close_unclean()
    recovered = open_log(log.config)
    assert recovered.last_stable_offset >= log.last_stable_offset
    assert read_committed(recovered, 1 << 20) == model.expected(recovered)
