"""kill -9 a storage node while a client writes with acks=1, restart it, audit the log.

Flush policy under test: the default (flush.messages and flush.ms unset), so the node never
fsyncs on the append path and relies on the page cache, as Kafka does. A killed *process* loses
nothing the kernel already has, so every acknowledged batch must be readable at its
acknowledged offset after the restart. (A machine crash could lose the unflushed tail; that is
what replication is for, see docs/storage.md.) The restart goes through the unclean-shutdown
path: recovery from the recovery point re-validates batches and rebuilds indexes.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import grpc
import pytest
from storage_testkit import RunningNode

from strom.protocol.v1 import common_pb2, storage_pb2
from strom.records import decode_batches, encode_batch

pytestmark = pytest.mark.integration


def _write_until_stopped(
    node: RunningNode, stop: threading.Event, acked: list[tuple[int, list[bytes]]]
) -> None:
    """Produce numbered records until the node dies; remember what was acknowledged."""
    sequence = 0
    while not stop.is_set():
        values = [f"record-{sequence + i}".encode() for i in range(20)]
        data = encode_batch([(int(time.time() * 1000), None, v, None) for v in values])
        request = storage_pb2.ProduceRequest(
            acks=1,
            timeout_ms=2000,
            partitions=[storage_pb2.ProducePartitionData(topic="crash", partition=0, records=data)],
        )
        try:
            result = node.stub.Produce(request, timeout=2).partitions[0]
        except grpc.RpcError:
            return  # the node is gone: unacknowledged from here on
        if result.error_code == common_pb2.NONE:
            acked.append((result.base_offset, values))
        sequence += len(values)


def _read_all(node: RunningNode) -> tuple[dict[int, bytes], int]:
    offsets: dict[int, bytes] = {}
    position = 0
    while True:
        request = storage_pb2.FetchRequest(
            replica_id=-1,
            max_bytes=1 << 20,
            partitions=[
                storage_pb2.FetchPartition(
                    topic="crash", partition=0, fetch_offset=position, current_leader_epoch=-1
                )
            ],
        )
        result = node.stub.Fetch(request, timeout=10).partitions[0]
        assert result.error_code == common_pb2.NONE, result.error_message
        if not result.records:
            return offsets, result.high_watermark
        for decoded in decode_batches(result.records):  # checks every CRC
            for record in decoded:
                assert record.offset not in offsets, f"offset {record.offset} served twice"
                offsets[record.offset] = record.value  # type: ignore[assignment]
            position = decoded.next_offset


@pytest.mark.parametrize("torn_tail", [False, True], ids=["kill-9", "kill-9+torn-tail"])
def test_every_acknowledged_batch_survives_kill_9(
    start_node: Callable[..., RunningNode], torn_tail: bool
) -> None:
    node = start_node(
        "--topics", "crash:1", "--log.segment.bytes", "65536", "--log.index.interval.bytes", "1024"
    )
    acked: list[tuple[int, list[bytes]]] = []
    stop = threading.Event()
    writer = threading.Thread(target=_write_until_stopped, args=(node, stop, acked))
    writer.start()
    try:
        deadline = time.monotonic() + 20
        while len(acked) < 300 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert node.process.popen is not None
        node.process.popen.send_signal(signal.SIGKILL)  # mid-stream, no shutdown at all
        node.process.popen.wait(10)
    finally:
        stop.set()
        writer.join(10)
    assert len(acked) >= 300, "the writer made too little progress to test anything"

    segment_files = sorted((node.data_dir / "crash-0").glob("*.log"))
    assert len(segment_files) > 1, "expected several segments (rolls under load)"
    if torn_tail:  # a write cut short: half a batch header of garbage at the end
        with open(segment_files[-1], "ab") as active:
            active.write(b"\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x01\x00" + b"\xab" * 20)

    restarted = start_node(data_dir=node.data_dir)
    offsets, high_watermark = _read_all(restarted)
    lost = [
        (base + i, value)
        for base, values in acked
        for i, value in enumerate(values)
        if offsets.get(base + i) != value
    ]
    assert lost == [], f"{len(lost)} acknowledged records missing or moved, first {lost[:3]}"
    last_acked = max(base + len(values) for base, values in acked)
    assert high_watermark >= last_acked
    assert sorted(offsets) == list(range(len(offsets))), "gap in the recovered log"
    # The log accepts appends again right after the recovered end.
    more = storage_pb2.ProduceRequest(
        acks=1,
        partitions=[
            storage_pb2.ProducePartitionData(
                topic="crash", partition=0, records=encode_batch([(1, None, b"after", None)])
            )
        ],
    )
    assert restarted.stub.Produce(more, timeout=10).partitions[0].base_offset == high_watermark
