"""``ConsumerGroupMetadata``: what a transactional producer needs of a consumer's group
membership (Kafka's class of the same name, KIP-447).

``Consumer.group_metadata()`` returns it; ``Producer.send_offsets_to_transaction(offsets,
consumer.group_metadata())`` sends it with the transaction's offsets, so that the group
coordinator refuses them from a consumer the group has moved on without (a zombie whose
partitions belong to another member now).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConsumerGroupMetadata"]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A consumer's group id, generation, member id and static instance id (None: dynamic
    member). ``generation_id=-1`` and an empty ``member_id`` (not a group member, or
    ``assign()``) skip the coordinator's membership check, as in Kafka."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
