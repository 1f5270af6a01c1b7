"""A process killed with SIGKILL while appending: every acknowledged batch survives."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from strom.records.header import walk_batches
from strom_server.runtime.clock import SystemClock
from strom_storage.log import FetchIsolation, Log, LogConfig

WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    from storage_batches import simple_batch
    from strom_server.runtime.clock import SystemClock
    from strom_storage.log import Log, LogConfig
    log = Log.open(sys.argv[1], LogConfig(segment_bytes=20000), clock=SystemClock())
    while True:
        info = log.append_as_leader(simple_batch(3, value_size=200))
        print(info.first_offset, info.last_offset, flush=True)
    """
)


def test_sigkill_while_appending(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    helpers = str(Path(__file__).parent)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory), helpers],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acked: list[tuple[int, int]] = []
    for line in proc.stdout:
        first, last = map(int, line.split())
        acked.append((first, last))
        if len(acked) >= 300:
            proc.kill()  # SIGKILL: no close, no flush, no marker
            break
    proc.wait()
    log = Log.open(directory, LogConfig(segment_bytes=20000), clock=SystemClock())
    try:
        assert not log.had_clean_shutdown
        assert log.log_end_offset >= acked[-1][1] + 1
        offset, seen = 0, []
        while offset < log.log_end_offset:
            data = log.reader.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END).records
            batches = walk_batches(data)  # every CRC checked
            seen.extend((h.base_offset, h.last_offset) for _, h in batches)
            offset = batches[-1][1].next_offset
        assert seen[: len(acked)] == acked
    finally:
        log.close()
