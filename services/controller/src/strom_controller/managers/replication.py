"""Partition leadership and ISR: reacting to brokers leaving and returning, leader elections
(preferred and unclean) and AlterPartition requests from partition leaders.

Rules (Kafka's):

- A dead broker leaves every ISR, except that an ISR never becomes empty: when the last live
  member dies it stays, so that it can lead again when it returns (no data loss).
- A partition whose leader died gets the first replica (in assignment order) that is alive and
  in the ISR; with none, leader -1 unless the topic sets ``unclean.leader.election.enable``,
  which lets any live replica lead (logged and counted: data may be lost).
- Every leadership change bumps ``leader_epoch``; every change bumps ``partition_epoch``.
- A returning broker moves nothing by itself, except leading a leaderless partition whose ISR
  it is in; leaders go back to preferred replicas only through preferred-leader election.

Pure: each method reads the cache and returns ``ControllerResult``s.
"""

from __future__ import annotations

from collections.abc import Iterator

from strom.errors import (
    ConfigurationError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FencedLeaderEpochError,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    PreferredLeaderNotAvailableError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from strom.topic_config import TopicConfig
from strom_controller.keys import KeyLayout, PartitionRecord
from strom_controller.managers.result import ControllerResult
from strom_controller.managers.topics import initial_partition_state
from strom_controller.metadata_cache import MetadataCache
from strom_controller.model import AlterPartitionItem
from strom_server.etcd.store import Compare, Put
from strom_server.runtime.logs import get_logger

__all__ = ["ReplicationManager"]

log = get_logger(__name__)


def _unclean_allowed(cache: MetadataCache, topic: str) -> bool:
    record = cache.topics.get(topic)
    overrides = record.configs if record else {}
    try:
        config = TopicConfig.from_props({**cache.broker_config, **overrides})
    except ConfigurationError:
        return False
    return config.unclean_leader_election_enable


class ReplicationManager:
    """Leaders, leader epochs and ISRs of every partition."""

    def __init__(self, keys: KeyLayout) -> None:
        self.keys = keys
        self.unclean_elections = 0

    def _put(
        self, topic: str, partition: int, state: PartitionRecord
    ) -> ControllerResult[PartitionRecord]:
        key = self.keys.partition(topic, partition)
        return ControllerResult(
            [Put(key, state.to_json())], state, [Compare.exists(self.keys.topic(topic))]
        )

    def _partitions(self, cache: MetadataCache) -> Iterator[tuple[str, int, tuple[int, ...]]]:
        for topic, record in sorted(cache.topics.items()):
            for p, replicas in sorted(record.partitions.items()):
                yield topic, p, replicas

    # --- brokers leaving and returning ---------------------------------------------------

    def reconcile(self, cache: MetadataCache) -> list[ControllerResult[PartitionRecord]]:
        """Partition changes that bring every partition in line with the live brokers."""
        live = cache.live_brokers()
        results = []
        for topic, p, replicas in self._partitions(cache):
            state = cache.partitions.get((topic, p))
            if state is None:  # a partition without state: give it one
                results.append(self._put(topic, p, initial_partition_state(replicas, live)))
                continue
            new = self._reconciled(cache, topic, p, replicas, state)
            if new is not None:
                results.append(self._put(topic, p, new))
        return results

    def _reconciled(
        self,
        cache: MetadataCache,
        topic: str,
        partition: int,
        replicas: tuple[int, ...],
        state: PartitionRecord,
    ) -> PartitionRecord | None:
        live = cache.live_brokers()
        live_isr = tuple(b for b in state.isr if b in live)
        if state.leader in live:
            if live_isr == state.isr:
                return None
            isr = live_isr or (state.leader,)
            return PartitionRecord(state.leader, state.leader_epoch, isr, state.partition_epoch + 1)
        candidates = [b for b in replicas if b in live_isr]
        if candidates:
            leader = candidates[0]
            isr = live_isr
        elif _unclean_allowed(cache, topic) and any(b in live for b in replicas):
            leader = next(b for b in replicas if b in live)
            isr = (leader,)
            self.unclean_elections += 1
            log.warning(
                "unclean leader election: a replica outside the ISR leads; data may be lost",
                topic=topic,
                partition=partition,
                leader=leader,
                unclean_elections=self.unclean_elections,
            )
        else:
            if state.leader == -1:
                return None
            # Nobody eligible: leaderless; the ISR keeps its last member(s) to lead again later.
            leader = -1
            isr = (state.leader,) if state.leader in state.isr else state.isr
        return PartitionRecord(leader, state.leader_epoch + 1, isr, state.partition_epoch + 1)

    # --- elections -----------------------------------------------------------------------

    def elect(
        self, cache: MetadataCache, topic: str, partition: int, election_type: str
    ) -> ControllerResult[PartitionRecord]:
        """Preferred ("preferred") or unclean ("unclean") election for one partition."""
        record = cache.topics.get(topic)
        state = cache.partitions.get((topic, partition))
        if record is None or partition not in record.partitions or state is None:
            raise UnknownTopicOrPartitionError(f"partition {topic}-{partition} does not exist")
        replicas = record.partitions[partition]
        live = cache.live_brokers()
        if election_type == "preferred":
            preferred = replicas[0]
            if state.leader == preferred:
                raise ElectionNotNeededError(
                    f"the preferred replica {preferred} already leads {topic}-{partition}"
                )
            if preferred not in live or preferred not in state.isr:
                raise PreferredLeaderNotAvailableError(
                    f"preferred replica {preferred} of {topic}-{partition} is "
                    + ("not alive" if preferred not in live else "not in the ISR")
                )
            new = PartitionRecord(
                preferred, state.leader_epoch + 1, state.isr, state.partition_epoch + 1
            )
            return self._put(topic, partition, new)
        if state.leader in live:
            raise ElectionNotNeededError(f"{topic}-{partition} has a live leader")
        candidates = [b for b in replicas if b in live and b in state.isr] or [
            b for b in replicas if b in live
        ]
        if not candidates:
            raise EligibleLeadersNotAvailableError(
                f"no live replica of {topic}-{partition} can lead"
            )
        leader = candidates[0]
        isr = tuple(b for b in state.isr if b in live) if leader in state.isr else (leader,)
        self.unclean_elections += leader not in state.isr
        log.warning("unclean leader election requested", topic=topic, partition=partition,
                    leader=leader)  # fmt: skip
        new = PartitionRecord(leader, state.leader_epoch + 1, isr, state.partition_epoch + 1)
        return self._put(topic, partition, new)

    def needs_preferred_election(self, cache: MetadataCache) -> list[tuple[str, int]]:
        """Partitions whose preferred replica is alive, in sync, and not leading."""
        live = cache.live_brokers()
        out = []
        for topic, p, replicas in self._partitions(cache):
            state = cache.partitions.get((topic, p))
            if (
                state
                and replicas
                and state.leader != replicas[0]
                and replicas[0] in live
                and replicas[0] in state.isr
            ):
                out.append((topic, p))
        return out

    # --- AlterPartition ------------------------------------------------------------------

    def alter_partition(
        self, cache: MetadataCache, broker_id: int, broker_epoch: int, item: AlterPartitionItem
    ) -> ControllerResult[PartitionRecord]:
        """A leader's ISR change; stale requests are refused with Kafka's codes:
        FENCED_LEADER_EPOCH (older leader epoch), UNKNOWN_LEADER_EPOCH (newer),
        NOT_LEADER_OR_FOLLOWER (not the leader), INVALID_REQUEST (stale partition epoch, stale
        broker epoch, or an ISR that is not a set of live replicas including the leader)."""
        topic, partition = item.topic, item.partition
        record = cache.topics.get(topic)
        state = cache.partitions.get((topic, partition))
        if record is None or partition not in record.partitions or state is None:
            raise UnknownTopicOrPartitionError(f"partition {topic}-{partition} does not exist")
        broker = cache.live_brokers().get(broker_id)
        if broker is None:
            raise NotLeaderOrFollowerError(f"broker {broker_id} is not registered")
        if broker_epoch > 0 and broker_epoch != broker.epoch:
            raise InvalidRequestError(
                f"stale broker epoch {broker_epoch}; broker {broker_id} registered at "
                f"{broker.epoch}"
            )
        if state.leader != broker_id:
            raise NotLeaderOrFollowerError(
                f"broker {broker_id} does not lead {topic}-{partition} (leader {state.leader})"
            )
        if item.leader_epoch < state.leader_epoch:
            raise FencedLeaderEpochError(
                f"leader epoch {item.leader_epoch} is older than {state.leader_epoch}"
            )
        if item.leader_epoch > state.leader_epoch:
            raise UnknownLeaderEpochError(
                f"leader epoch {item.leader_epoch} is newer than {state.leader_epoch}"
            )
        if item.partition_epoch != state.partition_epoch:
            raise InvalidRequestError(
                f"stale partition epoch {item.partition_epoch}; the current one is "
                f"{state.partition_epoch}"
            )
        new_isr = tuple(dict.fromkeys(item.new_isr))
        replicas = record.partitions[partition]
        if broker_id not in new_isr:
            raise InvalidRequestError("the new ISR must include the leader")
        outsiders = [b for b in new_isr if b not in replicas]
        if outsiders:
            raise InvalidRequestError(f"broker(s) {outsiders} are not replicas of the partition")
        added_dead = [b for b in new_isr if b not in state.isr and b not in cache.live_brokers()]
        if added_dead:
            raise InvalidRequestError(f"broker(s) {added_dead} are not alive and cannot join")
        if set(new_isr) == set(state.isr):
            return ControllerResult([], state)
        new = PartitionRecord(state.leader, state.leader_epoch, new_isr, state.partition_epoch + 1)
        result = self._put(topic, partition, new)
        result.compares.append(
            Compare.mod_equals(
                self.keys.partition(topic, partition),
                cache.mod_revision(self.keys.partition(topic, partition)),
            )
        )
        return result
