"""``BulkTracker``: the one future of a ``send_many`` call, settled when all its chunks are."""

from __future__ import annotations

import threading
from collections.abc import Callable

from strom.producer._batch import ProducerBatch

__all__ = ["BulkTracker"]


class BulkTracker:
    """Completion of one ``send_many`` call: counts its chunks, settles once."""

    __slots__ = ("_done", "_error", "_lock", "_pending", "_records", "_sealed", "_settle")

    def __init__(self, settle: Callable[[int, BaseException | None], None]) -> None:
        self._settle = settle
        self._lock = threading.Lock()
        self._pending = 0
        self._records = 0
        self._sealed = False
        self._done = False
        self._error: BaseException | None = None

    def track(self, batch: ProducerBatch, count: int) -> None:
        with self._lock:
            self._pending += 1
            self._records += count
        batch.add_callback(self._chunk_done)

    def _chunk_done(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._pending -= 1
            if batch.error is not None and self._error is None:
                self._error = batch.error
            finish = self._sealed and self._pending == 0 and not self._done
            if finish:
                self._done = True
        if finish:
            self._settle(self._records, self._error)

    def seal(self, error: BaseException | None = None) -> None:
        """No more chunks; ``error`` is a failure that stopped the call part-way."""
        with self._lock:
            self._sealed = True
            if error is not None and self._error is None:
                self._error = error
            finish = self._pending == 0 and not self._done
            if finish:
                self._done = True
        if finish:
            self._settle(self._records, self._error)
