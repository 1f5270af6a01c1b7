"""Reading a partition from each replica and pausing nodes, for the replication tests."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from cluster_testkit import LocalCluster

#: The module cluster's settings (conftest.py): followers leave the ISR after 2 s of lag, node
#: sessions expire after 6 s.
LAG_MAX_MS = 2000
SESSION_MS = 6000


def replica_values(
    cluster: LocalCluster, node_id: int, topic: str, partition: int
) -> tuple[int, list[bytes]]:
    """(high watermark, values below it) as node ``node_id``'s replica holds them."""
    high_watermark, records = cluster.replica_records(node_id, topic, partition)
    return high_watermark, [r.value or b"" for r in records]


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
