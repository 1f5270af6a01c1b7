"""Measuring for ``strom perf``: a latency histogram, progress windows, a throttler, Ctrl-C
and the output lines (text or JSON).

``LatencyHistogram`` keeps every latency in a fixed 1.8 MB table, however many records are
measured: exact to the microsecond below 16.384 ms and within 1/16384 (0.006%) above, as
HdrHistogram does with 4 significant digits; the count, sum and maximum are exact.
Percentiles are nearest-rank over the recorded values.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from types import FrameType
from typing import IO, Any

__all__ = [
    "MB",
    "PERCENTILES",
    "LatencyHistogram",
    "Output",
    "Throttler",
    "Window",
    "stop_on_interrupt",
]

#: Kafka's tools count a MB as 2**20 bytes.
MB = 1024 * 1024
#: (JSON field, quantile) reported by every tool that measures latency.
PERCENTILES = (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99), ("p999_ms", 0.999))

_SUB_BITS = 14
_SUB = 1 << _SUB_BITS  # values below this (us) have a slot each
_HALF = _SUB >> 1
_MAX_SHIFT = 26  # up to 2**40 us (12 days); larger values count as that
_MAX_US = (1 << (_SUB_BITS + _MAX_SHIFT)) - 1


class LatencyHistogram:
    """Latencies in microseconds: log-linear slots (``_SUB`` per power of two)."""

    __slots__ = ("count", "counts", "max_us", "total_us")

    def __init__(self) -> None:
        self.counts = [0] * ((_MAX_SHIFT + 2) * _HALF)
        self.count = 0
        self.total_us = 0
        self.max_us = 0

    def record(self, us: int) -> None:
        """Count one latency (us, >= 0)."""
        self.count += 1
        self.total_us += us
        self.max_us = max(self.max_us, us)
        if us < _SUB:
            self.counts[us] += 1
            return
        us = min(us, _MAX_US)
        shift = us.bit_length() - _SUB_BITS
        self.counts[shift * _HALF + (us >> shift)] += 1

    def _value(self, index: int) -> float:
        """The middle of slot ``index`` (us)."""
        if index < _SUB:
            return float(index)
        shift = index // _HALF - 1
        low = (index - shift * _HALF) << shift
        return low + ((1 << shift) - 1) / 2

    def percentiles(self, quantiles: tuple[float, ...]) -> list[float]:
        """The nearest-rank value (ms) of each quantile; 0.0 when nothing was recorded."""
        if not self.count:
            return [0.0 for _ in quantiles]
        cumulative = list(accumulate(self.counts))
        out = []
        for q in quantiles:
            rank = max(1, -int(-q * self.count // 1))  # ceil(q * count)
            index = bisect_left(cumulative, rank)
            out.append(min(self._value(index), float(self.max_us)) / 1000)
        return out

    def summary(self) -> dict[str, float]:
        """avg, max and the ``PERCENTILES`` in ms (JSON field names)."""
        values = self.percentiles(tuple(q for _, q in PERCENTILES))
        figures = {"avg_latency_ms": self.total_us / max(self.count, 1) / 1000}
        figures.update({name: v for (name, _), v in zip(PERCENTILES, values, strict=True)})
        figures["max_latency_ms"] = self.max_us / 1000
        return figures


@dataclass
class Window:
    """What happened since the last progress line; ``add`` is called by the one thread that
    records, which also calls ``report`` when the interval is over."""

    interval_s: float
    report: Callable[[Window, float], None]
    start: float = 0.0
    records: int = 0
    bytes: int = 0
    latency_us: int = 0
    max_us: int = 0

    def __post_init__(self) -> None:
        self.start = time.perf_counter()

    def add(self, records: int, nbytes: int, now: float) -> None:
        self.records += records
        self.bytes += nbytes
        if now - self.start >= self.interval_s:
            self.roll(now)

    def add_latency(self, us: int) -> None:
        self.latency_us += us
        self.max_us = max(self.max_us, us)

    def roll(self, now: float) -> None:
        """Report this window (``report(window, elapsed_s)``) and start the next."""
        self.report(self, max(now - self.start, 1e-9))
        self.start = now
        self.records = self.bytes = self.latency_us = self.max_us = 0

    def rates(self, elapsed_s: float) -> dict[str, float]:
        """records, records/s, MB/s, avg and max latency (ms) of the window."""
        return {
            "records": self.records,
            "records_per_sec": self.records / elapsed_s,
            "mb_per_sec": self.bytes / MB / elapsed_s,
            "avg_latency_ms": self.latency_us / max(self.records, 1) / 1000,
            "max_latency_ms": self.max_us / 1000,
        }


class Throttler:
    """Paces a loop at ``rate`` per second: ``pace(done)`` sleeps until record ``done`` is
    due (start + done / rate), on ``stop`` so that Ctrl-C wakes it. A late loop does not
    sleep until it has caught up."""

    def __init__(self, rate: float, stop: threading.Event) -> None:
        self._rate = rate
        self._stop = stop
        self._start = time.perf_counter()

    def pace(self, done: int) -> None:
        delay = self._start + done / self._rate - time.perf_counter()
        if delay > 0:
            self._stop.wait(delay)


class Output:
    """Progress and summary lines on stdout: text, or one JSON object per line (``type``:
    ``progress`` or ``summary``). Safe to call from any thread."""

    def __init__(self, as_json: bool, stream: IO[str] | None = None) -> None:
        self.as_json = as_json
        self._stream = stream or sys.stdout
        self._lock = threading.Lock()

    def line(self, kind: str, template: str, fields: dict[str, Any]) -> None:
        """Write ``template.format(**fields)``, or the fields as JSON."""
        text = json.dumps({"type": kind, **fields}) if self.as_json else template.format(**fields)
        with self._lock:
            try:
                self._stream.write(text + "\n")
                self._stream.flush()
            except BrokenPipeError:
                pass  # the reader went away (| head): keep measuring quietly


@contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """Ctrl-C (SIGINT) sets the yielded event instead of raising, so a tool can stop sending,
    settle and still report what it measured; a second Ctrl-C raises KeyboardInterrupt."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)
