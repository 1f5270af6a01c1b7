"""Keep large message buffers off mmap: a measured fix for the data path's biggest CPU cost.

glibc serves allocations above ``M_MMAP_THRESHOLD`` (128 KiB at start) with fresh ``mmap``
pages, so every 1 MiB request and response buffer page-faults 256 times and is unmapped again
when freed. Raising the threshold (and the trim threshold, so freed memory stays in the heap
for the next request) made a storage node take 1 MiB produce requests at 2.4x the rate with
less than half the CPU (bench/storage.py; docs/architecture.md). Memory stays bounded by the
requests in flight plus ``trim`` bytes of free heap, whatever the data size.

A no-op outside glibc, and when the operator set ``MALLOC_MMAP_THRESHOLD_`` or
``MALLOC_TRIM_THRESHOLD_`` (their choice wins).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["tune_allocator"]

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
DEFAULT_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's ceiling for this setting on 64-bit
DEFAULT_TRIM_THRESHOLD = 64 * 1024 * 1024


def tune_allocator(
    mmap_threshold: int = DEFAULT_MMAP_THRESHOLD, trim_threshold: int = DEFAULT_TRIM_THRESHOLD
) -> bool:
    """Apply the thresholds with ``mallopt``; returns whether they were applied."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(
        mallopt(M_TRIM_THRESHOLD, trim_threshold)
    )
