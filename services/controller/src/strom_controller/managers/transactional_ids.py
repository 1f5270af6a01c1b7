"""Transactional ids: one stable producer id per transactional id, its epoch bumped on every
InitProducerId so that the previous incarnation is fenced.

``P/transactional_ids/<quoted id>`` holds ``{"producer_id", "producer_epoch"}``. The first
InitProducerId for an id takes a fresh producer id at epoch 0; each later one keeps the id and
bumps the epoch. When the epoch would pass the largest one a batch can carry, the id moves to a
fresh producer id at epoch 0 (as Kafka does), which fences the old one just as well: storage
nodes never see the old id again. The coordinator uses this to fence the previous owner of a
``__consumer_offsets`` partition (docs/coordinator.md).
"""

from __future__ import annotations

from strom_controller.keys import KeyLayout, encode
from strom_controller.managers.producer_ids import MAX_PRODUCER_EPOCH
from strom_controller.managers.result import ControllerResult
from strom_controller.metadata_cache import MetadataCache
from strom_server.etcd.store import Compare, Put

__all__ = ["TransactionalIdManager"]


class TransactionalIdManager:
    """Decides the next (producer id, epoch) of a transactional id; performs no I/O."""

    def __init__(self, keys: KeyLayout) -> None:
        self.keys = keys

    @staticmethod
    def needs_new_id(cache: MetadataCache, transactional_id: str) -> bool:
        """Whether the next InitProducerId of ``transactional_id`` needs a fresh producer id."""
        current = cache.transactional_ids.get(transactional_id)
        return current is None or current[1] + 1 >= MAX_PRODUCER_EPOCH

    def init(
        self, cache: MetadataCache, transactional_id: str, fresh_id: int | None
    ) -> ControllerResult[tuple[int, int]]:
        """The write bumping ``transactional_id``'s epoch (or moving it to ``fresh_id``, which
        the caller allocates when ``needs_new_id``), guarded by the record it was read from."""
        key = self.keys.transactional_id(transactional_id)
        current = cache.transactional_ids.get(transactional_id)
        if self.needs_new_id(cache, transactional_id):
            if fresh_id is None:
                raise ValueError(f"transactional id {transactional_id!r} needs a fresh producer id")
            value = (fresh_id, 0)
        else:
            assert current is not None
            value = (current[0], current[1] + 1)
        revision = cache.mod_revision(key)
        guard = Compare.mod_equals(key, revision) if current is not None else Compare.absent(key)
        put = Put(key, encode({"producer_id": value[0], "producer_epoch": value[1]}))
        return ControllerResult([put], value, [guard])
