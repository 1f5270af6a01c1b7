"""Partition reassignment: start, cancel, complete and list, Kafka's way.

Starting moves a partition from its current replicas (the original) to ``target``: the replica
list becomes ``target`` followed by the replicas being removed, so the new replicas start
fetching (throttled by ``throttle_bytes_per_sec``, which storage nodes read from the
reassignment record); the record ``P/reassignments/<topic>/<p>`` lists what is being added and
removed. When every target replica is in the ISR (leaders report ISR growth through
AlterPartition), ``complete`` makes the replica list ``target``, drops the removed replicas
from the ISR, moves leadership into the target when needed, and deletes the record.
Cancelling restores the original replicas. Raising a topic's replication factor is a
reassignment to longer targets (``placement.raise_replication_factor`` proposes them).
"""

from __future__ import annotations

from collections.abc import Iterable

from strom.errors import (
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    ReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from strom_controller.keys import KeyLayout, PartitionRecord, ReassignmentRecord, TopicRecord
from strom_controller.managers.result import ControllerResult
from strom_controller.metadata_cache import MetadataCache
from strom_controller.model import OngoingReassignment
from strom_server.etcd.store import Compare, Delete, Op, Put

__all__ = ["ReassignmentManager"]


class ReassignmentManager:
    def __init__(self, keys: KeyLayout) -> None:
        self.keys = keys

    def _lookup(
        self, cache: MetadataCache, topic: str, partition: int
    ) -> tuple[TopicRecord, PartitionRecord]:
        record = cache.topics.get(topic)
        state = cache.partitions.get((topic, partition))
        if record is None or partition not in record.partitions or state is None:
            raise UnknownTopicOrPartitionError(f"partition {topic}-{partition} does not exist")
        return record, state

    def _with_replicas(
        self, record: TopicRecord, partition: int, replicas: tuple[int, ...]
    ) -> TopicRecord:
        return TopicRecord(
            record.topic_id, {**record.partitions, partition: replicas}, dict(record.configs)
        )

    def alter(
        self,
        cache: MetadataCache,
        topic: str,
        partition: int,
        target: tuple[int, ...],
        throttle_bytes_per_sec: int = 0,
    ) -> ControllerResult[None]:
        """Start a reassignment to ``target``, or cancel the pending one when it is empty."""
        record, state = self._lookup(cache, topic, partition)
        ongoing = cache.reassignments.get((topic, partition))
        if not target:
            if ongoing is None:
                raise NoReassignmentInProgressError(
                    f"no reassignment of {topic}-{partition} is in progress"
                )
            return self._cancel(
                cache, topic=topic, partition=partition, record=record, state=state, ongoing=ongoing
            )
        if ongoing is not None:
            raise ReassignmentInProgressError(
                f"{topic}-{partition} is already being reassigned to {list(ongoing.target)}; "
                "cancel it first"
            )
        if len(set(target)) != len(target):
            raise InvalidReplicaAssignmentError(f"the target {list(target)} lists a broker twice")
        unknown = [b for b in target if b not in cache.live_brokers()]
        if unknown:
            raise InvalidReplicaAssignmentError(f"broker(s) {unknown} are not registered")
        original = record.partitions[partition]
        if tuple(target) == original:
            return ControllerResult()
        adding = tuple(b for b in target if b not in original)
        removing = tuple(b for b in original if b not in target)
        replicas = tuple(target) + removing
        reassignment = ReassignmentRecord(tuple(target), adding, removing, throttle_bytes_per_sec)
        new_state = PartitionRecord(
            state.leader, state.leader_epoch, state.isr, state.partition_epoch + 1
        )
        effects: list[Op] = [
            Put(self.keys.reassignment(topic, partition), reassignment.to_json()),
            Put(self.keys.partition(topic, partition), new_state.to_json()),
            Put(self.keys.topic(topic), self._with_replicas(record, partition, replicas).to_json()),
        ]
        return ControllerResult(effects, None, [Compare.exists(self.keys.topic(topic))])

    def _cancel(
        self,
        cache: MetadataCache,
        *,
        topic: str,
        partition: int,
        record: TopicRecord,
        state: PartitionRecord,
        ongoing: ReassignmentRecord,
    ) -> ControllerResult[None]:
        current = record.partitions[partition]
        original = tuple(b for b in current if b not in ongoing.adding)
        return ControllerResult(
            self._finish(
                cache,
                topic=topic,
                partition=partition,
                record=record,
                state=state,
                replicas=original,
            ),
            None,
            [Compare.exists(self.keys.topic(topic))],
        )

    def _finish(
        self,
        cache: MetadataCache,
        *,
        topic: str,
        partition: int,
        record: TopicRecord,
        state: PartitionRecord,
        replicas: tuple[int, ...],
    ) -> list[Op]:
        live = cache.live_brokers()
        isr = tuple(b for b in state.isr if b in replicas)
        leader, leader_epoch = state.leader, state.leader_epoch
        if leader not in replicas:
            eligible = [b for b in replicas if b in isr and b in live]
            leader = eligible[0] if eligible else -1
            leader_epoch += 1
        if not isr:
            isr = (leader,) if leader != -1 else replicas[:1]
        new_state = PartitionRecord(leader, leader_epoch, isr, state.partition_epoch + 1)
        return [
            Delete(self.keys.reassignment(topic, partition)),
            Put(self.keys.partition(topic, partition), new_state.to_json()),
            Put(self.keys.topic(topic), self._with_replicas(record, partition, replicas).to_json()),
        ]

    def completions(self, cache: MetadataCache) -> list[ControllerResult[None]]:
        """Reassignments whose target replicas are all in sync, finished."""
        out: list[ControllerResult[None]] = []
        for (topic, partition), ongoing in sorted(cache.reassignments.items()):
            record = cache.topics.get(topic)
            state = cache.partitions.get((topic, partition))
            if record is None or state is None or partition not in record.partitions:
                continue
            if all(b in state.isr for b in ongoing.target):
                effects = self._finish(
                    cache,
                    topic=topic,
                    partition=partition,
                    record=record,
                    state=state,
                    replicas=ongoing.target,
                )
                out.append(
                    ControllerResult(effects, None, [Compare.exists(self.keys.topic(topic))])
                )
        return out

    def list(
        self, cache: MetadataCache, partitions: Iterable[tuple[str, int]] = ()
    ) -> list[OngoingReassignment]:
        wanted = set(partitions)
        out = []
        for (topic, partition), ongoing in sorted(cache.reassignments.items()):
            if wanted and (topic, partition) not in wanted:
                continue
            record = cache.topics.get(topic)
            replicas = record.partitions.get(partition, ()) if record else ()
            out.append(
                OngoingReassignment(topic, partition, replicas, ongoing.adding, ongoing.removing)
            )
        return out
