"""Forward group and transaction RPCs to the coordinators registered in etcd.

Every coordinator process serves both services, GroupCoordinator and TransactionCoordinator; a
key (group id, or transactional id with key_type TRANSACTION) lives on one of them.

- FindCoordinator goes to any live coordinator (round robin; another one on UNAVAILABLE), its
  key_type passed through.
- ListGroups goes to every coordinator; the answers are merged (one entry per group id).
  ListTransactions too (one entry per transactional id), naming the coordinators that could
  not answer in ``unreachable_coordinators``.
- DescribeGroups and DeleteGroups are split by each group's coordinator, DescribeTransactions
  by each transactional id's, and merged back in request order.
- Every other group RPC (TxnOffsetCommit included) goes to the group's coordinator, found with
  FindCoordinator and cached; AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and InitProducerId
  (with a transactional id) to the transactional id's coordinator, found and cached alike;
  CommitStagedTransactions and DescribeStagedCommit to their commit_id's coordinator
  (key_type TRANSACTION: a commit_id lives in a __transaction_state partition like an id).

A call answered NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE, or
failing with gRPC UNAVAILABLE, is retried (after finding the coordinator again unless it is only
loading) until the request's deadline; then the client gets the last answer, or a response
carrying COORDINATOR_NOT_AVAILABLE, never a gRPC error for a coordinator problem. With no
coordinator registered at all, that answer comes at once: the error is retriable and the client
backs off itself.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar, cast

import grpc
import structlog
from google.protobuf.message import Message

from strom.errors import ErrorCode
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    coordinator_pb2,
    coordinator_pb2_grpc,
    transaction_pb2,
    transaction_pb2_grpc,
)
from strom.security import ChannelSecurity
from strom_server.rpc.channels import open_channel
from strom_server.rpc.errors import COORDINATOR_MOVING, coordinator_moving

log = structlog.get_logger(__name__)

__all__ = [
    "CoordinatorRouter",
    "CoordinatorSource",
    "GroupRequest",
    "StagedRequest",
    "TxnRequest",
    "error_response",
    "is_controller_producer_id",
]

RETRY_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)
#: Of the answers that mean "ask again, perhaps elsewhere" (``COORDINATOR_MOVING``), the ones
#: after which the cached coordinator of the group is forgotten.
_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
NO_COORDINATOR = "no group coordinator is registered in etcd"
GROUP = coordinator_pb2.GROUP
TRANSACTION = coordinator_pb2.TRANSACTION
#: Transactional ids of the coordinators' own producers, served by the controller.
RESERVED_PREFIX = "__strom_"

#: The requests ``CoordinatorRouter.call`` sends to the coordinator of their ``group_id``.
GroupRequest: TypeAlias = (
    coordinator_pb2.JoinGroupRequest
    | coordinator_pb2.SyncGroupRequest
    | coordinator_pb2.HeartbeatRequest
    | coordinator_pb2.LeaveGroupRequest
    | coordinator_pb2.OffsetCommitRequest
    | coordinator_pb2.OffsetFetchRequest
    | coordinator_pb2.OffsetDeleteRequest
    | coordinator_pb2.TxnOffsetCommitRequest
)
#: The requests ``CoordinatorRouter.call_txn`` sends to the coordinator of their
#: ``transactional_id``.
TxnRequest: TypeAlias = (
    transaction_pb2.AddPartitionsToTxnRequest
    | transaction_pb2.AddOffsetsToTxnRequest
    | transaction_pb2.EndTxnRequest
    | controller_pb2.InitProducerIdRequest
)
#: The requests ``CoordinatorRouter.call_staged`` sends to the coordinator of their
#: ``commit_id`` (located like a transactional id).
StagedRequest: TypeAlias = (
    transaction_pb2.CommitStagedTransactionsRequest | transaction_pb2.DescribeStagedCommitRequest
)
Request: TypeAlias = GroupRequest | TxnRequest | StagedRequest


def is_controller_producer_id(transactional_id: str) -> bool:
    """Whether InitProducerId for ``transactional_id`` goes to the controller (no id: an
    idempotent producer; a reserved ``__strom_`` id: a coordinator's own) rather than to the
    id's transaction coordinator."""
    return not transactional_id or transactional_id.startswith(RESERVED_PREFIX)


class _GroupResult(Protocol):
    """A per-key entry of a DescribeGroups, DeleteGroups or DescribeTransactions answer (its
    key is read with ``_split``'s ``key_field``)."""

    @property
    def error_code(self) -> int: ...


Answer = TypeVar("Answer", bound=Message)
GroupResult = TypeVar("GroupResult", bound=_GroupResult)


class CoordinatorSource(Protocol):
    """Where the live coordinators are (``CoordinatorRegistry``)."""

    @property
    def addresses(self) -> dict[int, str]: ...

    async def refresh(self) -> dict[int, str]: ...


class _NotFound(Exception):
    """The group's coordinator could not be found (``code`` says why)."""

    def __init__(self, code: common_pb2.ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def final(self) -> bool:
        """Not worth retrying here: no coordinator at all, or a non-retriable answer."""
        return self.code not in COORDINATOR_MOVING or self.message == NO_COORDINATOR


def error_response(
    method: str, request: Message, code: common_pb2.ErrorCode, message: str
) -> Message:
    """The response of ``method`` that answers ``request`` with ``code`` everywhere."""
    pb, txn = coordinator_pb2, transaction_pb2
    # ``method`` names the request's kind: the casts below only tell the type checker.
    if method in ("OffsetCommit", "TxnOffsetCommit"):
        commit = cast(pb.OffsetCommitRequest, request)
        answer: Message = getattr(pb, f"{method}Response")(
            partitions=[
                pb.OffsetCommitPartitionResult(
                    topic=p.topic, partition=p.partition, error_code=code, error_message=message
                )
                for p in commit.partitions
            ]
        )
        return answer
    if method == "AddPartitionsToTxn":
        add = cast(txn.AddPartitionsToTxnRequest, request)
        return txn.AddPartitionsToTxnResponse(
            error_code=code,
            error_message=message,
            results=[
                txn.AddPartitionsToTxnResult(
                    topic=p.topic, partition=p.partition, error_code=code, error_message=message
                )
                for p in add.partitions
            ],
        )
    if method in ("InitProducerId", "EndTxn"):
        module = controller_pb2 if method == "InitProducerId" else txn
        ended: Message = getattr(module, f"{method}Response")(
            error_code=code, error_message=message, producer_id=-1, producer_epoch=-1
        )
        return ended
    if method == "DescribeGroups":
        describe = cast(pb.DescribeGroupsRequest, request)
        return pb.DescribeGroupsResponse(
            groups=[
                pb.DescribedGroup(group_id=g, error_code=code, error_message=message)
                for g in describe.group_ids
            ]
        )
    if method == "DeleteGroups":
        delete = cast(pb.DeleteGroupsRequest, request)
        return pb.DeleteGroupsResponse(
            results=[
                pb.DeleteGroupResult(group_id=g, error_code=code, error_message=message)
                for g in delete.group_ids
            ]
        )
    module = txn if hasattr(txn, f"{method}Response") else pb
    response: Message = getattr(module, f"{method}Response")(error_code=code, error_message=message)
    return response


def _backoff(attempt: int) -> float:
    return RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]


class _Coordinator:
    """One coordinator process: its channel and the stubs of the two services it serves."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.groups = coordinator_pb2_grpc.GroupCoordinatorStub(channel)
        self.transactions = transaction_pb2_grpc.TransactionCoordinatorStub(channel)


class CoordinatorRouter:
    """Calls GroupCoordinator RPCs on the right coordinator instance."""

    def __init__(
        self,
        source: CoordinatorSource,
        *,
        max_message_size: int,
        lookup_timeout_s: float = 15.0,
        cache_size: int = 10000,
        security: ChannelSecurity | None = None,
    ) -> None:
        """``security``: the channels' (None: the process's, calling as the service)."""
        self.source = source
        self._security = security
        self._max_message_size = max_message_size
        self._lookup_timeout_s = lookup_timeout_s
        self._cache_size = cache_size
        self._channels: dict[str, _Coordinator] = {}
        #: (key type, group or transactional id) -> (coordinator id, host:port), least
        #: recently used first
        self._coordinators: OrderedDict[tuple[int, str], tuple[int, str]] = OrderedDict()
        self._round_robin = itertools.count()

    def _connection(self, address: str) -> _Coordinator:
        entry = self._channels.get(address)
        if entry is None:
            channel = open_channel(
                address, max_message_size=self._max_message_size, security=self._security
            )
            entry = self._channels[address] = _Coordinator(channel)
        return entry

    def _stub(self, address: str) -> coordinator_pb2_grpc.GroupCoordinatorStub:
        return self._connection(address).groups

    def _txn_stub(self, address: str) -> transaction_pb2_grpc.TransactionCoordinatorStub:
        return self._connection(address).transactions

    def _service(self, key_type: int, address: str) -> Any:
        """The stub of the service serving keys of ``key_type`` at ``address`` (typed Any:
        the generated stubs carry no types for the methods called on it)."""
        return self._txn_stub(address) if key_type == TRANSACTION else self._stub(address)

    async def _live(self) -> list[str]:
        addresses = self.source.addresses or await self.source.refresh()
        return list(addresses.values())

    # -- any coordinator ----------------------------------------------------------------------

    async def _find_on_any(
        self, request: coordinator_pb2.FindCoordinatorRequest, deadline: float
    ) -> coordinator_pb2.FindCoordinatorResponse:
        """FindCoordinator on one live coordinator, trying the others (then again after a
        registry refresh) while they are unreachable. Raises _NotFound."""
        attempt = 0
        while True:
            addresses = await self._live()
            if not addresses:
                raise _NotFound(ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_COORDINATOR)
            start = next(self._round_robin)
            problem = ""
            for i in range(len(addresses)):
                address = addresses[(start + i) % len(addresses)]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    found: coordinator_pb2.FindCoordinatorResponse
                    found = await self._stub(address).FindCoordinator(
                        request, timeout=min(remaining, self._lookup_timeout_s)
                    )
                    return found
                except grpc.aio.AioRpcError as exc:
                    if exc.code() not in (
                        grpc.StatusCode.UNAVAILABLE,
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                    ):
                        raise
                    problem = f"coordinator {address}: {exc.code().name} {exc.details()}"
            delay = _backoff(attempt)
            if time.monotonic() + delay >= deadline:
                raise _NotFound(ErrorCode.COORDINATOR_NOT_AVAILABLE, problem or "deadline passed")
            attempt += 1
            await asyncio.sleep(delay)
            await self.source.refresh()

    async def find_coordinator(
        self, request: coordinator_pb2.FindCoordinatorRequest, timeout_s: float
    ) -> coordinator_pb2.FindCoordinatorResponse:
        try:
            response = await self._find_on_any(request, time.monotonic() + timeout_s)
        except _NotFound as exc:
            return coordinator_pb2.FindCoordinatorResponse(
                error_code=exc.code, error_message=exc.message
            )
        return response

    async def _locate(self, key: str, deadline: float, key_type: int = GROUP) -> tuple[int, str]:
        """(coordinator id, host:port) of ``key`` (a group id, or a transactional id for
        key_type TRANSACTION); raises _NotFound."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None and cached[0] in self.source.addresses:
            self._coordinators.move_to_end((key_type, key))
            return cached
        request = coordinator_pb2.FindCoordinatorRequest(
            group_id=key, key_type=cast(coordinator_pb2.CoordinatorKeyType, key_type)
        )
        response = await self._find_on_any(request, deadline)
        if response.error_code:
            raise _NotFound(
                response.error_code, response.error_message or ErrorCode.Name(response.error_code)
            )
        node = response.coordinator
        found = (node.node_id, f"{node.host}:{node.port}")
        self._coordinators[(key_type, key)] = found
        if len(self._coordinators) > self._cache_size:
            self._coordinators.popitem(last=False)
        return found

    def _forget(self, key: str, key_type: int = GROUP) -> None:
        self._coordinators.pop((key_type, key), None)

    # -- one group or transactional id ---------------------------------------------------------

    async def call(self, method: str, request: GroupRequest, timeout_s: float) -> Message:
        """``GroupCoordinator.<method>(request)`` on the coordinator of ``request.group_id``,
        retried on coordinator errors until ``timeout_s`` passes. The answer is
        ``<method>Response`` (the generated stubs carry no types to say so)."""
        return await self._call_keyed(method, request, request.group_id, GROUP, timeout_s)

    async def call_txn(self, method: str, request: TxnRequest, timeout_s: float) -> Message:
        """``TransactionCoordinator.<method>(request)`` on the coordinator of
        ``request.transactional_id``, retried like ``call``."""
        key = request.transactional_id
        return await self._call_keyed(method, request, key, TRANSACTION, timeout_s)

    async def call_staged(self, method: str, request: StagedRequest, timeout_s: float) -> Message:
        """``TransactionCoordinator.<method>(request)`` on the coordinator of
        ``request.commit_id`` (the same partition function as a transactional id's), retried
        like ``call``."""
        return await self._call_keyed(method, request, request.commit_id, TRANSACTION, timeout_s)

    async def _call_keyed(
        self, method: str, request: Request, key: str, key_type: int, timeout_s: float
    ) -> Message:
        deadline = time.monotonic() + timeout_s
        attempt = 0
        last: Message  # set by every attempt that does not return
        while True:
            address = "?"
            try:
                _, address = await self._locate(key, deadline, key_type)
                response: Message = await getattr(self._service(key_type, address), method)(
                    request, timeout=max(deadline - time.monotonic(), 0.001)
                )
            except _NotFound as exc:
                if exc.final:
                    return error_response(method, request, exc.code, exc.message)
                last = error_response(method, request, exc.code, exc.message)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                self._forget(key, key_type)
                last = error_response(
                    method,
                    request,
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"coordinator {address}: {exc.code().name} {exc.details()}",
                )
            else:
                code = coordinator_moving(response)
                if code is None:
                    return response
                if code in _MOVED:
                    self._forget(key, key_type)
                last = response
            delay = _backoff(attempt)
            if time.monotonic() + delay >= deadline:
                return last
            attempt += 1
            log.debug("retrying a coordinator call", method=method, key=key, key_type=key_type)
            await asyncio.sleep(delay)

    # -- every coordinator --------------------------------------------------------------------

    async def _everywhere(
        self, key_type: int, method: str, request: Message, timeout_s: float
    ) -> list[tuple[int, str, Message | grpc.aio.AioRpcError]] | None:
        """``method(request)`` on every live coordinator at once: (coordinator id, address,
        answer or gRPC failure) each; None when none is registered."""
        addresses = self.source.addresses or await self.source.refresh()
        if not addresses:
            return None
        answers = await asyncio.gather(
            *(
                getattr(self._service(key_type, a), method)(request, timeout=timeout_s)
                for a in addresses.values()
            ),
            return_exceptions=True,
        )
        out: list[tuple[int, str, Message | grpc.aio.AioRpcError]] = []
        for (coordinator_id, address), answer in zip(addresses.items(), answers, strict=True):
            if isinstance(answer, BaseException) and not isinstance(answer, grpc.aio.AioRpcError):
                raise answer
            out.append((coordinator_id, address, answer))
        return out

    async def list_groups(
        self, request: coordinator_pb2.ListGroupsRequest, timeout_s: float
    ) -> coordinator_pb2.ListGroupsResponse:
        answers = await self._everywhere(GROUP, "ListGroups", request, timeout_s)
        if answers is None:
            return coordinator_pb2.ListGroupsResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=NO_COORDINATOR
            )
        merged = coordinator_pb2.ListGroupsResponse()
        seen: set[str] = set()
        for _, address, answer in answers:
            if isinstance(answer, grpc.aio.AioRpcError):
                if not merged.error_code:
                    merged.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                    merged.error_message = f"coordinator {address}: {answer.code().name}"
                continue
            listed = cast(coordinator_pb2.ListGroupsResponse, answer)
            if listed.error_code and not merged.error_code:
                merged.error_code = listed.error_code
                merged.error_message = f"coordinator {address}: {listed.error_message}"
            for group in listed.groups:
                if group.group_id not in seen:
                    seen.add(group.group_id)
                    merged.groups.append(group)
        return merged

    async def list_transactions(
        self, request: transaction_pb2.ListTransactionsRequest, timeout_s: float
    ) -> transaction_pb2.ListTransactionsResponse:
        """Every live coordinator's transactions (one entry per transactional id); those that
        could not answer (unreachable, or answering an error) are named in
        ``unreachable_coordinators`` and the first such error is the top-level one."""
        answers = await self._everywhere(TRANSACTION, "ListTransactions", request, timeout_s)
        if answers is None:
            return transaction_pb2.ListTransactionsResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=NO_COORDINATOR
            )
        merged = transaction_pb2.ListTransactionsResponse()
        seen: set[str] = set()
        for coordinator_id, address, answer in answers:
            if isinstance(answer, grpc.aio.AioRpcError):
                code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE
                message = f"coordinator {address}: {answer.code().name} {answer.details()}"
            else:
                listed = cast(transaction_pb2.ListTransactionsResponse, answer)
                code = listed.error_code
                message = f"coordinator {address}: {listed.error_message}"
                for item in listed.transactions:
                    if item.transactional_id not in seen:
                        seen.add(item.transactional_id)
                        merged.transactions.append(item)
            if code:
                merged.unreachable_coordinators.append(coordinator_id)
                if not merged.error_code:
                    merged.error_code = cast(common_pb2.ErrorCode, code)
                    merged.error_message = message
        return merged

    # -- split by group or transactional id ---------------------------------------------------

    async def describe_groups(
        self, request: coordinator_pb2.DescribeGroupsRequest, timeout_s: float
    ) -> coordinator_pb2.DescribeGroupsResponse:
        items = await self._split(
            "DescribeGroups",
            request.group_ids,
            timeout_s,
            build=lambda ids: coordinator_pb2.DescribeGroupsRequest(group_ids=ids),
            answer=coordinator_pb2.DescribeGroupsResponse,
            items_of=lambda response: response.groups,
            item_type=coordinator_pb2.DescribedGroup,
        )
        return coordinator_pb2.DescribeGroupsResponse(groups=items)

    async def delete_groups(
        self, request: coordinator_pb2.DeleteGroupsRequest, timeout_s: float
    ) -> coordinator_pb2.DeleteGroupsResponse:
        items = await self._split(
            "DeleteGroups",
            request.group_ids,
            timeout_s,
            build=lambda ids: coordinator_pb2.DeleteGroupsRequest(group_ids=ids),
            answer=coordinator_pb2.DeleteGroupsResponse,
            items_of=lambda response: response.results,
            item_type=coordinator_pb2.DeleteGroupResult,
        )
        return coordinator_pb2.DeleteGroupsResponse(results=items)

    async def describe_transactions(
        self, request: transaction_pb2.DescribeTransactionsRequest, timeout_s: float
    ) -> transaction_pb2.DescribeTransactionsResponse:
        items = await self._split(
            "DescribeTransactions",
            request.transactional_ids,
            timeout_s,
            build=lambda ids: transaction_pb2.DescribeTransactionsRequest(transactional_ids=ids),
            answer=transaction_pb2.DescribeTransactionsResponse,
            items_of=lambda response: response.transactions,
            item_type=transaction_pb2.DescribedTransaction,
            key_type=TRANSACTION,
            key_field="transactional_id",
        )
        return transaction_pb2.DescribeTransactionsResponse(transactions=items)

    async def _split(
        self,
        method: str,
        keys: Sequence[str],
        timeout_s: float,
        *,
        build: Callable[[list[str]], Message],
        answer: type[Answer],
        items_of: Callable[[Answer], Iterable[GroupResult]],
        item_type: Callable[..., GroupResult],
        key_type: int = GROUP,
        key_field: str = "group_id",
    ) -> list[GroupResult]:
        """Per-key items of ``method`` over every key's coordinator, in request order (a key
        is the item's ``key_field``, located with ``key_type``). ``answer`` is the type of
        ``method``'s response, for the type checker only (the generated stubs carry no
        types)."""
        deadline = time.monotonic() + timeout_s
        pending = list(dict.fromkeys(keys))
        results: dict[str, GroupResult] = {}
        final: set[str] = set()

        def fail(ids: Iterable[str], code: common_pb2.ErrorCode, message: str) -> None:
            for key in ids:
                results[key] = item_type(**{key_field: key}, error_code=code, error_message=message)

        async def locate(key: str) -> tuple[int, str] | _NotFound:
            try:
                return await self._locate(key, deadline, key_type)
            except _NotFound as exc:
                return exc

        async def send(address: str, ids: list[str]) -> None:
            remaining = max(deadline - time.monotonic(), 0.001)
            try:
                response: Answer = await getattr(self._service(key_type, address), method)(
                    build(ids), timeout=remaining
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                for key in ids:
                    self._forget(key, key_type)
                fail(ids, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"coordinator {address}")
                return
            for item in items_of(response):
                key = getattr(item, key_field)
                results[key] = item
                if item.error_code in _MOVED:
                    self._forget(key, key_type)

        attempt = 0
        while pending:
            found = await asyncio.gather(*(locate(g) for g in pending))
            by_address: dict[str, list[str]] = {}
            for key, where in zip(pending, found, strict=True):
                if isinstance(where, _NotFound):
                    fail([key], where.code, where.message)
                    if where.final:
                        final.add(key)
                else:
                    by_address.setdefault(where[1], []).append(key)
            await asyncio.gather(*(send(a, ids) for a, ids in by_address.items()))
            pending = [
                g
                for g in pending
                if g not in results
                or (g not in final and results[g].error_code in COORDINATOR_MOVING)
            ]
            delay = _backoff(attempt)
            if not pending or time.monotonic() + delay >= deadline:
                break
            attempt += 1
            await asyncio.sleep(delay)
        for key in pending:
            if key not in results:
                fail([key], ErrorCode.COORDINATOR_NOT_AVAILABLE, "deadline passed")
        return [results[k] for k in keys]

    async def close(self) -> None:
        for entry in self._channels.values():
            await entry.channel.close()
        self._channels.clear()
