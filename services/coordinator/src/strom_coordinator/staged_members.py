"""``CoordinatorMembers``: how a staged decision reaches its members' transaction coordinators
(``strom_coordinator.txn.staged_commits.MemberCalls``).

A member whose ``__transaction_state`` partition this instance serves is asked through the
local ``TransactionManager``; any other (or one whose partition moves away meanwhile:
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) at its coordinator directly
(``runtime.peers``: the owner of the id's partition, followed across moves), as
``txn_verifier`` does. Coordinator problems come back as retriable errors
(COORDINATOR_NOT_AVAILABLE), and so does any gRPC failure of the call (it says nothing about
the member); answers keep their own error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc

from strom.cluster import from_rpc_error
from strom.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    ErrorCode,
    NotCoordinatorError,
    TransactionalIdNotFoundError,
)
from strom.protocol.v1 import transaction_pb2
from strom.types import StagedTransaction
from strom_coordinator.runtime.peers import PeerCoordinators
from strom_coordinator.txn.manager import TransactionManager
from strom_coordinator.txn.state import TxnMetadata, TxnState
from strom_coordinator.txn_verifier import coordinator_error

__all__ = ["CoordinatorMembers"]

_STATES = {s.value: s for s in TxnState}


class CoordinatorMembers:
    """Implements ``MemberCalls`` over the local manager and the peer coordinators."""

    def __init__(self, peers: PeerCoordinators, *, timeout_s: float) -> None:
        self._peers = peers
        self._timeout_s = timeout_s
        #: The local manager (set once it exists: it holds this object).
        self.local: TransactionManager | None = None

    async def describe(self, transactional_ids: Sequence[str]) -> dict[str, TxnMetadata | None]:
        found: dict[str, TxnMetadata | None] = {}
        remote: list[str] = []
        if self.local is not None:
            for d in await self.local.describe_transactions(list(transactional_ids)):
                if d.error is None:
                    found[d.transactional_id] = d.metadata
                elif isinstance(d.error, TransactionalIdNotFoundError):
                    found[d.transactional_id] = None
                elif isinstance(d.error, NotCoordinatorError | CoordinatorLoadInProgressError):
                    remote.append(d.transactional_id)
                else:
                    raise d.error
        else:
            remote = list(transactional_ids)
        if not remote:
            return found
        # One request per id, at the same time (each at its own coordinator).
        what = "describing staged transactions at their coordinators"
        requests = {
            tid: transaction_pb2.DescribeTransactionsRequest(transactional_ids=[tid])
            for tid in remote
        }
        responses = await asyncio.gather(
            *(self._call(tid, "DescribeTransactions", r, what) for tid, r in requests.items())
        )
        for item in (item for response in responses for item in response.transactions):
            tid = item.transactional_id
            if item.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                found[tid] = None
                continue
            _raise_for(item.error_code, item.error_message, f"{what} ({tid!r})")
            found[tid] = TxnMetadata(
                transactional_id=tid,
                producer_id=item.producer_id,
                producer_epoch=item.producer_epoch,
                timeout_ms=item.transaction_timeout_ms,
                state=_STATES.get(item.state, TxnState.DEAD),
                partitions=frozenset((p.topic, p.partition) for p in item.partitions),
                groups=frozenset(item.group_ids),
                start_ms=item.transaction_start_time_ms,
            )
        missing = [tid for tid in remote if tid not in found]
        if missing:
            raise CoordinatorNotAvailableError(f"{what}: the answer does not name {missing}")
        return found

    async def end(self, member: StagedTransaction) -> None:
        tid = member.transactional_id
        if self.local is not None:
            try:
                await self.local.end_txn(tid, member.producer_id, member.producer_epoch, True)
                return
            except (NotCoordinatorError, CoordinatorLoadInProgressError):
                pass  # not (or no longer) ours: at its coordinator
        request = transaction_pb2.EndTxnRequest(
            transactional_id=tid,
            producer_id=member.producer_id,
            producer_epoch=member.producer_epoch,
            committed=True,
        )
        what = f"committing staged transaction {tid!r} at its coordinator"
        response = await self._call(tid, "EndTxn", request, what)
        _raise_for(response.error_code, response.error_message, what)

    async def _call(self, tid: str, method: str, request: Any, what: str) -> Any:
        try:
            return await self._peers.call_transaction(
                tid, method, request, timeout_s=self._timeout_s
            )
        except CoordinatorNotAvailableError as exc:
            raise CoordinatorNotAvailableError(f"{what}: {exc}") from exc
        except grpc.aio.AioRpcError as exc:
            # Not an answer about the member: asked again (never a reason to give it up).
            error = from_rpc_error(exc, "the transaction coordinator")
            raise CoordinatorNotAvailableError(f"{what}: {error}") from exc


def _raise_for(code: int, message: str, what: str) -> None:
    error = coordinator_error(code, message, what)
    if error is not None:
        raise error
