"""Run one fault-harness workload over many seeds and report every anomaly count.

``python tests/chaos/seeds.py [--workload txn|replication|partition] [--seeds 20]
[--seconds 240] [--first-seed N]`` (``make chaos-seeds``). Each seed is one pytest run of the
workload's long test (``STROM_CHAOS_SEED``, ``STROM_CHAOS_SECONDS``) on a cluster of its own;
its output goes to ``.strom/chaos-seeds/<workload>-<seed>.log``. The report has one row per
seed with each check's count, then the totals; the exit status is 1 when any count is not 0
or a run failed without a table (a harness error), so a failure names its seed for replay.
One clean run proves little: failures depend on timing.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = {
    "txn": "tests/chaos/test_chaos.py::test_txn_chaos_long",
    "replication": "tests/chaos/test_chaos.py::test_chaos_long",
    "partition": "tests/chaos/test_partition_chaos.py::test_partition_chaos_long",
}
#: A row of a checker's table: the check's name, two or more spaces, its count.
_ROW = re.compile(r"^(\S.*?)\s{2,}(\d+)$")


def parse_tables(output: str) -> Counter[str]:
    """The counts of every checker table in ``output`` (tables follow a ``----- -----`` rule
    and end at the first line that is not a row); a check in two tables is summed."""
    counts: Counter[str] = Counter()
    in_table = False
    for line in output.splitlines():
        if re.match(r"^-+\s+-+$", line):
            in_table = True
            continue
        match = _ROW.match(line) if in_table else None
        if match is None:
            in_table = False
            continue
        counts[match.group(1)] += int(match.group(2))
    return counts


def run_seed(workload: str, seed: int, seconds: int, log_dir: Path) -> tuple[Counter[str], int]:
    """One run: (its counts, pytest's exit status)."""
    env = {**os.environ, "STROM_CHAOS_SEED": str(seed), "STROM_CHAOS_SECONDS": str(seconds)}
    argv = [sys.executable, "-m", "pytest", "-m", "slow", "-s", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*argv, TESTS[workload]], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    output = done.stdout + done.stderr
    (log_dir / f"{workload}-{seed}.log").write_text(output)
    return parse_tables(output), done.returncode


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=sorted(TESTS), default="txn")
    parser.add_argument("--seeds", type=int, default=20, help="how many runs (default 20)")
    parser.add_argument("--seconds", type=int, default=240, help="each run's faults (default 240)")
    parser.add_argument(
        "--first-seed", type=int, help="seeds N, N+1, ... instead of random ones (to replay)"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.seconds < 1:
        parser.error("--seeds and --seconds must be at least 1")
    log_dir = ROOT / ".strom" / "chaos-seeds"
    log_dir.mkdir(parents=True, exist_ok=True)
    rng = random.SystemRandom()
    totals: Counter[str] = Counter()
    failed: list[int] = []
    for i in range(args.seeds):
        seed = args.first_seed + i if args.first_seed is not None else rng.randrange(1 << 32)
        started = time.monotonic()
        counts, status = run_seed(args.workload, seed, args.seconds, log_dir)
        totals.update(counts)
        bad = {name: n for name, n in counts.items() if n}
        if bad or status != 0 or not counts:
            failed.append(seed)
        verdict = "ok" if seed not in failed else (bad or f"pytest exit {status}, no table")
        print(
            f"[{i + 1}/{args.seeds}] {args.workload} seed {seed}: {verdict} "
            f"({time.monotonic() - started:.0f} s, log {log_dir.name}/{args.workload}-{seed}.log)",
            flush=True,
        )
    width = max((len(name) for name in totals), default=5)
    print(f"\n{args.workload}: {args.seeds} seeds of {args.seconds} s; counts summed over them")
    for name, count in totals.items():
        print(f"  {name.ljust(width)}  {count}")
    if failed:
        print(f"FAILED seeds (replay with STROM_CHAOS_SEED=...): {failed}")
        return 1
    print("every count 0 on every seed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
