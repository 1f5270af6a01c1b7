"""The producer's per-record fast path: the optional C twin (``_cproducer``) and the pure bases.

``_cproducer.FastSend`` is a producer's ``send`` in C (partition, murmur2, clock, append to the
open batch, the record future) that hands every unusual call to the pure-Python ``send`` it
wraps. The hot fields of a batch, of the accumulator and of a record future live in base
classes (``BatchBase``, ``AccumulatorBase``, ``FutureBase``): C structs when the extension
loaded, the pure-Python classes below otherwise, with the same attributes.

``cproducer`` is None (and ``reason`` says why) when the extension was not built, failed to
import, the record codec's C twin is off (``STROM_NO_EXTENSIONS``), or
``STROM_PRODUCER_FAST_PATH=0`` asks for the pure-Python path of the producer only.
"""

from __future__ import annotations

import collections.abc
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from strom.records import kernel

__all__ = [
    "AccumulatorBase",
    "BatchBase",
    "FutureBase",
    "cproducer",
    "murmur2",
    "murmur2_partition",
    "reason",
]

cproducer: ModuleType | None = None
reason: str = ""

if kernel.C is None:
    reason = "the record codec's C twin is off or not built"
elif os.environ.get("STROM_PRODUCER_FAST_PATH", "") in ("0", "false", "no"):
    reason = "disabled by STROM_PRODUCER_FAST_PATH=0"
else:
    try:
        from strom.producer._native import _cproducer as cproducer
    except Exception as exc:  # not built, built for another interpreter, or the codec's
        # C twin lacks the append API this one takes (an older build of it)
        reason = f"C extension unavailable: {exc!r}"


class _PyBatchBase:
    """The hot fields of a producer batch (pure Python)."""

    __slots__ = ("append", "closed", "count", "deliveries", "size")

    def __init__(self) -> None:
        self.size = 0
        self.count = 0
        self.closed = False
        self.append: Callable[..., int] | None = None
        self.deliveries: list[tuple[Any, Any]] | None = None


class _PyAccumulatorBase:
    """The hot fields of the accumulator (pure Python)."""

    __slots__ = ("batch_size", "buffer_memory", "used")

    def __init__(self) -> None:
        self.used = 0
        self.buffer_memory = 0
        self.batch_size = 0


class _PyFutureBase:
    """The fields of a record future (pure Python)."""

    __slots__ = ("_batch", "_index", "_key_size", "_timestamp", "_value_size")

    def __init__(
        self, batch: Any, index: int, timestamp: int, key_size: int, value_size: int
    ) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size


murmur2: Callable[[bytes], int] | None = None
murmur2_partition: Callable[[bytes, int], int] | None = None
if TYPE_CHECKING:  # the pure classes declare the fields for the type checker
    BatchBase = _PyBatchBase
    AccumulatorBase = _PyAccumulatorBase
    FutureBase = _PyFutureBase
elif cproducer is not None:
    # The asyncio producer's fast send returns a Ready: a coroutine to asyncio (create_task).
    collections.abc.Coroutine.register(cproducer.Ready)
    BatchBase = cproducer.BatchBase
    AccumulatorBase = cproducer.AccumulatorBase
    FutureBase = cproducer.FutureBase
    murmur2 = cproducer.murmur2
    murmur2_partition = cproducer.murmur2_partition
else:
    BatchBase = _PyBatchBase
    AccumulatorBase = _PyAccumulatorBase
    FutureBase = _PyFutureBase
