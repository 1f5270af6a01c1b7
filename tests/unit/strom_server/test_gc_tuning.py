"""tune_gc: thresholds raised, start-up objects frozen (run in a child: it is process-wide)."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import gc
from strom_server.runtime.gc_tuning import GEN0_THRESHOLD, tune_gc
kept = [object() for _ in range(1000)]
tune_gc()
assert gc.get_threshold()[0] == GEN0_THRESHOLD, gc.get_threshold()
assert gc.get_freeze_count() >= 1000, gc.get_freeze_count()
print("ok")
"""


def test_tune_gc_raises_thresholds_and_freezes_what_exists() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
