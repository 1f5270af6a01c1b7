"""The node's delayed operations, as Kafka's purgatory holds them: an acks=all produce or a
transaction marker waits for the high watermark (``await_high_watermarks``, DelayedProduce), a
DeleteRecords for every in-sync replica's log start (``await_log_starts``,
DelayedDeleteRecords). Both wait on futures ``Partition`` resolves, never polling, and answer
REQUEST_TIMED_OUT after their timeout (0: ``DEFAULT_TIMEOUT_MS``).

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from strom.errors import BrokerResponseError, RequestTimedOutError
from strom_storage.node.leader_lease import LeaderLease
from strom_storage.node.partition import Partition
from strom_storage.node.results import as_broker_error

__all__ = ["DEFAULT_TIMEOUT_MS", "await_high_watermarks", "await_log_starts"]

#: The wait when a request leaves its timeout unset (0), as Kafka's request.timeout.ms
DEFAULT_TIMEOUT_MS = 30000


async def await_high_watermarks(
    waits: Sequence[tuple[Partition, int]],
    timeout_ms: int,
    *,
    lease: LeaderLease | None,
    node_id: int,
) -> list[BrokerResponseError | None]:
    """Per (partition, offset): None once the high watermark reached the offset, else why
    not (REQUEST_TIMED_OUT after ``timeout_ms``; NOT_LEADER_OR_FOLLOWER when the leader
    ``lease`` ran out first)."""
    futures = [partition.wait_for_high_watermark(offset) for partition, offset in waits]
    pending: set[asyncio.Future[None]] = {f for f in futures if not f.done()}
    timeout_ms = timeout_ms if timeout_ms > 0 else DEFAULT_TIMEOUT_MS
    deadline = time.monotonic() + timeout_ms / 1000
    lease_lost = False
    while pending:
        left = deadline - time.monotonic()
        if lease is not None:
            if lease.expired():
                lease_lost = True
                break
            left = min(left, lease.remaining_s())
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=left)
    errors: list[BrokerResponseError | None] = []
    for (partition, offset), future in zip(waits, futures, strict=True):
        error: BrokerResponseError | None
        if lease_lost:
            # nothing is acknowledged once the lease ran out, not even what made it
            future.cancel()
            assert lease is not None
            error = lease.error(node_id, f"{partition.topic}-{partition.index}")
        elif future in pending:
            future.cancel()
            error = RequestTimedOutError(
                f"{partition.topic}-{partition.index}: the in-sync replicas "
                f"{list(partition.isr)} did not reach offset {offset - 1} within "
                f"{timeout_ms} ms (the write is on the leader and may still commit)"
            )
        else:
            exc = future.exception()
            error = None if exc is None else as_broker_error(exc)
        errors.append(error)
    return errors


async def await_log_starts(
    waits: Sequence[tuple[Partition, int, asyncio.Future[int]]], timeout_ms: int
) -> list[tuple[BrokerResponseError | None, int]]:
    """Per (partition, target log start, its future from ``Partition.delete_records``):
    (None, low watermark) once every in-sync replica's log starts at the target, else
    (why not, -1)."""
    pending = {future for *_, future in waits if not future.done()}
    timeout_ms = timeout_ms if timeout_ms > 0 else DEFAULT_TIMEOUT_MS
    if pending:
        await asyncio.wait(pending, timeout=timeout_ms / 1000)
    answers: list[tuple[BrokerResponseError | None, int]] = []
    for partition, target, future in waits:
        if not future.done():
            future.cancel()
            answers.append(
                (
                    RequestTimedOutError(
                        f"{partition.topic}-{partition.index}: the in-sync replicas "
                        f"{list(partition.isr)} did not start their logs at {target} within "
                        f"{timeout_ms} ms (the leader's log starts there)"
                    ),
                    -1,
                )
            )
        elif (exc := future.exception()) is not None:
            answers.append((as_broker_error(exc), -1))
        else:
            answers.append((None, future.result()))
    return answers
