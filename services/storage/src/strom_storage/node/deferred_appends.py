"""The produce entries ``ReplicaManager.append`` could not append at once: a transaction's
first write to a partition, verified with the transaction coordinator first (KIP-890), and the
appends of its partition that arrived after it, which queue behind it (``VerificationQueue``,
``node.txn``), so per partition appends keep their arrival order.

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import structlog

from strom.errors import BrokerResponseError, InvalidTxnStateError, UnknownServerError
from strom_storage.node.hosted import HostedPartitions
from strom_storage.node.partition import Partition
from strom_storage.node.results import ProducePartitionResult, as_broker_error
from strom_storage.node.txn import (
    DeferredAppend,
    TxnVerifier,
    VerificationQueue,
    verification_requests,
)
from strom_storage.stats import NodeStats

log = structlog.get_logger(__name__)

__all__ = ["DeferredAppends"]

#: (result index, partition, offset the high watermark must reach) of an acks=all append
Wait = tuple[int, Partition, int]


class DeferredAppends:
    """Verifies and appends deferred produce entries, in order per partition."""

    def __init__(self, hosted: HostedPartitions, stats: NodeStats) -> None:
        self._hosted = hosted
        self._stats = stats
        #: the partitions with deferred appends; ``append``'s fast path checks its ``tails``
        self.queue = VerificationQueue()

    def to_verify(
        self, result_index: int, topic: str, index: int, data: bytes | memoryview,
        refusal: InvalidTxnStateError,
    ) -> DeferredAppend:  # fmt: skip
        """A leader refused ``data`` with INVALID_TXN_STATE: the transactions to verify before
        appending it (``needs``), or, when none, the refusal stands (``error``)."""
        entry = DeferredAppend(result_index, (topic, index), data)
        try:
            entry.needs = self._hosted.get(topic, index).log.transactions_to_verify(data)
        except Exception as exc:
            entry.error = as_broker_error(exc)
            return entry
        if not entry.needs:
            entry.error = refusal
        return entry

    async def append(
        self,
        deferred: list[DeferredAppend],
        results: list[ProducePartitionResult],
        waits: list[Wait],
        acks: int,
        transactional_id: str,
        *,
        verifier: TxnVerifier | None,
    ) -> None:
        """Verify and append the entries ``append`` could not append at once, in order after
        the earlier deferred appends of their partitions; their results go into ``results``,
        their acks=all waits into ``waits``."""
        keys = [entry.key for entry in deferred]
        queue = self.queue
        turn = queue.enter(keys)
        try:
            await queue.wait(turn)
            for entry in deferred:
                if entry.needs is None:  # queued only: its predecessor may have opened it
                    self._try_append(entry, results, waits, acks)
            await self._verify(transactional_id, deferred, verifier)
            for entry in deferred:
                if entry.needs and entry.error is None:
                    self._try_append(entry, results, waits, acks, verified=entry.needs)
                if entry.error is not None:
                    r = results[entry.result_index]
                    results[entry.result_index] = ProducePartitionResult(
                        r.topic, r.partition, entry.error
                    )
        finally:
            queue.leave(turn, keys)

    def _try_append(
        self,
        entry: DeferredAppend,
        results: list[ProducePartitionResult],
        waits: list[Wait],
        acks: int,
        verified: set[tuple[int, int]] | None = None,
    ) -> None:
        """Append a deferred entry: its result, or ``entry.needs`` set when it must be
        verified first, or ``entry.error``."""
        topic, index = entry.key
        try:
            partition = self._hosted.get(topic, index)
            info = partition.append_as_leader(entry.data, acks=acks, verified=verified)
        except InvalidTxnStateError as exc:
            if verified is None:
                found = self.to_verify(entry.result_index, topic, index, entry.data, exc)
                entry.needs, entry.error = found.needs, found.error
            else:
                entry.error = exc
            return
        except Exception as exc:
            entry.error = as_broker_error(exc)
            if not isinstance(exc, BrokerResponseError):
                log.exception("append failed", topic=topic, partition=index)
            return
        entry.needs = None
        if not info.duplicate:
            self._hosted.notifier.notify(partition.key)
            self._stats.record_in(topic, info.size_bytes, info.record_count)
        if acks == -1 and partition.log.high_watermark <= info.last_offset:
            waits.append((entry.result_index, partition, info.last_offset + 1))
        results[entry.result_index] = ProducePartitionResult(
            topic,
            index,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time,
            log_start_offset=info.log_start_offset,
        )

    async def _verify(
        self, transactional_id: str, deferred: list[DeferredAppend], verifier: TxnVerifier | None
    ) -> None:
        """Ask the coordinators about every (producer id, epoch) the entries need (one call
        each, concurrently); a refused entry gets the coordinator's error."""
        requests = verification_requests(transactional_id, deferred)
        if not requests:
            return
        if verifier is None:
            refusal = InvalidTxnStateError(
                f"node {self._hosted.node_id} runs without a cluster: it has no transaction "
                "coordinator to verify a transaction with"
            )
            for entry in deferred:
                if entry.needs and entry.error is None:
                    entry.error = refusal
            return
        producers = list(requests)
        answers = await asyncio.gather(
            *(
                verifier.verify(transactional_id, pid, epoch, requests[(pid, epoch)])
                for pid, epoch in producers
            ),
            return_exceptions=True,
        )
        verdicts: dict[tuple[int, int], Mapping[tuple[str, int], BrokerResponseError | None]] = {}
        for producer, outcome in zip(producers, answers, strict=True):
            if isinstance(outcome, BaseException):
                log.error("transaction verification failed", producer_id=producer[0],
                          error=repr(outcome))  # fmt: skip
                failure = UnknownServerError(f"verification failed: {outcome!r}")
                answer: Mapping[tuple[str, int], BrokerResponseError | None] = dict.fromkeys(
                    requests[producer], failure
                )
            else:
                answer = outcome
            verdicts[producer] = answer
            refused = sum(1 for error in answer.values() if error is not None)
            self._stats.txn_verified(ok=len(answer) - refused, refused=refused)
        for entry in deferred:
            if not entry.needs or entry.error is not None:
                continue
            for producer in entry.needs:
                answer = verdicts[producer]
                error = (
                    answer[entry.key]
                    if entry.key in answer
                    else UnknownServerError(f"the transaction coordinator left {entry.key} out")
                )
                if error is not None:
                    entry.error = error
                    break
