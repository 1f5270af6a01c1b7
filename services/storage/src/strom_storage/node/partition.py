"""One partition as this node serves it: Kafka's leader/follower ``Partition``.

As leader it tracks every follower's log end and log start offsets (reported by the follower's
own fetches), computes the high watermark as the minimum log end offset of the in-sync
replicas, decides which followers join or leave the ISR, completes acks=all produces waiting
for the high watermark and DeleteRecords waiting for the low watermark (the minimum log start
offset of the in-sync replicas: Kafka's DelayedDeleteRecords). As follower it only holds the
leadership facts its fetcher checks against.

ISR changes are *proposed* here and committed by the controller (AlterPartition): while a
change is pending, the high watermark uses the "maximal" ISR (current ISR plus joining
replicas), so it never advances on the word of a replica the controller has not yet admitted
and never outruns a replica the controller has not yet removed.

A node that runs without a cluster (standalone) has no replica list: it is its own ISR and the
high watermark follows its log end.

Thread-safety: called on the node's event loop; the ``Log`` underneath is itself thread-safe.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass

from strom.errors import (
    BrokerResponseError,
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from strom_storage.log import AppendInfo, Log

__all__ = ["FollowerState", "IsrChange", "Partition"]

NO_LEADER = -1
_sequence = itertools.count()


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = -1
    log_start_offset: int = -1
    #: last time (ms) the follower had everything the leader had (Kafka's lastCaughtUpTime)
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_end: int = -1


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An ISR the leader proposes to the controller."""

    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


class Partition:
    """A hosted partition: its log, leadership facts, followers and waiting produces."""

    def __init__(
        self, topic: str, index: int, log: Log, *, node_id: int = -1, leader_epoch: int = 0
    ) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.node_id = node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = -1
        self.leader = node_id
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_isr: IsrChange | None = None
        self.followers: dict[int, FollowerState] = {}
        #: whether the controller ever assigned a role (until then: standalone leader)
        self._assigned = False
        #: acks=all produces: (required offset, tie-breaker, future), smallest offset first
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        #: DeleteRecords: (required low watermark, future of the low watermark reached)
        self._deletes: list[tuple[int, asyncio.Future[int]]] = []
        # Becoming leader: a sole in-sync replica has committed its whole log (also after an
        # unclean restart, when the checkpointed high watermark lags behind the log end).
        self.maybe_advance_high_watermark()

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.index}, leader={self.leader}, "
            f"epoch={self.leader_epoch}, isr={self.isr})"
        )

    # -- leadership ---------------------------------------------------------------------------

    def check_epoch(self, requested: int) -> None:
        """Fence a request carrying another leader epoch (-1 skips the check)."""
        if requested < 0 or requested == self.leader_epoch:
            return
        if requested < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic}-{self.index}: request epoch {requested} is older than the "
                f"current leader epoch {self.leader_epoch}"
            )
        raise UnknownLeaderEpochError(
            f"{self.topic}-{self.index}: request epoch {requested} is newer than the "
            f"leader epoch {self.leader_epoch} this node knows"
        )

    def make_leader(
        self,
        leader_epoch: int,
        isr: tuple[int, ...],
        *,
        replicas: tuple[int, ...] = (),
        partition_epoch: int = -1,
        now_ms: int = 0,
    ) -> bool:
        """Lead from ``leader_epoch`` on; returns whether the leadership changed.

        A newer ``partition_epoch`` with the same leader epoch only updates the ISR (the
        controller committed an ISR change)."""
        new_term = not self._assigned or not self.is_leader or leader_epoch != self.leader_epoch
        self._assigned = True
        if not new_term and partition_epoch < self.partition_epoch:
            return False  # an older view of our own term
        self.replicas, self.partition_epoch = replicas, partition_epoch
        self.isr = isr
        if self.pending_isr is not None and (
            new_term or partition_epoch > self.pending_isr.partition_epoch
        ):
            self.pending_isr = None
        if new_term:
            self.leader, self.leader_epoch = self.node_id, leader_epoch
            # Kafka: followers in the ISR count as caught up now; the others must prove it.
            self.followers = {
                r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0)
                for r in replicas
                if r != self.node_id
            }
            self.log.assign_leader_epoch(leader_epoch)
        else:
            for r in replicas:
                if r != self.node_id:
                    self.followers.setdefault(r, FollowerState())
            for r in [r for r in self.followers if r not in replicas]:
                del self.followers[r]
        self.maybe_advance_high_watermark()
        self._complete_waiters()
        return new_term

    def make_follower(
        self,
        leader: int,
        leader_epoch: int,
        *,
        replicas: tuple[int, ...] = (),
        isr: tuple[int, ...] = (),
        partition_epoch: int = -1,
    ) -> bool:
        """Follow ``leader`` (-1: nobody leads); returns whether the leadership changed."""
        changed = not self._assigned or leader != self.leader or leader_epoch != self.leader_epoch
        self._assigned = True
        was_leader = self.is_leader
        self.leader, self.leader_epoch = leader, leader_epoch
        self.replicas, self.isr, self.partition_epoch = replicas, isr, partition_epoch
        self.pending_isr = None
        self.followers = {}
        if was_leader and changed:
            self.fail_waiters(
                NotLeaderOrFollowerError(
                    f"node {self.node_id} lost the leadership of {self.topic}-{self.index} "
                    f"(now led by {leader} at epoch {leader_epoch})"
                )
            )
        return changed

    # -- the ISR ------------------------------------------------------------------------------

    @property
    def _sole_replica(self) -> bool:
        return not self.replicas

    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: committed plus joining members."""
        if self._sole_replica:
            return (self.node_id,)
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys((*self.isr, *self.pending_isr.new_isr)))

    def under_min_isr(self) -> bool:
        return len(self.isr or (self.node_id,)) < self.log.config.min_insync_replicas

    def update_follower(
        self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> bool:
        """A follower fetched from ``fetch_offset`` (its log end), its log starting at
        ``log_start_offset``; True if the high watermark moved. Raises
        ``NotLeaderOrFollowerError`` for a node that is not a replica."""
        state = self.followers.get(replica_id)
        if state is None:
            raise NotLeaderOrFollowerError(
                f"node {replica_id} is not a follower of {self.topic}-{self.index} "
                f"(replicas {self.replicas})"
            )
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_end >= 0:
            # It has everything the leader had at its previous fetch.
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.log_start_offset = log_start_offset
        state.last_fetch_ms = now_ms
        state.last_fetch_leader_end = leader_end
        if self._deletes:
            self._complete_deletes()
        return self.maybe_advance_high_watermark()

    def isr_expansion(self, replica_id: int) -> IsrChange | None:
        """The ISR change admitting ``replica_id`` once it caught up, if one is due."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return None
        state = self.followers.get(replica_id)
        if state is None or state.log_end_offset < self.log.high_watermark:
            return None
        if state.log_end_offset < self.log.epoch_start_offset(self.leader_epoch):
            return None  # not yet holding anything of the current term
        return self._propose((*self.isr, replica_id))

    def isr_shrink(self, now_ms: int, lag_max_ms: int) -> IsrChange | None:
        """The ISR change dropping followers that have not caught up for ``lag_max_ms``."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = {
            r
            for r in self.isr
            if r != self.node_id
            and (state := self.followers.get(r)) is not None
            and now_ms - state.last_caught_up_ms > lag_max_ms
        }
        if not lagging:
            return None
        return self._propose(tuple(r for r in self.isr if r not in lagging))

    def _propose(self, new_isr: tuple[int, ...]) -> IsrChange:
        change = IsrChange(self.topic, self.index, self.leader_epoch, self.partition_epoch, new_isr)
        self.pending_isr = change
        return change

    def isr_committed(self, change: IsrChange, isr: tuple[int, ...], partition_epoch: int) -> bool:
        """The controller accepted ``change``; True if the high watermark moved."""
        if change is not self.pending_isr:
            return False
        self.pending_isr = None
        if partition_epoch > self.partition_epoch and change.leader_epoch == self.leader_epoch:
            self.isr, self.partition_epoch = isr, partition_epoch
        moved = self.maybe_advance_high_watermark()
        self._complete_waiters()
        return moved

    def isr_rejected(self, change: IsrChange) -> None:
        """The controller refused ``change`` (stale epochs): wait for fresher metadata."""
        if change is self.pending_isr:
            self.pending_isr = None

    def follower_lag(self) -> int:
        """Records the slowest ISR follower misses (0 when none or not leading)."""
        if not self.is_leader or not self.followers:
            return 0
        end = self.log.log_end_offset
        return max(end - max(s.log_end_offset, 0) for s in self.followers.values())

    # -- high watermark and acks=all ----------------------------------------------------------

    def maybe_advance_high_watermark(self) -> bool:
        """Raise the high watermark to the smallest log end of the maximal ISR (leader only)."""
        if not self.is_leader:
            return False
        end = self.log.log_end_offset
        for replica in self.maximal_isr():
            if replica == self.node_id:
                continue
            state = self.followers.get(replica)
            if state is None or state.log_end_offset < 0:
                return False  # a member whose position is unknown holds the watermark
            end = min(end, state.log_end_offset)
        if end <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(end)
        self._complete_waiters()
        return True

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        *,
        acks: int = 1,
        verified: set[tuple[int, int]] | None = None,
    ) -> AppendInfo:
        """Append a producer's batches; acks=all is refused while the ISR is too small.

        ``verified``: the (producer id, epoch) pairs whose transaction the coordinator
        confirmed holds this partition (``Log.append_as_leader`` refuses to open any other)."""
        # The checks of _check_leader_for_write, inline: this is every produce's path.
        if not self.is_leader or (acks == -1 and self.under_min_isr()):
            self._check_leader_for_write(acks)
        if verified is None:
            info = self.log.append_as_leader(data, self.leader_epoch)
        else:
            info = self.log.append_as_leader(data, self.leader_epoch, verified=verified)
        self.maybe_advance_high_watermark()
        return info

    def append_txn_marker(
        self, producer_id: int, producer_epoch: int, *, committed: bool, coordinator_epoch: int
    ) -> AppendInfo | None:
        """Append the COMMIT/ABORT marker ending ``producer_id``'s transaction at
        ``producer_epoch``, at the current leader epoch (always acks=all: refused while the ISR
        is too small). None: the log already ended that epoch, nothing written."""
        self._check_leader_for_write(-1)
        info = self.log.append_txn_marker(
            producer_id,
            producer_epoch,
            committed=committed,
            coordinator_epoch=coordinator_epoch,
            leader_epoch=self.leader_epoch,
        )
        self.maybe_advance_high_watermark()
        return info

    def _check_leader_for_write(self, acks: int) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"node {self.node_id} does not lead {self.topic}-{self.index} "
                f"(leader {self.leader})"
            )
        if acks == -1 and self.under_min_isr():
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.index}: the ISR {list(self.isr)} is smaller than "
                f"min.insync.replicas={self.log.config.min_insync_replicas}"
            )

    def wait_for_high_watermark(self, required_offset: int) -> asyncio.Future[None]:
        """A future done when the high watermark reaches ``required_offset`` (acks=all).

        Fails with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
        min.insync.replicas meanwhile, NOT_LEADER_OR_FOLLOWER when leadership moved."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (required_offset, next(_sequence), future))
        self._complete_waiters()
        return future

    def low_watermark(self) -> int:
        """The smallest log start offset of the in-sync replicas (-1 while a member's is
        unknown): what a DeleteRecords waits for (leader only)."""
        low = self.log.log_start_offset
        for replica in self.maximal_isr():
            if replica != self.node_id:
                state = self.followers.get(replica)
                low = min(low, state.log_start_offset if state is not None else -1)
        return low

    def delete_records(self, offset: int) -> tuple[int, asyncio.Future[int]]:
        """DeleteRecords on the leader: move the log start up to ``offset`` (-1: the high
        watermark) at once, so that reads here see it; returns the offset asked for and a
        future of the low watermark, done once every in-sync replica's log starts there too.

        The future fails with NOT_LEADER_OR_FOLLOWER when leadership moves first."""
        self._check_leader_for_write(1)
        target = self.log.high_watermark if offset == -1 else offset
        if target < 0:
            raise OffsetOutOfRangeError(f"cannot delete records up to offset {offset}")
        self.log.delete_records(target)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._deletes.append((target, future))
        self._complete_deletes()
        return target, future

    def _complete_deletes(self) -> None:
        if not self.is_leader:
            return
        low = self.low_watermark()
        waiting = []
        for required, future in self._deletes:
            if future.done():
                continue
            if low >= required:
                future.set_result(low)
            else:
                waiting.append((required, future))
        self._deletes = waiting

    def _complete_waiters(self) -> None:
        if self._deletes:
            self._complete_deletes()
        hw = self.log.high_watermark
        while self._waiters and self._waiters[0][0] <= hw:
            _, _, future = heapq.heappop(self._waiters)
            if future.done():
                continue
            if self.under_min_isr():
                future.set_exception(
                    NotEnoughReplicasAfterAppendError(
                        f"{self.topic}-{self.index}: written, but the ISR {list(self.isr)} "
                        "shrank below min.insync.replicas="
                        f"{self.log.config.min_insync_replicas} meanwhile"
                    )
                )
            else:
                future.set_result(None)

    def fail_waiters(self, error: BrokerResponseError) -> None:
        waiters, self._waiters = self._waiters, []
        deletes, self._deletes = self._deletes, []
        for future in [f for _, _, f in waiters] + [f for _, f in deletes]:
            if not future.done():
                future.set_exception(error)
