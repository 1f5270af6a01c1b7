"""The admin client's transaction operations: transactional ids through the gateway to their
coordinators, producers from the partition leaders, hanging transactions, and staged commits
(documented on ``strom.aio.Admin``, which calls them)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from strom.admin import transactions as txn
from strom.admin._calls import RETRY_BACKOFF_S, AdminCalls, check
from strom.admin.transactions import (
    HangingTransaction,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from strom.cluster.retry import Deadline
from strom.errors import (
    ConfigurationError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    ProducerFencedError,
    StromTimeoutError,
    TransactionalIdNotFoundError,
    for_code,
)
from strom.protocol.v1 import common_pb2, controller_pb2, transaction_pb2
from strom.types import StagedCommit, StagedCommitResult, StagedTransaction, TopicPartition

__all__ = ["TransactionAdmin"]

#: EndTxn(abort) answers meaning the staged transaction is over already.
_ENDED_ALREADY = (
    InvalidTxnStateError,
    ProducerFencedError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    TransactionalIdNotFoundError,
)


def _check_commit_id(commit_id: str) -> None:
    if not isinstance(commit_id, str) or not commit_id:
        raise ConfigurationError(f"commit_id must be a non-empty string, got {commit_id!r}")


class TransactionAdmin:
    """Transactional ids, producers, hanging transactions and staged commits."""

    def __init__(self, calls: AdminCalls) -> None:
        self._calls = calls

    async def list_transactions(
        self,
        *,
        states: Sequence[str] | None = None,
        producer_ids: Sequence[int] | None = None,
        duration_ms: int = 0,
        transactional_id_prefix: str | None = None,
    ) -> list[TransactionListing]:
        for state in states or ():
            if state not in txn.STATES:
                raise ConfigurationError(
                    f"unknown transaction state {state!r}; one of {', '.join(txn.STATES)}"
                )
        request = transaction_pb2.ListTransactionsRequest(
            state_filters=list(states or ()),
            producer_id_filters=list(producer_ids or ()),
            duration_filter_ms=duration_ms,
            transactional_id_prefix=transactional_id_prefix or "",
        )
        deadline = Deadline(self._calls.timeout_s)
        while True:
            response = await self._calls.group_call("ListTransactions", request)
            if response.error_code:
                message = response.error_message or common_pb2.ErrorCode.Name(response.error_code)
                raise for_code(response.error_code, f"list transactions: {message}")
            if not response.unreachable_coordinators:
                break
            if not deadline.allows(RETRY_BACKOFF_S):
                missing = ", ".join(str(c) for c in response.unreachable_coordinators)
                raise CoordinatorNotAvailableError(
                    f"list transactions: coordinator(s) {missing} did not answer; the listing "
                    "would be incomplete"
                )
            await asyncio.sleep(RETRY_BACKOFF_S)
        prefix = transactional_id_prefix or ""
        return sorted(
            (
                txn.listing(t)
                for t in response.transactions
                if t.transactional_id.startswith(prefix)
            ),
            key=lambda t: t.transactional_id,
        )

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> dict[str, TransactionDescription]:
        request = transaction_pb2.DescribeTransactionsRequest(
            transactional_ids=list(transactional_ids)
        )
        response = await self._calls.group_call("DescribeTransactions", request)
        found = {}
        for t in response.transactions:
            if t.error_code:
                message = t.error_message or common_pb2.ErrorCode.Name(t.error_code)
                raise for_code(t.error_code, f"transactional id {t.transactional_id}: {message}")
            found[t.transactional_id] = txn.description(t)
        return found

    async def describe_producers(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        request = transaction_pb2.DescribeProducersRequest(
            partitions=[
                common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                for tp in partitions
            ]
        )
        response = await self._calls.group_call("DescribeProducers", request)
        check(response.partitions, "partition")
        return {
            TopicPartition(r.topic, r.partition): [
                txn.producer_state(p) for p in r.active_producers
            ]
            for r in response.partitions
        }

    async def find_hanging_transactions(
        self,
        partitions: Sequence[TopicPartition],
        max_transaction_timeout_ms: int,
    ) -> list[HangingTransaction]:
        candidates = txn.open_transactions(
            await self.describe_producers(partitions), max_transaction_timeout_ms
        )
        if not candidates:
            return []
        listed = await self.list_transactions(
            producer_ids=sorted({p.producer_id for _, p in candidates})
        )
        ongoing = [t.transactional_id for t in listed if t.state == "Ongoing"]
        described = await self.describe_transactions(ongoing) if ongoing else {}
        return txn.hanging(candidates, listed, described)

    async def abort_transaction(
        self, transactional_id: str, *, wait_timeout_ms: int | None = None
    ) -> TransactionDescription:
        current = (await self.describe_transactions([transactional_id]))[transactional_id]
        if current.state not in ("Ongoing", "PrepareAbort", "PrepareCommit"):
            return current  # nothing open: its producer is left alone
        request = controller_pb2.InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=current.transaction_timeout_ms or 60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        response = await self._calls.group_call("InitProducerId", request)
        if response.error_code:
            message = response.error_message or common_pb2.ErrorCode.Name(response.error_code)
            raise for_code(response.error_code, f"transactional id {transactional_id}: {message}")
        wait = self._calls.timeout_s if wait_timeout_ms is None else wait_timeout_ms / 1000
        deadline = Deadline(wait)
        while True:
            now = (await self.describe_transactions([transactional_id]))[transactional_id]
            if now.state not in ("Ongoing", "PrepareAbort", "PrepareCommit"):
                return now
            if not deadline.allows(RETRY_BACKOFF_S):
                raise StromTimeoutError(
                    f"transactional id {transactional_id}: still {now.state} after {wait} s"
                )
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def commit_staged_transactions(
        self,
        commit_id: str,
        sequence: int,
        members: Sequence[StagedTransaction],
        metadata: bytes = b"",
    ) -> StagedCommitResult:
        _check_commit_id(commit_id)
        if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 0:
            raise ConfigurationError(f"sequence must be an int >= 0, got {sequence!r}")
        if not isinstance(metadata, bytes | bytearray):
            raise ConfigurationError(f"metadata must be bytes, got {type(metadata).__name__}")
        request = transaction_pb2.CommitStagedTransactionsRequest(
            commit_id=commit_id,
            sequence=sequence,
            members=txn.staged_members_pb(members),
            metadata=bytes(metadata),
        )
        response = await self._calls.staged_call(
            "CommitStagedTransactions", request, f"commit {commit_id!r} sequence {sequence}"
        )
        return StagedCommitResult(
            already_committed=response.already_committed,
            commit=txn.staged_commit(response.commit),
        )

    async def describe_staged_commit(self, commit_id: str) -> StagedCommit | None:
        _check_commit_id(commit_id)
        request = transaction_pb2.DescribeStagedCommitRequest(commit_id=commit_id)
        response = await self._calls.staged_call(
            "DescribeStagedCommit", request, f"describe commit {commit_id!r}"
        )
        return txn.staged_commit(response.commit) if response.found else None

    async def abort_staged_transactions(self, members: Sequence[StagedTransaction]) -> None:
        await asyncio.gather(*(self._abort_staged(m) for m in members))

    async def _abort_staged(self, member: StagedTransaction) -> None:
        request = transaction_pb2.EndTxnRequest(
            transactional_id=member.transactional_id,
            producer_id=member.producer_id,
            producer_epoch=member.producer_epoch,
            committed=False,
        )
        what = (
            f"abort staged transaction {member.transactional_id!r} (producer id "
            f"{member.producer_id} epoch {member.producer_epoch})"
        )
        try:
            await self._calls.staged_call("EndTxn", request, what)
        except _ENDED_ALREADY:
            return  # ended already (committed or aborted), fenced, or forgotten
