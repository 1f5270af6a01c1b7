"""In-memory state of one consumer group: its members, generation, protocol, offsets and the
transactional offsets still pending (staged by TxnOffsetCommit, not yet ended by a marker).

``Group.pending_commits`` counts the writes of the group being appended to the log (plain and
transactional commits, markers, the record of a group that became Empty); DeleteGroups first
makes the group Dead, so no new commit is admitted, then awaits ``commits_written`` before
writing its tombstones: every acknowledged commit then lies in the log before them and is
deleted with the group, and no record of the group lands after them."""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from strom_coordinator.group.subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics

__all__ = ["CommittedOffset", "Group", "GroupState", "Member", "PendingTxnOffset"]


class GroupState(enum.Enum):
    """Kafka's classic group states (values are the names clients see)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {
        GroupState.EMPTY,
        GroupState.STABLE,
        GroupState.COMPLETING_REBALANCE,
    },
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: {
        GroupState.EMPTY,
        GroupState.STABLE,
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.DEAD,
    },
}


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


@dataclass(eq=False)
class PendingTxnOffset:
    """An offset staged by a transaction of one producer id, at ``producer_epoch``."""

    producer_epoch: int
    offset: CommittedOffset
    #: The commit sequence it was staged with (0 when replayed from the log): a plain commit
    #: acknowledged after it wins over it when the transaction commits.
    seq: int = 0


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[Any] | None = None
    sync_future: asyncio.Future[Any] | None = None
    session_timer: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return list(protocols) == self.protocols

    def cancel_timer(self) -> None:
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None


def _idle() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


@dataclass(eq=False)
class Group:
    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    offset_seq: dict[tuple[str, int], int] = field(default_factory=dict)
    #: producer id -> partition -> offset staged by that producer's open transaction.
    pending_txn: dict[int, dict[tuple[str, int], PendingTxnOffset]] = field(default_factory=dict)
    #: producer id -> the epoch of its last transaction whose marker reached the group.
    txn_ended: dict[int, int] = field(default_factory=dict)
    state_timestamp_ms: int | None = None
    join_timer: asyncio.TimerHandle | None = None
    # InitialDelayedJoin of an Empty group: remaining budget and whether someone joined since.
    initial_delay_remaining_ms: int | None = None
    new_member_added: bool = False
    rebalance_started: float = 0.0
    _commits_in_flight: int = field(default=0, init=False, repr=False)
    _no_commit_in_flight: asyncio.Event = field(default_factory=_idle, init=False, repr=False)

    @property
    def pending_commits(self) -> int:
        """Writes of this group being appended to the log (see the module docstring)."""
        return self._commits_in_flight

    @pending_commits.setter
    def pending_commits(self, count: int) -> None:
        self._commits_in_flight = count
        if count:
            self._no_commit_in_flight.clear()
        else:
            self._no_commit_in_flight.set()

    async def commits_written(self) -> None:
        """Return once no write of this group is in flight (the caller keeps new ones from
        starting: a Dead group admits no commit)."""
        while self._commits_in_flight:
            await self._no_commit_in_flight.wait()

    def transition(self, to: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[to]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state} -> {to}")
        self.state = to
        self.state_timestamp_ms = now_ms

    def has_pending_txn(self, tp: tuple[str, int] | None = None) -> bool:
        """Whether a transaction has staged an offset (for ``tp``, or for any partition)."""
        if tp is None:
            return bool(self.pending_txn)
        return any(tp in staged for staged in self.pending_txn.values())

    def unstage(
        self, producer_id: int, tp: tuple[str, int], entry: PendingTxnOffset | None = None
    ) -> None:
        """Forget the offset ``producer_id`` staged for ``tp`` (only if it is still ``entry``,
        when given: a newer one staged meanwhile stays)."""
        staged = self.pending_txn.get(producer_id)
        if staged is None or (entry is not None and staged.get(tp) is not entry):
            return
        staged.pop(tp, None)
        if not staged:
            del self.pending_txn[producer_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_timer()
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            # Prefer a member that already rejoined, so the new leader gets the member list.
            joined = [m for m in self.members.values() if m.awaiting_join]
            pick = joined[0] if joined else next(iter(self.members.values()), None)
            self.leader_id = pick.member_id if pick else None
        return member

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def candidate_protocols(self, exclude: str | None = None) -> list[str]:
        """Protocols every member (other than ``exclude``) supports, in the leader's order."""
        others = [m for m in self.members.values() if m.member_id != exclude]
        if not others:
            return []
        common = set.intersection(*({name for name, _ in m.protocols} for m in others))
        order = self.members.get(self.leader_id or "") or others[0]
        names = [name for name, _ in order.protocols if name in common]
        return names or sorted(common)

    def supports(
        self,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        member_id: str | None = None,
    ) -> bool:
        """Whether a member with these protocols may join (or rejoin as ``member_id``)."""
        if not protocol_type or not protocols:
            return False
        others = [m for m in self.members.values() if m.member_id != member_id]
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        common = set(self.candidate_protocols(exclude=member_id))
        return any(name in common for name, _ in protocols)

    def select_protocol(self) -> str:
        """The protocol most members vote for (each its first choice among the common ones)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise RuntimeError(f"group {self.group_id}: members share no protocol")
        votes: Counter[str] = Counter()
        for m in self.members.values():
            votes[next(name for name, _ in m.protocols if name in candidates)] += 1
        return max(candidates, key=lambda name: votes[name])  # ties: the leader's order

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer groups only); None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        return subscribed_topics(m.metadata_for(self.protocol_name) for m in self.members.values())

    def cancel_timers(self) -> None:
        if self.join_timer is not None:
            self.join_timer.cancel()
            self.join_timer = None
        for member in self.members.values():
            member.cancel_timer()
        for handle in self.pending_members.values():
            if handle is not None:
                handle.cancel()
