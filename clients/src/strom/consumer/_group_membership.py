"""``GroupMembership``: the classic group protocol one member runs, whatever the group shares
out (Kafka's AbstractCoordinator): JoinGroup + SyncGroup rounds in a background task,
Heartbeat every ``heartbeat_interval_ms`` from another, LeaveGroup, and the generation, member
id and fatal error they leave behind.

``ConsumerCoordinator`` extends it with what a consumer does with its share (listeners,
commits, committed offsets, metadata); it supplies ``_join_protocols`` (this member's topics
and protocols for JoinGroup), ``_assign`` (the leader's job) and ``_on_generation_reset``.

Not thread-safe: everything runs on the consumer's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from strom.cluster import ClusterClient
from strom.consumer._coordinator_link import (
    COORDINATOR_ERRORS,
    CoordinatorLink,
    retriable_group_error,
)
from strom.consumer._group_options import GroupOptions
from strom.errors import StromError, for_code
from strom.group.protocol import PROTOCOL_TYPE, Assignment, decode_assignment
from strom.protocol.v1 import common_pb2, coordinator_pb2

__all__ = ["GroupMembership", "JoinResult"]

log = logging.getLogger("strom.consumer")

_E = common_pb2.ErrorCode
#: JoinGroup and SyncGroup wait for the whole group: the rebalance timeout plus this margin.
_JOIN_MARGIN_S = 5.0


@dataclass(frozen=True)
class JoinResult:
    """A completed JoinGroup + SyncGroup round, waiting for ``poll`` to apply it."""

    generation: int
    member_id: str
    protocol: str
    assignment: Assignment
    leader: bool
    #: The topics this member subscribed to in the round.
    topics: frozenset[str]


class GroupMembership(ABC):
    """One member's generation, joins, heartbeats and leaving (see module doc)."""

    def __init__(
        self, cluster: ClusterClient, options: GroupOptions, *, wake_poll: Callable[[], None]
    ) -> None:
        self.options = options
        self.group_id = options.group_id
        self._link = CoordinatorLink(
            cluster, options.group_id, retry_backoff_ms=options.retry_backoff_ms
        )
        self._wake_poll = wake_poll
        self._timeout = options.request_timeout_ms / 1000
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader = False
        #: Heartbeats run (the last SyncGroup succeeded and nothing reset the generation).
        self._stable = False
        #: The JoinGroup/SyncGroup task, from its start until ``poll`` applied its result.
        self._joining: asyncio.Task[JoinResult] | None = None
        self._rejoin_needed = True
        self._rejoin_reason = "the consumer subscribed"
        #: A fatal error (fenced static member) raised by every ``poll``.
        self._fatal: StromError | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._heartbeat_wake = asyncio.Event()
        self._next_heartbeat = 0.0
        self._last_poll = 0.0
        #: True while the user is inside ``poll`` (waiting there counts as polling).
        self.polling = False
        self._closed = False

    # -- what the member's kind supplies ----------------------------------------------------------

    @abstractmethod
    async def _join_protocols(
        self,
    ) -> tuple[frozenset[str], list[coordinator_pb2.GroupProtocol]]:
        """This member's topics, and the protocols (assignors, with its subscription) it
        joins with."""

    @abstractmethod
    async def _assign(
        self, protocol: str, members: Iterable[coordinator_pb2.JoinGroupMember]
    ) -> list[coordinator_pb2.SyncGroupAssignment]:
        """The leader's job: every member's share."""

    @abstractmethod
    def _on_generation_reset(self) -> None:
        """The generation was forgotten: drop what the member computed from it."""

    # -- generation --------------------------------------------------------------------------------

    @property
    def rebalancing(self) -> bool:
        return self._joining is not None

    def request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            log.info("group %r: rejoining: %s", self.group_id, reason)
        self._rejoin_needed = True
        self._rejoin_reason = reason
        self._wake_poll()

    def _reset_generation(self, *, reset_member: bool, reason: str) -> None:
        """Forget the generation (and the member id): what the consumer owns is lost."""
        self.generation = -1
        self._stable = False
        self.leader = False
        self._on_generation_reset()
        if reset_member:
            self.member_id = ""
        self.request_rejoin(reason)

    def poll_done(self) -> None:
        self._last_poll = asyncio.get_running_loop().time()

    # -- the join: a background task ---------------------------------------------------------------

    async def _join_group(self) -> JoinResult:
        """JoinGroup then SyncGroup, again and again until a round completes (or a fatal
        error). Retriable errors back off ``retry_backoff_ms``."""
        while True:
            try:
                result = await self._join_round()
            except StromError as exc:
                if not (retriable_group_error(exc) or exc.retriable):
                    raise
                log.debug("group %r: join failed, retrying: %s", self.group_id, exc)
                await self._link.backoff()
                continue
            if result is not None:
                return result

    async def _join_round(self) -> JoinResult | None:
        """One JoinGroup + SyncGroup; None when the round must simply be run again."""
        loop = asyncio.get_running_loop()
        topics, protocols = await self._join_protocols()
        wait_s = self.options.rebalance_timeout_ms / 1000 + _JOIN_MARGIN_S
        join = await self._link.call(
            "JoinGroup",
            coordinator_pb2.JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self.options.session_timeout_ms,
                rebalance_timeout_ms=self.options.rebalance_timeout_ms,
                member_id=self.member_id,
                group_instance_id=self.options.group_instance_id or "",
                protocol_type=PROTOCOL_TYPE,
                protocols=protocols,
                reason=self._rejoin_reason,
                client_id=self.options.client_id,
            ),
            wait_s,
            loop.time() + self._timeout,
        )
        code = join.error_code
        if code == _E.MEMBER_ID_REQUIRED:
            self.member_id = join.member_id  # rejoin at once with the id the coordinator chose
            return None
        if code:
            self._join_error(code, join.error_message, "JoinGroup")
            await self._link.backoff()
            return None
        self.member_id = join.member_id
        self.generation = join.generation_id
        self.protocol_name = join.protocol_name
        self.leader = join.leader == join.member_id
        assignments: list[coordinator_pb2.SyncGroupAssignment] = []
        if self.leader and not join.skip_assignment:
            assignments = await self._assign(join.protocol_name, join.members)
        sync = await self._link.call(
            "SyncGroup",
            coordinator_pb2.SyncGroupRequest(
                group_id=self.group_id,
                generation_id=join.generation_id,
                member_id=join.member_id,
                group_instance_id=self.options.group_instance_id or "",
                protocol_type=PROTOCOL_TYPE,
                protocol_name=join.protocol_name,
                assignments=assignments,
            ),
            wait_s,
            loop.time() + self._timeout,
        )
        if sync.error_code:
            if sync.error_code == _E.REBALANCE_IN_PROGRESS:
                return None  # another round started: join it at once
            self._join_error(sync.error_code, sync.error_message, "SyncGroup")
            await self._link.backoff()
            return None
        assignment = decode_assignment(sync.assignment) if sync.assignment else Assignment([])
        self._stable = True
        self._next_heartbeat = loop.time() + self.options.heartbeat_interval_ms / 1000
        self._heartbeat_wake.set()
        return JoinResult(
            generation=join.generation_id,
            member_id=join.member_id,
            protocol=join.protocol_name,
            assignment=assignment,
            leader=self.leader,
            topics=topics,
        )

    def _join_error(self, code: int, message: str, what: str) -> None:
        """Handle a JoinGroup/SyncGroup error code: reset what it invalidates and return (the
        round is retried), or raise a fatal one."""
        if code == _E.UNKNOWN_MEMBER_ID:
            self.member_id, self.generation = "", -1
        elif code == _E.ILLEGAL_GENERATION:
            self.generation = -1
        elif code in COORDINATOR_ERRORS:
            self._link.mark_unknown(for_code(code, message))
        elif code not in (_E.COORDINATOR_LOAD_IN_PROGRESS, _E.REBALANCE_IN_PROGRESS):
            error = for_code(code, f"group {self.group_id!r}: {what} failed: {message}")
            if code == _E.FENCED_INSTANCE_ID:
                self._fatal = error
            raise error
        log.debug("group %r: %s: %s, rejoining", self.group_id, what, _E.Name(code))  # type: ignore[arg-type]

    # -- heartbeats: a background task -------------------------------------------------------------

    def _ensure_heartbeat_task(self) -> None:
        if self._heartbeat_task is None and not self._closed:
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.options.heartbeat_interval_ms / 1000
        max_poll = self.options.max_poll_interval_ms / 1000
        while not self._closed:
            self._heartbeat_wake.clear()
            delay: float | None = None
            if self._stable and self.generation >= 0:
                now = loop.time()
                if not self.polling and now - self._last_poll > max_poll:
                    await self._poll_timeout()
                    continue
                if now >= self._next_heartbeat:
                    self._next_heartbeat = now + interval
                    await self._heartbeat()
                    continue
                delay = self._next_heartbeat - now
                if not self.polling:
                    delay = min(delay, self._last_poll + max_poll - now)
            if delay is None:
                await self._heartbeat_wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(delay, 0.001)):
                        await self._heartbeat_wake.wait()

    async def _heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        generation, member_id = self.generation, self.member_id
        try:
            response = await self._link.call(
                "Heartbeat",
                coordinator_pb2.HeartbeatRequest(
                    group_id=self.group_id,
                    generation_id=generation,
                    member_id=member_id,
                    group_instance_id=self.options.group_instance_id or "",
                ),
                self._timeout,
                loop.time() + self._timeout,
            )
        except StromError as exc:
            log.debug("group %r: heartbeat failed: %s", self.group_id, exc)
            self._next_heartbeat = loop.time() + self._link.backoff_s
            return
        if (generation, member_id) != (self.generation, self.member_id) or not self._stable:
            return  # a reply about a generation this member already left behind
        self.on_heartbeat_error(response.error_code, response.error_message)

    def on_heartbeat_error(self, code: int, message: str) -> None:
        """What a heartbeat's answer means for the membership (recorded for the next poll)."""
        loop = asyncio.get_running_loop()
        if code == _E.NONE:
            return
        if code == _E.REBALANCE_IN_PROGRESS:
            self.request_rejoin("the group is rebalancing")
        elif code == _E.ILLEGAL_GENERATION:
            self._reset_generation(reset_member=False, reason="heartbeat: illegal generation")
        elif code == _E.UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member=True, reason="heartbeat: unknown member id")
        elif code == _E.FENCED_INSTANCE_ID:
            self._fatal = for_code(
                code,
                f"group {self.group_id!r}: another consumer with group_instance_id "
                f"{self.options.group_instance_id!r} fenced this one: {message}",
            )
            self._reset_generation(reset_member=True, reason="fenced")
        elif code in COORDINATOR_ERRORS:
            self._link.mark_unknown(for_code(code, message))
            self._next_heartbeat = loop.time() + self._link.backoff_s
        elif code == _E.COORDINATOR_LOAD_IN_PROGRESS:
            self._next_heartbeat = loop.time() + self._link.backoff_s
        else:
            log.warning("group %r: heartbeat: %s", self.group_id, for_code(code, message))

    # -- leaving -----------------------------------------------------------------------------------

    async def _poll_timeout(self) -> None:
        log.warning(
            "group %r: poll() was not called within max_poll_interval_ms (%d ms): leaving the "
            "group so that its partitions go to other members; the next poll() rejoins",
            self.group_id,
            self.options.max_poll_interval_ms,
        )
        await self._leave("consumer poll timeout has expired")
        self._reset_generation(reset_member=True, reason="poll timeout")

    async def _leave(self, reason: str) -> None:
        """LeaveGroup (dynamic members only: a static member's partitions wait for it until
        its session times out, as in Kafka)."""
        if self.options.is_static or not self.member_id:
            return
        loop = asyncio.get_running_loop()
        try:
            response = await self._link.call(
                "LeaveGroup",
                coordinator_pb2.LeaveGroupRequest(
                    group_id=self.group_id,
                    members=[
                        coordinator_pb2.LeavingMember(member_id=self.member_id, reason=reason)
                    ],
                ),
                self._timeout,
                loop.time() + self._timeout,
            )
            if response.error_code:
                log.info(
                    "group %r: LeaveGroup: %s",
                    self.group_id,
                    for_code(response.error_code, response.error_message),
                )
        except StromError as exc:
            log.info("group %r: LeaveGroup failed: %s", self.group_id, exc)

    async def _stop_join(self) -> None:
        task, self._joining = self._joining, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
