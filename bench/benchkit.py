"""What every benchmark here shares: progress lines, free loopback ports, the command line
(``--quick``, ``--keep``), the data directory kept on failure, a local cluster's spec on free
ports and the final ``SUMMARY {json}`` line.

Benchmarks run as scripts (``.venv/bin/python bench/NAME.py``), so ``bench/`` is
``sys.path[0]`` and they import this module as ``benchkit``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from strom_server.local import free_ports
from strom_server.local.cluster import LocalClusterSpec

__all__ = [
    "bench_arguments",
    "free_base_port",
    "free_port",
    "local_cluster_spec",
    "print_summary",
    "progress",
    "serve_until_signalled",
    "work_dir",
]

HOST = "127.0.0.1"
_T0 = time.perf_counter()


def progress(text: str) -> None:
    """A line with the seconds since the benchmark started."""
    print(f"[{time.perf_counter() - _T0:6.1f} s] {text}", flush=True)


def free_port() -> int:
    """A loopback port free right now, below the ephemeral range (strom_server.local.free_ports)."""
    return free_ports.free_port(HOST)


def free_base_port(count: int) -> int:
    """A port with ``count`` consecutive free loopback ports from it."""
    return free_ports.free_port_range(count, HOST)


@contextlib.contextmanager
def work_dir(prefix: str, keep: bool) -> Iterator[Path]:
    """A fresh temporary directory for the benchmark's data and logs: removed at the end
    unless ``keep``; kept, and named on stderr, when the benchmark fails."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    except BaseException:
        print(f"benchmark failed; data and logs kept in {path}", file=sys.stderr)
        raise
    if not keep:
        shutil.rmtree(path, ignore_errors=True)


def local_cluster_spec(workdir: Path, **options: Any) -> LocalClusterSpec:
    """A LocalClusterSpec with its data in ``workdir`` on free loopback ports (the Kafka
    listener's too); ``options`` are the spec's other fields (node counts, flags)."""
    spec = LocalClusterSpec(data_dir=workdir, **options)
    return dataclasses.replace(
        spec,
        etcd_client_port=free_port(),
        etcd_peer_port=free_port(),
        base_port=free_base_port(1 + spec.storage_nodes + spec.controllers + spec.coordinators),
        kafka_port=free_port(),
    )


def bench_arguments(doc: str, quick_help: str, *, keep: bool = True) -> argparse.ArgumentParser:
    """The parser every benchmark starts from: ``--quick`` and (with ``keep``) ``--keep``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    if keep:
        parser.add_argument("--keep", action="store_true", help="keep the data and logs directory")
    return parser


def print_summary(run: Callable[[], dict[str, Any]]) -> None:
    """Run the benchmark with SIGTERM turned into KeyboardInterrupt (so that its ``finally``
    blocks stop every process it started), then print the ``SUMMARY {json}`` line."""

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    summary = run()
    print("SUMMARY " + json.dumps(summary, sort_keys=True))


async def serve_until_signalled(server: Any, port: int) -> None:
    """Start a grpc.aio ``server`` on loopback ``port`` and serve until SIGTERM or SIGINT (a
    baseline server process of a benchmark)."""
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0.5)
