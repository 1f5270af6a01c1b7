"""``GatewayTxnVerifier``: the group coordinator's ``TxnVerifier``, asking a transactional id's
transaction coordinator, through the gateway, whether its ongoing transaction holds a partition
(AddPartitionsToTxn with verify_only; the gateway finds the coordinator with FindCoordinator
key_type TRANSACTION and follows it across moves).

Every failure is a refusal, never a success: a coordinator that does not answer the call
(UNIMPLEMENTED) is UNKNOWN_SERVER_ERROR, one that cannot be reached or is moving is
COORDINATOR_NOT_AVAILABLE (retriable: the producer sends TxnOffsetCommit again).
"""

from __future__ import annotations

import grpc

from strom.cluster import ClusterClient, from_rpc_error
from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    ErrorCode,
    UnknownServerError,
    for_code,
)
from strom.protocol.v1 import common_pb2, transaction_pb2
from strom.types import TopicPartition

__all__ = ["GatewayTxnVerifier", "coordinator_error"]

#: Answers that mean "the transaction coordinator is not there right now".
_MOVING = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)


class GatewayTxnVerifier:
    """Implements ``strom_coordinator.group.txn_offsets.TxnVerifier`` over the gateway."""

    def __init__(self, cluster: ClusterClient, *, timeout_s: float) -> None:
        self._cluster = cluster
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
            response = await self._cluster.gateway.AddPartitionsToTxn(
                request, timeout=self._timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                return UnknownServerError(f"{what}: the coordinator does not implement it")
            error = from_rpc_error(exc, self._cluster.gateway_address)
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
    """A transaction coordinator's answer (through the gateway) as an error, None for NONE;
    one that is not there right now (moving) is COORDINATOR_NOT_AVAILABLE (retriable)."""
    if code == ErrorCode.NONE:
        return None
    if code in _MOVING:
        return CoordinatorNotAvailableError(f"{what}: {ErrorCode.Name(code)} {message}")
    return for_code(code, f"{what}: {message}")
