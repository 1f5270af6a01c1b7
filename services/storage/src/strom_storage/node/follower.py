"""A follower's side of replication, without the network: where to truncate when a new leader
takes over, and how to apply what a fetch returned.

Truncation follows Kafka's leader-epoch protocol (KIP-101/279): the follower asks the leader
for the end offset of the follower's latest epoch. If the leader knows that epoch, the logs
agree up to ``min(leader's end, follower's end)``; if the leader answers with an older epoch,
the follower first cuts back to where *it* ended that older epoch and asks again. Truncation
therefore stops exactly at the divergence point, never blindly at the high watermark (which
can lose committed data or keep divergent data).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom_storage.log import AppendInfo, Log

__all__ = ["FetchedData", "TruncationStep", "apply_fetched", "next_truncation"]

UNDEFINED = -1


@dataclass(frozen=True, slots=True)
class TruncationStep:
    """Truncate to ``offset``; ``done`` when the log now matches the leader's prefix."""

    offset: int
    done: bool


def next_truncation(log: Log, leader_epoch: int, leader_end_offset: int) -> TruncationStep:
    """The step after the leader answered OffsetForLeaderEpoch(``log.latest_epoch``) with
    (``leader_epoch``, ``leader_end_offset``)."""
    end = log.log_end_offset
    if UNDEFINED in (leader_epoch, leader_end_offset):
        # The leader holds no epoch at or below ours: nothing we have past the high watermark
        # can be trusted (Kafka's fallback).
        return TruncationStep(min(log.high_watermark, end), True)
    local_epoch, local_end = log.end_offset_for_epoch(leader_epoch)
    if local_epoch == leader_epoch:
        return TruncationStep(min(leader_end_offset, end), True)
    if local_epoch == UNDEFINED:
        # We hold nothing from epochs at or below the leader's: start again from its data.
        return TruncationStep(min(log.log_start_offset, end), True)
    # We never had the leader's epoch: cut back to the end of our older one and ask again.
    return TruncationStep(min(local_end, end), False)


@dataclass(frozen=True, slots=True)
class FetchedData:
    """One partition of a leader's fetch response."""

    records: bytes | memoryview
    high_watermark: int
    log_start_offset: int


def apply_fetched(log: Log, data: FetchedData) -> AppendInfo | None:
    """Append replicated batches (offsets and epochs as the leader gave them), then follow the
    leader's high watermark and log start. Returns the append, or None when no records came."""
    info = log.append_as_follower(data.records) if len(data.records) else None
    high_watermark = min(data.high_watermark, log.log_end_offset)
    if high_watermark > log.high_watermark:  # never backwards (a new leader may lag briefly)
        log.update_high_watermark(high_watermark)
    start = min(data.log_start_offset, log.high_watermark)
    if start > log.log_start_offset:
        log.delete_records(start)
    return info
