"""``CoordinatorTxnVerifier``: the storage node's ``TxnVerifier`` over gRPC.

A partition leader asks the transactional id's transaction coordinator (AddPartitionsToTxn with
verify_only) whether a transaction's first write to a partition is part of that producer id and
epoch's ongoing transaction. The coordinator is found like clients find it: FindCoordinator
(key_type TRANSACTION) on any live coordinator (their registrations, ``P/coordinators/ids/``,
mirrored by ``ClusterLink``), cached per transactional id and found again after
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE or an unreachable
coordinator, with a short backoff, until ``timeout_s``.

Every failure is a refusal, never a success: a coordinator that cannot be found or reached in
time is COORDINATOR_NOT_AVAILABLE (retriable: the producer sends again), one that does not
implement the call is UNKNOWN_SERVER_ERROR, and any other error the coordinator gives
(INVALID_TXN_STATE, PRODUCER_FENCED, ...) is the partition's answer.

Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

import grpc
import structlog

from strom.cluster import from_rpc_error
from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    ErrorCode,
    UnknownServerError,
    for_code,
)
from strom.protocol.v1 import (
    common_pb2,
    coordinator_pb2,
    coordinator_pb2_grpc,
    transaction_pb2,
    transaction_pb2_grpc,
)
from strom_server.rpc.channels import open_channel
from strom_server.rpc.errors import COORDINATOR_MOVING

log = structlog.get_logger(__name__)

__all__ = ["CoordinatorTxnVerifier"]

PartitionKey = tuple[str, int]

#: How long one verification may take before the partition answers COORDINATOR_NOT_AVAILABLE.
DEFAULT_TIMEOUT_S = 5.0
RETRY_BACKOFF_S = (0.02, 0.05, 0.1, 0.2, 0.4)


class _Retry(Exception):
    """This attempt failed in a way worth another (``message`` says how)."""


class CoordinatorTxnVerifier:
    """Implements ``strom_storage.node.txn.TxnVerifier`` against the transaction coordinators.

    ``coordinators()`` gives the live coordinators' ``host:port`` by id (``ClusterLink``)."""

    def __init__(
        self,
        coordinators: Callable[[], Mapping[int, str]],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_message_size: int = 64 << 20,
        cache_size: int = 10000,
    ) -> None:
        self._coordinators = coordinators
        self._timeout_s = timeout_s
        self._max_message_size = max_message_size
        self._cache_size = cache_size
        #: transactional id -> address of its coordinator, least recently used first
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._round_robin = itertools.count()

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[PartitionKey],
    ) -> dict[PartitionKey, BrokerResponseError | None]:
        """Per partition: None when the coordinator confirms it, else why not."""
        request = transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in partitions],
            verify_only=True,
        )
        what = (
            f"verifying producer {producer_id} epoch {producer_epoch} of transactional id "
            f"{transactional_id!r} with its coordinator"
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        last = "no answer"
        for attempt in itertools.count():
            try:
                response = await self._ask(transactional_id, request, deadline)
            except _Retry as exc:
                last = str(exc)
            except BrokerResponseError as exc:  # final
                return dict.fromkeys(partitions, _named(exc, what))
            else:
                return self._answers(response, partitions, what)
            pause = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
            if loop.time() + pause >= deadline or not self._coordinators():
                break
            await asyncio.sleep(pause)
        log.warning("transaction verification failed", transactional_id=transactional_id,
                    producer_id=producer_id, reason=last)  # fmt: skip
        error = CoordinatorNotAvailableError(f"{what}: {last}")
        return dict.fromkeys(partitions, error)

    async def _ask(
        self,
        transactional_id: str,
        request: transaction_pb2.AddPartitionsToTxnRequest,
        deadline: float,
    ) -> transaction_pb2.AddPartitionsToTxnResponse:
        address = self._cache.get(transactional_id)
        if address is None:
            address = await self._find(transactional_id, deadline)
        else:
            self._cache.move_to_end(transactional_id)
        stub = transaction_pb2_grpc.TransactionCoordinatorStub(self._channel(address))
        try:
            response = await stub.AddPartitionsToTxn(request, timeout=self._remaining(deadline))
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise UnknownServerError(
                    f"the coordinator at {address} does not implement AddPartitionsToTxn"
                ) from exc
            error = from_rpc_error(exc, address)
            if not isinstance(error, BrokerResponseError) or error.retriable:
                self._cache.pop(transactional_id, None)
                raise _Retry(f"{address}: {error}") from exc
            raise error from exc
        codes = [response.error_code, *(r.error_code for r in response.results)]
        moved = next((c for c in codes if c in COORDINATOR_MOVING), None)
        if moved is not None:
            self._cache.pop(transactional_id, None)
            raise _Retry(f"{address} answered {ErrorCode.Name(moved)}")
        return response

    async def _find(self, transactional_id: str, deadline: float) -> str:
        """The coordinator of ``transactional_id``, asked of one live coordinator."""
        live = sorted(self._coordinators().values())
        if not live:
            raise _Retry("no coordinator is registered in etcd")
        asked = live[next(self._round_robin) % len(live)]
        stub = coordinator_pb2_grpc.GroupCoordinatorStub(self._channel(asked))
        request = coordinator_pb2.FindCoordinatorRequest(
            group_id=transactional_id, key_type=coordinator_pb2.TRANSACTION
        )
        try:
            response = await stub.FindCoordinator(request, timeout=self._remaining(deadline))
        except grpc.aio.AioRpcError as exc:
            raise _Retry(f"FindCoordinator on {asked}: {from_rpc_error(exc, asked)}") from exc
        if response.error_code != ErrorCode.NONE:
            if response.error_code in COORDINATOR_MOVING:
                raise _Retry(
                    f"FindCoordinator on {asked}: {ErrorCode.Name(response.error_code)} "
                    f"{response.error_message}"
                )
            raise for_code(response.error_code, f"FindCoordinator: {response.error_message}")
        node = response.coordinator
        address = f"{node.host}:{node.port}"
        self._cache[transactional_id] = address
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return address

    @staticmethod
    def _answers(
        response: transaction_pb2.AddPartitionsToTxnResponse,
        partitions: Sequence[PartitionKey],
        what: str,
    ) -> dict[PartitionKey, BrokerResponseError | None]:
        if response.error_code != ErrorCode.NONE:
            error = for_code(response.error_code, f"{what}: {response.error_message}")
            return dict.fromkeys(partitions, error)
        answered = {
            (r.topic, r.partition): (
                None
                if r.error_code == ErrorCode.NONE
                else for_code(r.error_code, f"{what}: {r.error_message}")
            )
            for r in response.results
        }
        missing = UnknownServerError(f"{what}: the answer leaves the partition out")
        return {key: answered.get(key, missing) for key in partitions}

    def _remaining(self, deadline: float) -> float:
        return max(0.05, deadline - asyncio.get_running_loop().time())

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = open_channel(address, max_message_size=self._max_message_size)
            self._channels[address] = channel
        return channel

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()


def _named(error: BrokerResponseError, what: str) -> BrokerResponseError:
    return type(error)(f"{what}: {error}")
