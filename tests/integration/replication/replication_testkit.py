"""Reading a partition from each replica and pausing nodes, for the replication tests."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
from cluster_testkit import LocalCluster

from strom._transport import channel_options
from strom.protocol.v1 import storage_pb2, storage_pb2_grpc
from strom.records import iter_records

#: The module cluster's settings (conftest.py): followers leave the ISR after 2 s of lag, node
#: sessions expire after 6 s.
LAG_MAX_MS = 2000
SESSION_MS = 6000
DEBUG_REPLICA_ID = -2  # reads any replica, leader or follower, up to its high watermark


def replica_values(
    cluster: LocalCluster, node_id: int, topic: str, partition: int
) -> tuple[int, list[bytes]]:
    """(high watermark, values below it) as node ``node_id``'s replica holds them."""
    values: list[bytes] = []
    offset = 0
    with grpc.insecure_channel(
        cluster.storage_address(node_id), options=channel_options()
    ) as channel:
        stub = storage_pb2_grpc.StorageNodeStub(channel)
        while True:
            request = storage_pb2.FetchRequest(
                replica_id=DEBUG_REPLICA_ID,
                max_bytes=4 << 20,
                partitions=[
                    storage_pb2.FetchPartition(
                        topic=topic, partition=partition, fetch_offset=offset,
                        partition_max_bytes=4 << 20,
                    )
                ],
            )  # fmt: skip
            (result,) = stub.Fetch(request, timeout=10).partitions
            assert result.error_code == 0, result.error_message
            records = [r for r in iter_records(result.records) if r.offset >= offset]
            values += [r.value or b"" for r in records]
            if not records or records[-1].offset + 1 >= result.high_watermark:
                return result.high_watermark, values
            offset = records[-1].offset + 1


@contextmanager
def paused(cluster: LocalCluster, name: str) -> Iterator[None]:
    """SIGSTOP the process for the block, SIGCONT after (even on failure)."""
    popen = cluster.processes[name].popen
    assert popen is not None
    os.kill(popen.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(popen.pid, signal.SIGCONT)
