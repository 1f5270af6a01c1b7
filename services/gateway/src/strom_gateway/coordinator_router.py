"""Forward group RPCs to the group coordinators registered in etcd.

- FindCoordinator goes to any live coordinator (round robin; another one on UNAVAILABLE).
- ListGroups goes to every coordinator; the answers are merged (one entry per group id).
- DescribeGroups and DeleteGroups are split by each group's coordinator and merged back in
  request order.
- Every other group RPC goes to the group's coordinator, found with FindCoordinator and cached.

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
from typing import Protocol, TypeAlias, TypeVar, cast

import grpc
import structlog
from google.protobuf.message import Message

from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2, coordinator_pb2, coordinator_pb2_grpc
from strom_server.rpc.channels import open_channel

log = structlog.get_logger(__name__)

__all__ = [
    "COORDINATOR_ERRORS",
    "CoordinatorRouter",
    "CoordinatorSource",
    "GroupRequest",
    "error_response",
]

RETRY_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)
#: Answers that mean "ask again, perhaps elsewhere".
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)
#: Of those, the ones after which the cached coordinator of the group is forgotten.
_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
NO_COORDINATOR = "no group coordinator is registered in etcd"

#: The requests ``CoordinatorRouter.call`` sends to the coordinator of their ``group_id``.
GroupRequest: TypeAlias = (
    coordinator_pb2.JoinGroupRequest
    | coordinator_pb2.SyncGroupRequest
    | coordinator_pb2.HeartbeatRequest
    | coordinator_pb2.LeaveGroupRequest
    | coordinator_pb2.OffsetCommitRequest
    | coordinator_pb2.OffsetFetchRequest
    | coordinator_pb2.OffsetDeleteRequest
)


class _GroupResult(Protocol):
    """A per-group entry of a DescribeGroups or DeleteGroups answer."""

    @property
    def group_id(self) -> str: ...

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
        return self.code not in COORDINATOR_ERRORS or self.message == NO_COORDINATOR


def error_response(
    method: str, request: Message, code: common_pb2.ErrorCode, message: str
) -> Message:
    """The response of ``method`` that answers ``request`` with ``code`` everywhere."""
    pb = coordinator_pb2
    # ``method`` names the request's kind: the casts below only tell the type checker.
    if method == "OffsetCommit":
        commit = cast(pb.OffsetCommitRequest, request)
        return pb.OffsetCommitResponse(
            partitions=[
                pb.OffsetCommitPartitionResult(
                    topic=p.topic, partition=p.partition, error_code=code, error_message=message
                )
                for p in commit.partitions
            ]
        )
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
    response: Message = getattr(pb, f"{method}Response")(error_code=code, error_message=message)
    return response


def coordinator_error(response: Message) -> int | None:
    """The coordinator-level error of a response (top level or any item), if any."""
    code = getattr(response, "error_code", 0)
    if code in COORDINATOR_ERRORS:
        return int(code)
    for field, value in response.ListFields():
        if field.message_type is not None and field.is_repeated:
            for item in value:
                item_code = getattr(item, "error_code", 0)
                if item_code in COORDINATOR_ERRORS:
                    return int(item_code)
    return None


def _backoff(attempt: int) -> float:
    return RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]


class CoordinatorRouter:
    """Calls GroupCoordinator RPCs on the right coordinator instance."""

    def __init__(
        self,
        source: CoordinatorSource,
        *,
        max_message_size: int,
        lookup_timeout_s: float = 15.0,
        cache_size: int = 10000,
    ) -> None:
        self.source = source
        self._max_message_size = max_message_size
        self._lookup_timeout_s = lookup_timeout_s
        self._cache_size = cache_size
        self._channels: dict[
            str, tuple[grpc.aio.Channel, coordinator_pb2_grpc.GroupCoordinatorStub]
        ]
        self._channels = {}
        #: group id -> (coordinator id, host:port), least recently used first
        self._coordinators: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self._round_robin = itertools.count()

    def _stub(self, address: str) -> coordinator_pb2_grpc.GroupCoordinatorStub:
        entry = self._channels.get(address)
        if entry is None:
            channel = open_channel(address, max_message_size=self._max_message_size)
            entry = (channel, coordinator_pb2_grpc.GroupCoordinatorStub(channel))
            self._channels[address] = entry
        return entry[1]

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

    async def _locate(self, group_id: str, deadline: float) -> tuple[int, str]:
        """(coordinator id, host:port) of ``group_id``; raises _NotFound."""
        cached = self._coordinators.get(group_id)
        if cached is not None and cached[0] in self.source.addresses:
            self._coordinators.move_to_end(group_id)
            return cached
        response = await self._find_on_any(
            coordinator_pb2.FindCoordinatorRequest(group_id=group_id), deadline
        )
        if response.error_code:
            raise _NotFound(
                response.error_code, response.error_message or ErrorCode.Name(response.error_code)
            )
        node = response.coordinator
        found = (node.node_id, f"{node.host}:{node.port}")
        self._coordinators[group_id] = found
        if len(self._coordinators) > self._cache_size:
            self._coordinators.popitem(last=False)
        return found

    def _forget(self, group_id: str) -> None:
        self._coordinators.pop(group_id, None)

    # -- one group ----------------------------------------------------------------------------

    async def call(self, method: str, request: GroupRequest, timeout_s: float) -> Message:
        """``method(request)`` on the coordinator of ``request.group_id``, retried on coordinator
        errors until ``timeout_s`` passes. The answer is ``<method>Response`` (the generated
        stubs carry no types to say so)."""
        group_id: str = request.group_id
        deadline = time.monotonic() + timeout_s
        attempt = 0
        last: Message  # set by every attempt that does not return
        while True:
            address = "?"
            try:
                _, address = await self._locate(group_id, deadline)
                response: Message = await getattr(self._stub(address), method)(
                    request, timeout=max(deadline - time.monotonic(), 0.001)
                )
            except _NotFound as exc:
                if exc.final:
                    return error_response(method, request, exc.code, exc.message)
                last = error_response(method, request, exc.code, exc.message)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                self._forget(group_id)
                last = error_response(
                    method,
                    request,
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"coordinator {address}: {exc.code().name} {exc.details()}",
                )
            else:
                code = coordinator_error(response)
                if code is None:
                    return response
                if code in _MOVED:
                    self._forget(group_id)
                last = response
            delay = _backoff(attempt)
            if time.monotonic() + delay >= deadline:
                return last
            attempt += 1
            log.debug("retrying a group call", method=method, group_id=group_id)
            await asyncio.sleep(delay)

    # -- every coordinator --------------------------------------------------------------------

    async def list_groups(
        self, request: coordinator_pb2.ListGroupsRequest, timeout_s: float
    ) -> coordinator_pb2.ListGroupsResponse:
        addresses = await self._live()
        if not addresses:
            return coordinator_pb2.ListGroupsResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=NO_COORDINATOR
            )
        answers = await asyncio.gather(
            *(self._stub(a).ListGroups(request, timeout=timeout_s) for a in addresses),
            return_exceptions=True,
        )
        merged = coordinator_pb2.ListGroupsResponse()
        seen: set[str] = set()
        for address, answer in zip(addresses, answers, strict=True):
            if isinstance(answer, grpc.aio.AioRpcError):
                if not merged.error_code:
                    merged.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                    merged.error_message = f"coordinator {address}: {answer.code().name}"
                continue
            if isinstance(answer, BaseException):
                raise answer
            if answer.error_code and not merged.error_code:
                merged.error_code = answer.error_code
                merged.error_message = f"coordinator {address}: {answer.error_message}"
            for group in answer.groups:
                if group.group_id not in seen:
                    seen.add(group.group_id)
                    merged.groups.append(group)
        return merged

    # -- split by group -----------------------------------------------------------------------

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

    async def _split(
        self,
        method: str,
        group_ids: Sequence[str],
        timeout_s: float,
        *,
        build: Callable[[list[str]], Message],
        answer: type[Answer],
        items_of: Callable[[Answer], Iterable[GroupResult]],
        item_type: Callable[..., GroupResult],
    ) -> list[GroupResult]:
        """Per-group items of ``method`` over every group's coordinator, in request order.
        ``answer`` is the type of ``method``'s response, for the type checker only (the
        generated stubs carry no types)."""
        deadline = time.monotonic() + timeout_s
        pending = list(dict.fromkeys(group_ids))
        results: dict[str, GroupResult] = {}
        final: set[str] = set()

        def fail(ids: Iterable[str], code: common_pb2.ErrorCode, message: str) -> None:
            for group_id in ids:
                results[group_id] = item_type(
                    group_id=group_id, error_code=code, error_message=message
                )

        async def locate(group_id: str) -> tuple[int, str] | _NotFound:
            try:
                return await self._locate(group_id, deadline)
            except _NotFound as exc:
                return exc

        async def send(address: str, ids: list[str]) -> None:
            remaining = max(deadline - time.monotonic(), 0.001)
            try:
                response: Answer = await getattr(self._stub(address), method)(
                    build(ids), timeout=remaining
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                for group_id in ids:
                    self._forget(group_id)
                fail(ids, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"coordinator {address}")
                return
            for item in items_of(response):
                results[item.group_id] = item
                if item.error_code in _MOVED:
                    self._forget(item.group_id)

        attempt = 0
        while pending:
            found = await asyncio.gather(*(locate(g) for g in pending))
            by_address: dict[str, list[str]] = {}
            for group_id, where in zip(pending, found, strict=True):
                if isinstance(where, _NotFound):
                    fail([group_id], where.code, where.message)
                    if where.final:
                        final.add(group_id)
                else:
                    by_address.setdefault(where[1], []).append(group_id)
            await asyncio.gather(*(send(a, ids) for a, ids in by_address.items()))
            pending = [
                g
                for g in pending
                if g not in results
                or (g not in final and results[g].error_code in COORDINATOR_ERRORS)
            ]
            delay = _backoff(attempt)
            if not pending or time.monotonic() + delay >= deadline:
                break
            attempt += 1
            await asyncio.sleep(delay)
        for group_id in pending:
            if group_id not in results:
                fail([group_id], ErrorCode.COORDINATOR_NOT_AVAILABLE, "deadline passed")
        return [results[g] for g in group_ids]

    async def close(self) -> None:
        for channel, _ in self._channels.values():
            await channel.close()
        self._channels.clear()
