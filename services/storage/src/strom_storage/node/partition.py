"""One partition as this node serves it: its log, leader epoch and high-watermark policy.

Until replication lands, every partition has a single replica (this node) whose in-sync set is
itself, so the high watermark follows the log end after each append and acks=all completes
with the leader's append. The replication issue turns this into Kafka's leader/follower
``Partition`` (ISR, follower log end offsets, delayed produce).

Thread-safety: called on the node's event loop; the ``Log`` underneath is itself thread-safe.
"""

from __future__ import annotations

from strom.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from strom_storage.log import AppendInfo, Log

__all__ = ["Partition"]


class Partition:
    """A hosted partition: the log plus the leadership facts requests are checked against."""

    def __init__(self, topic: str, index: int, log: Log, *, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self.is_leader = True
        self.isr: tuple[int, ...] = ()
        # Becoming leader: a sole in-sync replica has committed its whole log (also after an
        # unclean restart, when the checkpointed high watermark lags behind the log end).
        self._advance_high_watermark()

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

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

    def make_leader(self, leader_epoch: int, isr: tuple[int, ...]) -> bool:
        """Lead from ``leader_epoch`` on; returns whether anything changed."""
        changed = not self.is_leader or leader_epoch != self.leader_epoch or isr != self.isr
        self.is_leader, self.leader_epoch, self.isr = True, leader_epoch, isr
        if changed:
            self._advance_high_watermark()
        return changed

    def make_follower(self, leader_epoch: int) -> bool:
        """Stop leading; followers fetch from the leader once replication lands."""
        changed = self.is_leader or leader_epoch != self.leader_epoch
        self.is_leader, self.leader_epoch = False, leader_epoch
        return changed

    def append_as_leader(self, data: bytes | bytearray | memoryview) -> AppendInfo:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"this node does not lead {self.topic}-{self.index}")
        info = self.log.append_as_leader(data, self.leader_epoch)
        self._advance_high_watermark()
        return info

    def _advance_high_watermark(self) -> None:
        # Until followers replicate (the replication issue), the leader commits what it has:
        # exact for a single replica, whose in-sync set is itself.
        self.log.update_high_watermark(self.log.log_end_offset)
