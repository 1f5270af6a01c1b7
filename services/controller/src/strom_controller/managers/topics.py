"""Topic administration: create, delete, add partitions. Pure: cache in, ControllerResult out.

Rejections raise the ``strom.errors`` class of the matching ErrorCode, with a message saying
what is wrong; the runtime reports it for that topic only.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from strom.errors import (
    ConfigurationError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    ReassignmentInProgressError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from strom.placement import assign_replicas
from strom.topic_config import TopicConfig
from strom_controller.keys import KeyLayout, PartitionRecord, TopicRecord
from strom_controller.managers.configs import describe_topic_configs
from strom_controller.managers.result import ControllerResult
from strom_controller.metadata_cache import MetadataCache
from strom_controller.model import CreatedTopic, NewPartitions, NewTopicSpec
from strom_controller.topic_names import colliding_topic, validate_topic_name
from strom_server.etcd.store import Compare, Delete, Op, Put

__all__ = ["TopicDefaults", "TopicManager", "initial_partition_state"]

_MAX_PARTITIONS = 100_000


@dataclass(frozen=True)
class TopicDefaults:
    """Broker settings for topics created without explicit values."""

    num_partitions: int = 1
    replication_factor: int = 1


def initial_partition_state(
    replicas: tuple[int, ...], live: Mapping[int, object]
) -> PartitionRecord:
    """A new partition: the first live replica leads; every live replica is in sync (all are
    empty)."""
    in_sync = tuple(b for b in replicas if b in live)
    return PartitionRecord(in_sync[0] if in_sync else -1, 0, in_sync, 0)


def validate_configs(broker_config: Mapping[str, str], overrides: Mapping[str, str]) -> None:
    """Raise InvalidConfigError naming the first bad or unknown topic config."""
    try:
        TopicConfig.from_props({**broker_config, **overrides})
    except ConfigurationError as exc:
        raise InvalidConfigError(str(exc)) from None


def _check_assignment(
    assignment: Mapping[int, tuple[int, ...]], live: Mapping[int, object], first: int = 0
) -> int:
    """Validate an explicit placement of partitions ``first..``; returns its replication factor."""
    if not assignment:
        raise InvalidReplicaAssignmentError("the replica assignment is empty")
    expected = list(range(first, first + len(assignment)))
    if sorted(assignment) != expected:
        raise InvalidReplicaAssignmentError(
            f"partitions in the assignment must be consecutive from {first}, got "
            f"{sorted(assignment)}"
        )
    rf = len(next(iter(assignment.values())))
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            raise InvalidReplicaAssignmentError(f"partition {p} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"partition {p} lists a broker twice: {replicas}")
        if len(replicas) != rf:
            raise InvalidReplicaAssignmentError(
                f"partition {p} has {len(replicas)} replicas, others have {rf}: the replication "
                "factor must be the same for every partition"
            )
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"partition {p} names broker(s) {unknown} that are not registered"
            )
    return rf


class TopicManager:
    """Create, delete and grow topics."""

    def __init__(
        self,
        keys: KeyLayout,
        defaults: TopicDefaults,
        *,
        rng: random.Random | None = None,
        new_topic_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self.keys = keys
        self.defaults = defaults
        self._rng = rng or random.Random()
        self._new_topic_id = new_topic_id

    def create(
        self, cache: MetadataCache, spec: NewTopicSpec, *, validate_only: bool = False
    ) -> ControllerResult[CreatedTopic]:
        name = spec.name
        validate_topic_name(name)
        if name in cache.topics:
            raise TopicAlreadyExistsError(f"topic '{name}' already exists")
        other = colliding_topic(name, cache.topics)
        if other is not None:
            raise InvalidTopicError(
                f"topic '{name}' collides with existing topic '{other}': names differing only "
                "in '.' and '_' collide"
            )
        validate_configs(cache.broker_config, spec.configs)
        live = cache.live_brokers()
        if spec.assignments:
            if spec.num_partitions != -1 or spec.replication_factor != -1:
                raise InvalidRequestError(
                    "give either an explicit assignment or num_partitions/replication_factor "
                    "(as -1), not both"
                )
            rf = _check_assignment(spec.assignments, live)
            assignment = dict(spec.assignments)
        else:
            count = (
                self.defaults.num_partitions if spec.num_partitions == -1 else spec.num_partitions
            )
            rf = (
                self.defaults.replication_factor
                if spec.replication_factor == -1
                else spec.replication_factor
            )
            if count < 1 or count > _MAX_PARTITIONS:
                raise InvalidPartitionsError(
                    f"number of partitions must be in [1, {_MAX_PARTITIONS}], got {count}"
                )
            if rf < 1:
                raise InvalidReplicationFactorError(
                    f"replication factor must be larger than 0, got {rf}"
                )
            if rf > len(live):
                raise InvalidReplicationFactorError(
                    f"replication factor {rf} is larger than the number of live brokers "
                    f"({len(live)})"
                )
            racks = {b: r.rack for b, r in live.items()}
            assignment = assign_replicas(racks, count, rf, rng=self._rng)
        topic_id = self._new_topic_id()
        record = TopicRecord(topic_id, assignment, dict(spec.configs))
        created = CreatedTopic(
            name,
            topic_id,
            len(assignment),
            rf,
            tuple(describe_topic_configs(cache.broker_config, spec.configs)),
        )
        if validate_only:
            return ControllerResult([], created)
        effects: list[Op] = [
            Put(self.keys.partition(name, p), initial_partition_state(r, live).to_json())
            for p, r in sorted(assignment.items())
        ]
        effects.append(Put(self.keys.topic(name), record.to_json()))  # last: the topic appears
        return ControllerResult(effects, created, [Compare.absent(self.keys.topic(name))])

    def delete(self, cache: MetadataCache, name: str) -> ControllerResult[None]:
        if name not in cache.topics:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        effects: list[Op] = [
            Delete(self.keys.topic(name)),
            Delete(self.keys.topic_partitions(name), prefix=True),
            Delete(self.keys.topic_reassignments(name), prefix=True),
        ]
        return ControllerResult(effects, None, [Compare.exists(self.keys.topic(name))])

    def create_partitions(
        self, cache: MetadataCache, request: NewPartitions, *, validate_only: bool = False
    ) -> ControllerResult[None]:
        name = request.name
        record = cache.topics.get(name)
        if record is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        current = len(record.partitions)
        if request.count < current:
            raise InvalidPartitionsError(
                f"topic '{name}' has {current} partitions; the count cannot be decreased to "
                f"{request.count}"
            )
        if request.count == current:
            raise InvalidPartitionsError(f"topic '{name}' already has {current} partitions")
        if request.count > _MAX_PARTITIONS:
            raise InvalidPartitionsError(f"at most {_MAX_PARTITIONS} partitions per topic")
        if any(t == name for t, _ in cache.reassignments):
            raise ReassignmentInProgressError(f"topic '{name}' has a reassignment in progress")
        live = cache.live_brokers()
        rf = len(record.partitions[0]) if record.partitions else 1
        added = request.count - current
        if request.assignments:
            if len(request.assignments) != added:
                raise InvalidReplicaAssignmentError(
                    f"{len(request.assignments)} assignments given for {added} new partitions"
                )
            new = {current + i: tuple(r) for i, r in enumerate(request.assignments)}
            if _check_assignment(new, live, first=current) != rf:
                raise InvalidReplicaAssignmentError(
                    f"the new partitions must have the topic's replication factor {rf}"
                )
        else:
            if rf > len(live):
                raise InvalidReplicationFactorError(
                    f"replication factor {rf} is larger than the number of live brokers "
                    f"({len(live)})"
                )
            racks = {b: r.rack for b, r in live.items()}
            new = assign_replicas(racks, added, rf, first_partition=current, rng=self._rng)
        if validate_only:
            return ControllerResult([], None)
        partitions = {**record.partitions, **new}
        effects: list[Op] = [
            Put(self.keys.partition(name, p), initial_partition_state(r, live).to_json())
            for p, r in sorted(new.items())
        ]
        updated = TopicRecord(record.topic_id, partitions, dict(record.configs))
        effects.append(Put(self.keys.topic(name), updated.to_json()))
        return ControllerResult(effects, None, [Compare.exists(self.keys.topic(name))])
