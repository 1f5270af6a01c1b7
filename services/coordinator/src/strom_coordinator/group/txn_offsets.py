"""Transactional offsets: TxnOffsetCommit stages offsets for (group, producer id); the
transaction's marker (GroupCoordinator.WriteTxnMarkers, sent by the transaction coordinator)
makes them committed offsets (commit) or drops them (abort).

* TxnOffsetCommit: the member is checked like an OffsetCommit's (``OffsetStore.admit``), the
  producer's transaction is asked (``TxnVerifier``) whether it holds the group's
  ``__consumer_offsets`` partition at exactly this producer id and epoch (AddOffsetsToTxn put
  it there), then the offsets are written as pending records (``records.pending_key``) with
  acks=all. Pending offsets are invisible to OffsetFetch; with require_stable their partitions
  answer UNSTABLE_OFFSET_COMMIT.
* A marker at epoch e for (group, producer id): pending offsets staged at epoch e become offset
  commit records (commit; a plain commit acknowledged after the staging wins) or are dropped
  (abort); those staged at an older epoch (an earlier transaction's, written too late) are
  dropped either way; one batch holds the commit records and every tombstone. Nothing pending
  is NONE: markers are resent by the transaction coordinator and must be idempotent.

A marker waits for the TxnOffsetCommits of its (group, producer id) that are in flight (being
verified or written) before it decides: one whose offsets were verified before the transaction
ended but written after its marker would otherwise stay pending for good, in the cache and in
the log, and require_stable fetches would answer UNSTABLE_OFFSET_COMMIT until the producer's
next transaction ends. Kafka gets the same order from appending the offsets and the marker to
the partition one after the other.

Loading a partition rebuilds pending offsets from their records (``persist``); the transaction
coordinator re-sends the markers of transactions it had not completed.

Safety: one event loop, not thread-safe. Across each append the group may have been unloaded,
deleted or changed: the cache changes only if ``groups.get(id) is group`` still holds, and a
pending entry is forgotten only if it is still the one written.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidRequestError,
)
from strom.types import TopicPartition
from strom_coordinator.group import persist, records
from strom_coordinator.group.api import MarkerGroupResult, PartitionResult, TxnCommitRequest
from strom_coordinator.group.errors import check_group_id, log_failure
from strom_coordinator.group.model import CommittedOffset, Group, GroupState, PendingTxnOffset
from strom_coordinator.group.offsets import OffsetStore
from strom_coordinator.group.stats import GroupStatsListener, NullStats
from strom_coordinator.partitions.hosting import HostedPartitions
from strom_coordinator.partitions.log import PartitionLog

__all__ = ["TxnOffsetStore", "TxnVerifier"]

_MAX_EPOCH = 0x7FFF


class TxnVerifier(Protocol):
    """Asks a transactional id's coordinator about its ongoing transaction (implemented by the
    process: ``strom_coordinator.txn_verifier``)."""

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        tp: TopicPartition,
    ) -> BrokerResponseError | None:
        """None when the ongoing transaction of exactly (producer id, epoch) holds the
        partition; otherwise the error to answer (never raises for a refusal)."""
        ...


class TxnOffsetStore:
    """The pending transactional offsets of the groups in ``groups`` (see the module
    docstring)."""

    def __init__(
        self,
        groups: dict[str, Group],
        partitions: HostedPartitions,
        log: PartitionLog,
        offsets: OffsetStore,
        verifier: TxnVerifier,
        *,
        stats: GroupStatsListener | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._groups = groups
        self._partitions = partitions
        self._log = log
        self._offsets = offsets
        self._verifier = verifier
        self._stats: GroupStatsListener = stats or NullStats()
        self._now_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        #: TxnOffsetCommits being verified or written, per (group id, producer id).
        self._in_flight: dict[tuple[str, int], set[asyncio.Future[None]]] = {}

    async def commit(self, partition: int, req: TxnCommitRequest) -> list[PartitionResult]:
        """TxnOffsetCommit for a group of ``partition`` (routed by the caller): stage the
        offsets once verified and acknowledged. Whole-request errors are raised."""
        if not req.transactional_id:
            raise InvalidRequestError("TxnOffsetCommit needs a transactional id")
        if req.producer_id < 0 or not 0 <= req.producer_epoch < _MAX_EPOCH:
            raise InvalidProducerEpochError(
                f"producer id {req.producer_id} epoch {req.producer_epoch} cannot run a transaction"
            )
        group = self._offsets.admit(
            partition, req.group_id, req.generation_id, req.member_id, req.group_instance_id
        )
        check = self._offsets.commit_error
        results = [PartitionResult(p.topic, p.partition, check(p)) for p in req.partitions]
        if all(r.error is not None for r in results):
            return results
        key = (req.group_id, req.producer_id)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._in_flight.setdefault(key, set()).add(done)
        try:
            return await self._stage(partition, req, group, results)
        finally:
            in_flight = self._in_flight[key]
            in_flight.discard(done)
            if not in_flight:
                del self._in_flight[key]
            done.set_result(None)

    async def _stage(
        self,
        partition: int,
        req: TxnCommitRequest,
        group: Group,
        results: list[PartitionResult],
    ) -> list[PartitionResult]:
        """Verify the transaction, then write the accepted offsets as pending records."""
        refusal = await self._verifier.verify(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            TopicPartition(records.OFFSETS_TOPIC, partition),
        )
        if refusal is not None:
            return _fail_accepted(results, refusal)
        if self._groups.get(req.group_id) is not group or group.state is GroupState.DEAD:
            # Unloaded or deleted while the transaction coordinator answered.
            moved = CoordinatorNotAvailableError(f"group {req.group_id} changed; try again")
            return _fail_accepted(results, moved)
        now = self._now_ms()
        seq = self._offsets.next_seq()
        staged: dict[tuple[str, int], PendingTxnOffset] = {}
        for p, r in zip(req.partitions, results, strict=True):
            if r.error is None:
                offset = CommittedOffset(p.offset, p.leader_epoch, p.metadata, now)
                staged[(p.topic, p.partition)] = PendingTxnOffset(req.producer_epoch, offset, seq)
        recs = [
            (
                records.pending_key(req.group_id, req.producer_id, topic, part),
                records.pending_value(
                    records.PendingValue(
                        req.producer_epoch, e.offset.offset, e.offset.leader_epoch,
                        e.offset.metadata, now,
                    )
                ),
            )
            for (topic, part), e in staged.items()
        ]  # fmt: skip
        group.pending_commits += 1
        try:
            await self._log.append(partition, recs)
        except Exception as e:
            return _fail_accepted(results, log_failure(e, commit=True))
        finally:
            group.pending_commits -= 1
        if self._groups.get(req.group_id) is group:
            for tp, entry in staged.items():
                persist.stage(group, req.producer_id, tp, entry)
        return results

    async def end(
        self, group_ids: Sequence[str], producer_id: int, producer_epoch: int, committed: bool
    ) -> list[MarkerGroupResult]:
        """A transaction marker for ``group_ids``: one result per group, in request order."""
        results = []
        for group_id in group_ids:
            try:
                await self._end_group(group_id, producer_id, producer_epoch, committed)
                results.append(MarkerGroupResult(group_id))
            except BrokerResponseError as e:
                results.append(MarkerGroupResult(group_id, e))
        return results

    async def _end_group(
        self, group_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> None:
        check_group_id(group_id)
        self._partitions.route(group_id)
        in_flight = self._in_flight.get((group_id, producer_id))
        if in_flight:
            await asyncio.wait(list(in_flight))
        partition = self._partitions.route(group_id)
        group = self._groups.get(group_id)
        staged = group.pending_txn.get(producer_id) if group is not None else None
        ending = {tp: e for tp, e in (staged or {}).items() if e.producer_epoch <= producer_epoch}
        if group is None:
            return  # an unknown group: nothing was ever staged here
        if not ending:
            if group.txn_ended.get(producer_id, -1) >= producer_epoch:
                return  # a resent marker: ended already
            # Nothing pending in memory, yet the log may hold a pending record this coordinator
            # never loaded (the previous owner's write, committed after the load): the
            # ended-transaction record drops it at the next load.
            ended = (records.ended_key(group_id, producer_id), records.ended_value(producer_epoch))
            try:
                await self._log.append(partition, [ended])
            except Exception as e:
                raise log_failure(e, commit=False) from None
            if self._groups.get(group_id) is group:
                group.txn_ended[producer_id] = producer_epoch
            return
        applied = {
            tp: e
            for tp, e in ending.items()
            if committed
            and e.producer_epoch == producer_epoch
            and group.offset_seq.get(tp, 0) <= e.seq
        }
        recs: list[tuple[bytes, bytes | None]] = [
            (
                records.offset_key(group_id, topic, part),
                records.offset_value(
                    records.OffsetValue(
                        e.offset.offset,
                        e.offset.leader_epoch,
                        e.offset.metadata,
                        e.offset.commit_timestamp_ms,
                    )
                ),
            )
            for (topic, part), e in applied.items()
        ]
        recs += [
            (records.pending_key(group_id, producer_id, topic, part), None)
            for topic, part in ending
        ]
        seq = self._offsets.next_seq()
        group.pending_commits += 1
        try:
            await self._log.append(partition, recs)
        except Exception as e:
            raise log_failure(e, commit=False) from None
        finally:
            group.pending_commits -= 1
        if self._groups.get(group_id) is not group:
            return
        group.txn_ended[producer_id] = max(group.txn_ended.get(producer_id, -1), producer_epoch)
        for tp, entry in ending.items():
            group.unstage(producer_id, tp, entry)
        for tp, entry in applied.items():
            if group.offset_seq.get(tp, 0) <= entry.seq:
                group.offsets[tp] = entry.offset
                group.offset_seq[tp] = seq
        if applied:
            self._stats.on_commit(group_id, len(applied))


def _fail_accepted(
    results: Sequence[PartitionResult], error: BrokerResponseError
) -> list[PartitionResult]:
    """``results`` with ``error`` on every partition that had none."""
    return [r if r.error else PartitionResult(r.topic, r.partition, error) for r in results]
