"""``ConsumerCoordinator``: a consumer's membership in its group, client side.

Kafka's classic protocol: JoinGroup (the leader gets every member's subscription and computes
the assignment with the chosen assignor), SyncGroup (every member gets its share), Heartbeat
every ``heartbeat_interval_ms`` from a background task, LeaveGroup on close, OffsetCommit and
OffsetFetch. The coordinator is found through the gateway (``CoordinatorLink``). The group
protocol itself (joins, heartbeats, leaving, the generation) is ``GroupMembership``'s, which
this class extends as Kafka's ConsumerCoordinator extends its AbstractCoordinator.

Who runs what (as in Kafka's consumer, where user callbacks only run inside ``poll``):

- ``poll()`` runs in the user's task: it applies a finished join (listener calls, committed
  positions), prepares the next one (auto-commit and revocation: everything for EAGER, nothing
  for COOPERATIVE until the new assignment says what moved) and starts it, and auto-commits.
- The join itself (JoinGroup + leader assignment + SyncGroup, with retries) runs in a
  background task, so a cooperative member keeps consuming its partitions meanwhile.
- The heartbeat task only sends heartbeats and records what they say (rejoin needed,
  partitions lost, fenced) for the next ``poll``; when ``poll`` has not been called for
  ``max_poll_interval_ms`` it leaves the group, as Kafka's heartbeat thread does.
- Metadata is watched from the fetcher's task (``watch_metadata``): a pattern matching a new
  topic, or (on the leader) a subscribed topic gaining partitions, requests a rejoin.

Not thread-safe: everything runs on the consumer's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from strom.cluster import ClusterClient
from strom.consumer._group_membership import GroupMembership, JoinResult
from strom.consumer._group_options import GroupOptions
from strom.consumer._join_protocol import join_protocols, leader_assignment, member_subscriptions
from strom.consumer._offset_commits import (
    CommitOffsets,
    Committed,
    commit_offsets,
    commit_request,
    fetch_committed,
    send_commit,
)
from strom.consumer._subscription import SubscriptionState
from strom.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    RebalanceInProgressError,
    StromError,
    UnknownMemberIdError,
    for_code,
)
from strom.group.assignors import PartitionAssignor, RebalanceProtocol
from strom.protocol.v1 import common_pb2, coordinator_pb2
from strom.types import OffsetAndMetadata, TopicPartition

__all__ = ["ConsumerCoordinator", "JoinResult", "call_listener"]

log = logging.getLogger("strom.consumer")

_E = common_pb2.ErrorCode
#: How often a subscription looks again for a subscribed topic that does not exist yet.
_MISSING_TOPIC_RETRY_S = 1.0


async def call_listener(listener: Any, name: str, partitions: Iterable[TopicPartition]) -> None:
    """Call ``listener.<name>(set)`` when it has it (plain or async); ``on_partitions_lost``
    falls back to ``on_partitions_revoked``, as Kafka's default does."""
    method = getattr(listener, name, None)
    if method is None and name == "on_partitions_lost":
        method = getattr(listener, "on_partitions_revoked", None)
    if method is None:
        return
    outcome = method(set(partitions))
    if asyncio.iscoroutine(outcome):
        await outcome


class ConsumerCoordinator(GroupMembership):
    """Group membership, commits and committed offsets of one consumer (see module doc)."""

    def __init__(
        self,
        cluster: ClusterClient,
        subscriptions: SubscriptionState,
        options: GroupOptions,
        *,
        metadata_max_age_ms: int,
        wake_poll: Callable[[], None],
    ) -> None:
        super().__init__(cluster, options, wake_poll=wake_poll)
        self._cluster = cluster
        self._subs = subscriptions
        self._api_timeout = options.default_api_timeout_ms / 1000
        self._metadata_max_age = metadata_max_age_ms / 1000
        self._joined_topics: frozenset[str] | None = None
        #: Topics a pattern subscription matched at the last metadata look.
        self._pattern_topics: frozenset[str] | None = None
        #: Leader only: partition counts of every topic of the group when it assigned.
        self._assignment_snapshot: dict[str, int] | None = None
        self._group_topics: frozenset[str] = frozenset()
        self._metadata_due = 0.0
        self._auto_commit_due = 0.0
        self._auto_commit_task: asyncio.Task[None] | None = None

    # -- state -----------------------------------------------------------------------------------

    @property
    def group_managed(self) -> bool:
        """Whether partitions come from the group (a subscription), not from ``assign()``."""
        return self._subs.mode == "subscribe"

    @property
    def is_cooperative(self) -> bool:
        return self.options.protocol is RebalanceProtocol.COOPERATIVE

    def subscription_changed(self) -> None:
        """The user called subscribe() again: look at metadata now, rejoin if it differs."""
        self._metadata_due = 0.0
        self._pattern_topics = None
        if self._joined_topics is not None and not self._subs.pattern:
            if frozenset(self._subs.topics) != self._joined_topics:
                self.request_rejoin("the subscription changed")
        elif self._joined_topics is not None:
            self.request_rejoin("the subscription changed")

    # -- poll: the user's task -------------------------------------------------------------------

    async def poll(self) -> None:
        """Membership work due now, run in the caller's task (listener calls happen here)."""
        loop = asyncio.get_running_loop()
        self._last_poll = loop.time()
        if self._fatal is not None:
            raise self._fatal
        if self.group_managed:
            self._ensure_heartbeat_task()
            if self._joining is not None and self._joining.done():
                await self._finish_join()
            if self._joining is None and (self._rejoin_needed or self.generation < 0):
                error = await self._prepare_join()
                if self._fatal is not None:
                    raise self._fatal
                self._start_join()
                if error is not None:
                    raise error
            await self.refresh_committed_positions()
        self._maybe_auto_commit(loop.time())

    async def _prepare_join(self) -> Exception | None:
        """Before joining: commit and revoke (valid generation), or declare partitions lost."""
        owned = set(self._subs.assignment)
        listener = self._subs.listener
        error: Exception | None = None
        if self.generation >= 0 and self.member_id and self.options.enable_auto_commit:
            await self._commit_quietly(self._positions(owned), "before rebalancing")
        # (Checked again: a failed commit may have reset the generation.)
        if self.generation >= 0 and self.member_id:
            if self.is_cooperative:
                revoked = {tp for tp in owned if not self._subs.matches(tp.topic)}
            else:
                revoked = owned
            if revoked:
                self._subs.set_subscribed_assignment(
                    [tp for tp in self._subs.assignment if tp not in revoked]
                )
                error = await self._listen(listener, "on_partitions_revoked", revoked)
        elif owned:
            log.info(
                "group %r: partitions lost (the generation was reset): %s",
                self.group_id,
                sorted(owned),
            )
            self._subs.set_subscribed_assignment([])
            error = await self._listen(listener, "on_partitions_lost", owned)
        self._rejoin_needed = False
        return error

    def _start_join(self) -> None:
        self._stable = False
        self._joining = asyncio.get_running_loop().create_task(self._join_group())
        self._joining.add_done_callback(lambda _: self._wake_poll())

    async def _finish_join(self) -> None:
        task, self._joining = self._joining, None
        assert task is not None
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._rejoin_needed = True  # the next poll tries again (unless fenced)
            if isinstance(error, FencedInstanceIdError):
                self._fatal = error
            raise error
        await self._apply(task.result())

    async def _apply(self, result: JoinResult) -> None:
        """Take a new assignment: revoke what moved (cooperative), assign, watch metadata."""
        self._joined_topics = result.topics
        assignor = self._assignor(result.protocol)
        assignor.on_assignment(result.assignment, result.generation)
        assigned = list(dict.fromkeys(result.assignment.partitions))
        new, old = set(assigned), set(self._subs.assignment)
        revoked, added = old - new, new - old
        listener = self._subs.listener
        first: Exception | None = None
        if revoked:
            if self.options.enable_auto_commit:
                await self._commit_quietly(self._positions(revoked), "before revoking")
            self._subs.set_subscribed_assignment([tp for tp in self._subs.assignment if tp in new])
            first = await self._listen(listener, "on_partitions_revoked", revoked)
        self._subs.set_subscribed_assignment(assigned, await_committed=True)
        log.info(
            "group %r: generation %d, member %s%s: assigned %s",
            self.group_id,
            result.generation,
            result.member_id,
            " (leader)" if result.leader else "",
            sorted(new),
        )
        error = await self._listen(
            listener, "on_partitions_assigned", added if self.is_cooperative else new
        )
        first = first or error
        self._auto_commit_due = asyncio.get_running_loop().time() + (
            self.options.auto_commit_interval_ms / 1000
        )
        # Kafka's checks that what the assignment was computed from still holds.
        current = self._current_topics_cached()
        if current is not None and current != result.topics:
            self.request_rejoin("the subscription changed during the rebalance")
        elif result.leader and self._metadata_changed():
            self.request_rejoin("the metadata changed during the rebalance")
        elif revoked and self.is_cooperative:
            self.request_rejoin("partitions were revoked (cooperative follow-up rebalance)")
        if first is not None:
            raise first

    async def _listen(
        self, listener: Any, name: str, partitions: set[TopicPartition]
    ) -> Exception | None:
        """Call a listener method; its exception is returned (raised by ``poll`` after the
        rebalance step is complete, as Kafka does)."""
        if listener is None:
            return None
        try:
            await call_listener(listener, name, partitions)
        except Exception as exc:
            log.error("group %r: the rebalance listener's %s failed: %r", self.group_id, name, exc)
            return exc
        return None

    def _assignor(self, name: str) -> PartitionAssignor:
        for assignor in self.options.assignors:
            if assignor.name == name:
                return assignor
        raise StromError(
            f"group {self.group_id!r} chose assignor {name!r}, which this consumer does not "
            f"have ({', '.join(a.name for a in self.options.assignors)})"
        )

    # -- the join: this consumer's protocols, the leader's assignment ----------------------------

    def _on_generation_reset(self) -> None:
        self._assignment_snapshot = None

    async def _join_protocols(
        self,
    ) -> tuple[frozenset[str], list[coordinator_pb2.GroupProtocol]]:
        topics = await self._subscribed_topics()
        owned = self._subs.assignment if self.is_cooperative else ()
        return topics, join_protocols(self.options.assignors, topics, owned, self.generation)

    async def _assign(
        self, protocol: str, members: Iterable[coordinator_pb2.JoinGroupMember]
    ) -> list[coordinator_pb2.SyncGroupAssignment]:
        """The leader's job: every member's share, computed by the group's assignor over the
        partition counts of every topic some member subscribes to."""
        assignor = self._assignor(protocol)
        subscriptions = member_subscriptions(members)
        topics = frozenset(t for s in subscriptions.values() for t in s.topics)
        counts = await self._partition_counts(topics)
        assignments = leader_assignment(assignor, counts, subscriptions)
        self._group_topics = topics
        self._assignment_snapshot = counts
        log.debug(
            "group %r: leader assigned %d members with %s over %s",
            self.group_id,
            len(subscriptions),
            protocol,
            counts,
        )
        return assignments

    async def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        names = sorted(topics)
        if names:
            await self._cluster.refresh(names)
        counts = {}
        for name in names:
            count = self._cluster.partition_count(name)
            if count is not None:
                counts[name] = count
        return counts

    async def _subscribed_topics(self) -> frozenset[str]:
        """This member's topics: the subscribed ones, or those a pattern matches now."""
        subs = self._subs
        if subs.pattern is None:
            return frozenset(subs.topics)
        names = await self._cluster.topics()
        self._pattern_topics = frozenset(t for t in names if subs.matches(t))
        return self._pattern_topics

    def _current_topics_cached(self) -> frozenset[str] | None:
        if self._subs.pattern is None:
            return frozenset(self._subs.topics) if self.group_managed else None
        return self._pattern_topics

    # -- metadata watch (the fetcher's task) -----------------------------------------------------

    async def watch_metadata(self) -> float | None:
        """Rejoin when this member's pattern matches new topics, or (leader) a topic of the
        group changed its partition count; returns the delay until the next look."""
        if not self.group_managed or self._closed:
            return None
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now < self._metadata_due:
            return self._metadata_due - now
        delay = self._metadata_max_age
        try:
            topics = await self._subscribed_topics()
            wanted = topics | (self._group_topics if self.leader else frozenset())
            if self._subs.pattern is None and wanted:
                await self._cluster.refresh(sorted(wanted))
            if any(self._cluster.partition_count(t) is None for t in topics):
                delay = min(delay, _MISSING_TOPIC_RETRY_S)
            if self._joining is None and self._joined_topics is not None:
                if topics != self._joined_topics:
                    self.request_rejoin(
                        f"the subscription now matches {sorted(topics)} "
                        f"(joined with {sorted(self._joined_topics)})"
                    )
                elif self.leader and self._stable and self._metadata_changed():
                    self.request_rejoin("partition counts of subscribed topics changed")
        except StromError as exc:
            log.debug("group %r: metadata look failed: %s", self.group_id, exc)
            delay = min(delay, max(self._link.backoff_s, _MISSING_TOPIC_RETRY_S))
        self._metadata_due = loop.time() + delay
        return delay

    def _metadata_changed(self) -> bool:
        snapshot = self._assignment_snapshot
        if snapshot is None:
            return False
        current = {}
        for name in self._group_topics:
            count = self._cluster.partition_count(name)
            if count is not None:
                current[name] = count
        return current != snapshot

    # -- commits ---------------------------------------------------------------------------------

    def _positions(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[OffsetAndMetadata, int]]:
        """The consumed positions (with the leader epoch of the last record) to commit: of
        every assigned partition, or of those of ``partitions`` still assigned."""
        assignment = self._subs.assignment
        if partitions is not None:
            assignment = {tp: assignment[tp] for tp in partitions if tp in assignment}
        return commit_offsets(assignment, None)

    async def commit(self, offsets: CommitOffsets, *, wait: bool = False) -> None:
        """Commit ``{tp: (offset, leader_epoch)}`` ("next offset to read"), retrying coordinator
        moves within default_api_timeout_ms (``wait``: a synchronous commit) or
        request_timeout_ms (an asynchronous one). During a rebalance: ``RebalanceInProgressError``
        (retriable); with a generation that is no longer the group's:
        ``IllegalGenerationError`` or ``UnknownMemberIdError`` (not retriable)."""
        if self._fatal is not None:
            raise self._fatal
        if self.group_managed:
            if self._joining is not None:
                raise RebalanceInProgressError(
                    f"commit failed: group {self.group_id!r} is rebalancing; retry after the "
                    "next poll() completes the rebalance (records not committed are delivered "
                    "again to the partition's next owner)"
                )
            if self.generation < 0:
                raise IllegalGenerationError(
                    f"commit failed: this consumer is not in the current generation of group "
                    f"{self.group_id!r} (it left or was removed: poll() not called within "
                    "max_poll_interval_ms, or its session timed out); its partitions may "
                    "belong to another member now. The next poll() rejoins the group."
                )
        await self._send_commit(offsets, self._api_timeout if wait else self._timeout)

    async def _commit_quietly(self, offsets: CommitOffsets, when: str) -> None:
        """Auto-commit at a rebalance or close: failures are logged, never raised."""
        if not offsets:
            return
        try:
            await self._send_commit(offsets)
        except Exception as exc:
            log.warning("group %r: auto-commit %s failed: %s", self.group_id, when, exc)

    async def _send_commit(self, offsets: CommitOffsets, timeout_s: float | None = None) -> None:
        if not offsets:
            return
        managed = self.group_managed
        generation, member_id = (self.generation, self.member_id) if managed else (-1, "")
        request = commit_request(
            self.group_id,
            offsets,
            generation=generation,
            member_id=member_id,
            group_instance_id=(self.options.group_instance_id or "") if managed else "",
        )
        code, message = await send_commit(self._link, request, self._timeout, timeout_s)
        if code:
            raise self._commit_error(code, message, generation, member_id)

    def _commit_error(self, code: int, message: str, generation: int, member_id: str) -> StromError:
        group = f"group {self.group_id!r}"
        if code == _E.REBALANCE_IN_PROGRESS:
            if self.group_managed:
                self.request_rejoin("a commit found the group rebalancing")
            return RebalanceInProgressError(
                f"commit failed: {group} is rebalancing; retry after the next poll() "
                f"completes the rebalance ({message})"
            )
        if code in (_E.UNKNOWN_MEMBER_ID, _E.ILLEGAL_GENERATION):
            if self._joining is not None:
                return RebalanceInProgressError(
                    f"commit failed: {group} is rebalancing; retry after the next poll() "
                    f"completes the rebalance ({message})"
                )
            unknown = code == _E.UNKNOWN_MEMBER_ID
            if self.group_managed and (generation, member_id) == (self.generation, self.member_id):
                self._reset_generation(
                    reset_member=unknown,
                    reason="a commit was rejected: " + _E.Name(code),  # type: ignore[arg-type]
                )
            cls = UnknownMemberIdError if unknown else IllegalGenerationError
            what = "member id" if unknown else f"generation {generation}"
            return cls(
                f"commit failed: {group} no longer knows this consumer's {what}: the group "
                "rebalanced and its partitions may belong to another member now (poll() not "
                "called within max_poll_interval_ms, or the session timed out). The next "
                f"poll() rejoins. ({message})"
            )
        error = for_code(code, f"commit failed: {group}: {message}")
        if code == _E.FENCED_INSTANCE_ID:
            self._fatal = error
        return error

    def _maybe_auto_commit(self, now: float) -> None:
        """The periodic auto-commit, asynchronous (at most one in flight), from ``poll``."""
        if not self.options.enable_auto_commit or now < self._auto_commit_due:
            return
        if self._auto_commit_task is not None and not self._auto_commit_task.done():
            return
        self._auto_commit_due = now + self.options.auto_commit_interval_ms / 1000
        if self.group_managed and (self._joining is not None or self.generation < 0):
            return
        offsets = self._positions()
        if not offsets:
            return
        self._auto_commit_task = asyncio.get_running_loop().create_task(
            self._commit_quietly(offsets, "(periodic)")
        )

    # -- committed offsets -----------------------------------------------------------------------

    async def fetch_committed(
        self, partitions: Iterable[TopicPartition], timeout_s: float | None = None
    ) -> Committed:
        """The group's committed offsets (OffsetFetch): ``{tp: (offset, leader_epoch) | None}``,
        retrying for ``timeout_s`` (default: default_api_timeout_ms)."""
        return await fetch_committed(
            self._link,
            self.group_id,
            partitions,
            self._timeout,
            api_timeout_s=self._api_timeout if timeout_s is None else timeout_s,
            require_stable=self.options.require_stable,
        )

    async def refresh_committed_positions(self) -> None:
        """Positions of newly assigned partitions from the committed offsets, falling back to
        ``auto_offset_reset`` (a failed lookup is tried again by the next poll)."""
        waiting = [tp for tp, st in self._subs.assignment.items() if st.awaiting_committed]
        if not waiting:
            return
        try:
            committed = await self.fetch_committed(waiting, self._timeout)
        except StromError as exc:
            log.warning("group %r: fetching committed offsets failed: %s", self.group_id, exc)
            return
        for tp, found in committed.items():
            st = self._subs.assignment.get(tp)
            if st is None or not st.awaiting_committed:
                continue  # revoked, or seek() since
            if found is not None:
                st.seek(found[0].offset)
                st.position_epoch = found[1]
            elif self._subs.default_reset == "none":
                st.awaiting_committed = False
            else:
                st.request_reset(self._subs.default_reset)
        self._subs.on_change()

    # -- leaving ---------------------------------------------------------------------------------

    async def unsubscribe(self) -> None:
        """Leave the group after ``unsubscribe()`` (no listener call, no commit)."""
        await self._stop_join()
        if self.generation >= 0 or self.member_id:
            await self._leave("the consumer unsubscribed")
        self.generation, self.member_id, self._stable = -1, "", False
        self._joined_topics = None
        self._rejoin_needed = True

    async def close(self) -> None:
        """Commit (auto-commit), tell the listener, leave the group (dynamic members), stop."""
        if self._closed:
            return
        try:
            if self.group_managed and self._fatal is None:
                await self._stop_join()
                owned = set(self._subs.assignment)
                listener = self._subs.listener
                if self.generation >= 0 and self.member_id:
                    if self.options.enable_auto_commit:
                        await self._commit_quietly(self._positions(), "on close")
                    if owned:
                        await self._listen(listener, "on_partitions_revoked", owned)
                elif owned:
                    await self._listen(listener, "on_partitions_lost", owned)
                await self._leave("the consumer is closing")
            elif not self.group_managed and self.options.enable_auto_commit:
                await self._commit_quietly(self._positions(), "on close")
        finally:
            self._closed = True
            self._heartbeat_wake.set()
            tasks = [t for t in (self._heartbeat_task, self._auto_commit_task, self._joining) if t]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._link.close()
