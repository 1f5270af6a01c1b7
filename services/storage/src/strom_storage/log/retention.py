"""Which whole segments retention may delete.

Three rules, each selecting a prefix of the log's *inactive* segments (the active segment is
never deleted, so a partition always has somewhere to append):

* time (``retention.ms`` >= 0, policy has ``delete``): segments whose largest timestamp is more
  than ``retention.ms`` before now;
* size (``retention.bytes`` >= 0, policy has ``delete``): the oldest segments whose removal
  keeps the log at or above ``retention.bytes`` (Kafka's rule: the log never goes below it);
* log start (any policy): segments entirely below the log start offset (after delete-records).

The deletable prefix is the longest of the three, cut so that no segment holding offsets at or
above the high watermark is deleted (consumers have not been allowed to see them yet). The log
then starts at the first segment kept, at the earliest (the log owning them executes the
decision under its lock).

Thread-safety: a pure function over a snapshot of segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strom_storage.log.config import LogConfig
from strom_storage.log.segment import LogSegment

__all__ = ["RetentionDecision", "deletable_segments"]


@dataclass(frozen=True)
class RetentionDecision:
    """The segments to delete and why (one reason per rule that applied)."""

    segments: list[LogSegment]
    reasons: tuple[str, ...]
    #: the base offset of the first segment kept (where the log then starts at the earliest;
    #: -1 when nothing is deleted)
    first_kept_offset: int = -1


def deletable_segments(
    segments: Sequence[LogSegment],
    *,
    config: LogConfig,
    time_and_size: bool = True,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
) -> RetentionDecision:
    """Apply the rules to ``segments`` (all of the log's, oldest first, active last).

    With ``time_and_size`` false only the log-start rule applies (after delete-records).
    """
    if len(segments) <= 1:
        return RetentionDecision([], ())
    inactive = list(segments[:-1])
    upper = [s.base_offset for s in segments[1:]]  # each inactive segment ends below this
    reasons: list[str] = []
    n_time = n_size = n_start = 0
    if time_and_size and config.delete and config.retention_ms >= 0:
        while (
            n_time < len(inactive)
            and now_ms - inactive[n_time].largest_timestamp() > config.retention_ms
        ):
            n_time += 1
        if n_time:
            reasons.append("retention.ms")
    if time_and_size and config.delete and config.retention_bytes >= 0:
        excess = sum(s.size for s in segments) - config.retention_bytes
        while n_size < len(inactive) and excess - inactive[n_size].size >= 0:
            excess -= inactive[n_size].size
            n_size += 1
        if n_size:
            reasons.append("retention.bytes")
    while n_start < len(inactive) and upper[n_start] <= log_start_offset:
        n_start += 1
    if n_start:
        reasons.append("log start offset")
    count = max(n_time, n_size, n_start)
    while count and upper[count - 1] > high_watermark:
        count -= 1
    if not count:
        return RetentionDecision([], ())
    return RetentionDecision(inactive[:count], tuple(reasons), segments[count].base_offset)
