"""Which per-record ``send`` path the producers run: the C fast path or pure Python.

``IMPLEMENTATION`` is ``"c"`` when ``strom.producer._native._cproducer`` loaded (then
``Producer.send`` and the asyncio ``Producer.send`` are its ``FastSend``), else ``"python"``
with ``REASON`` saying why (not built, ``STROM_NO_EXTENSIONS``, or
``STROM_PRODUCER_FAST_PATH=0``). ``append_floor(buf, topic, value)`` is, for benchmarks, a C
function of ``send``'s call shape that only appends ``value`` to the bytearray ``buf``: the
floor of such a call (None without the extension).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from strom.producer import _native

__all__ = ["IMPLEMENTATION", "REASON", "append_floor"]

#: "c" (the fast path) or "python".
IMPLEMENTATION: Literal["c", "python"] = "c" if _native.cproducer is not None else "python"
#: Why the fast path is off ("" when it is on).
REASON: str = _native.reason
#: A C call of send()'s shape that only appends to a buffer (benchmarks), or None.
append_floor: Callable[[bytearray, str, bytes], int] | None = (
    None if _native.cproducer is None else _native.cproducer.append_floor
)
