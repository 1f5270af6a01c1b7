"""Producer ids for idempotent producers: blocks of ``BLOCK_SIZE`` ids claimed from etcd.

The active controller claims a block with one guarded write of ``P/producer_ids/next_block``
and hands ids out of it from memory; a new active controller always claims a fresh block, so
an id is never handed out twice (unused ids of an abandoned block are skipped).
"""

from __future__ import annotations

from strom_controller.keys import KeyLayout, encode
from strom_controller.managers.result import ControllerResult
from strom_controller.metadata_cache import MetadataCache
from strom_server.etcd.store import Put

__all__ = ["BLOCK_SIZE", "MAX_PRODUCER_EPOCH", "ProducerIdManager"]

BLOCK_SIZE = 1000
MAX_PRODUCER_EPOCH = 32767


class ProducerIdManager:
    """Not thread-safe: the runtime serialises calls."""

    def __init__(self, keys: KeyLayout) -> None:
        self.keys = keys
        self._next = 0
        self._end = 0

    def reset(self) -> None:
        """Forget the current block (on becoming active)."""
        self._next = self._end = 0

    def next_id(self) -> int | None:
        """An id from the current block, or None when a new block must be claimed."""
        if self._next < self._end:
            value = self._next
            self._next += 1
            return value
        return None

    def claim_block(self, cache: MetadataCache) -> ControllerResult[tuple[int, int]]:
        start = cache.next_producer_id_block
        end = start + BLOCK_SIZE
        return ControllerResult([Put(self.keys.producer_ids, encode({"next": end}))], (start, end))

    def block_claimed(self, start: int, end: int) -> None:
        self._next, self._end = start, end
