"""``PeerTxnVerifier``: the group coordinator's ``TxnVerifier``, asking a transactional id's
transaction coordinator, directly (``runtime.peers``: the owner of the id's
``__transaction_state`` partition, followed across moves), whether its ongoing transaction
holds a partition (AddPartitionsToTxn with verify_only).

Every failure is a refusal, never a success: a coordinator that does not answer the call
(UNIMPLEMENTED) is UNKNOWN_SERVER_ERROR, one that cannot be reached or is moving is
COORDINATOR_NOT_AVAILABLE (retriable: the producer sends TxnOffsetCommit again).
"""

from __future__ import annotations

import grpc

from strom.cluster import from_rpc_error
from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    ErrorCode,
    UnknownServerError,
    for_code,
)
from strom.protocol.v1 import common_pb2, transaction_pb2
from strom.types import TopicPartition
from strom_coordinator.runtime.peers import PeerCoordinators
from strom_server.rpc.errors import COORDINATOR_MOVING

__all__ = ["PeerTxnVerifier", "coordinator_error"]


class PeerTxnVerifier:
    """Implements ``strom_coordinator.group.txn_offsets.TxnVerifier`` over the peers."""

    def __init__(self, peers: PeerCoordinators, *, timeout_s: float) -> None:
        self._peers = peers
        self._timeout_s = timeout_s

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> BrokerResponseError | None:
        request = transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=[common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)],
            verify_only=True,
        )
        what = f"verifying transaction {transactional_id!r} with its coordinator"
        try:
            response = await self._peers.call_transaction(
                transactional_id, "AddPartitionsToTxn", request, timeout_s=self._timeout_s
            )
        except CoordinatorNotAvailableError as exc:  # no peer answered in time
            return CoordinatorNotAvailableError(f"{what}: {exc}")
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                return UnknownServerError(f"{what}: the coordinator does not implement it")
            error = from_rpc_error(exc, "the transaction coordinator")
            if error.retriable:
                return CoordinatorNotAvailableError(f"{what}: {error}")
            if isinstance(error, BrokerResponseError):
                return error
            return UnknownServerError(f"{what}: {error}")
        code, message = response.error_code, response.error_message
        for result in response.results:
            if code == ErrorCode.NONE and result.error_code != ErrorCode.NONE:
                code, message = result.error_code, result.error_message
        if code == ErrorCode.NONE:
            if not any(
                r.topic == tp.topic and r.partition == tp.partition for r in response.results
            ):
                return UnknownServerError(f"{what}: the answer does not name {tp}")
            return None
        return coordinator_error(code, message, what)


def coordinator_error(code: int, message: str, what: str) -> BrokerResponseError | None:
    """A transaction coordinator's answer as an error, None for NONE;
    one that is not there right now (moving) is COORDINATOR_NOT_AVAILABLE (retriable)."""
    if code == ErrorCode.NONE:
        return None
    if code in COORDINATOR_MOVING:
        return CoordinatorNotAvailableError(f"{what}: {ErrorCode.Name(code)} {message}")
    return for_code(code, f"{what}: {message}")
