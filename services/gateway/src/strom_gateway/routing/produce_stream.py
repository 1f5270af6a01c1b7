"""ProduceStream through the gateway: pipelined, in order.

A client keeps several produce requests in flight on one stream. For each client stream the
gateway keeps one upstream ProduceStream per leader and sends each request's share to its
leader in arrival order, so the order a leader sees per partition is the client's order (what
an idempotent producer's sequence numbers expect). Routing happens as each request is read;
answers are awaited concurrently and leave in request order. A share whose leader answers a
retriable leadership error, or whose upstream stream broke, is retried through
``DataPath.produce_partitions`` (unary, new leader) within the deadline.

A request may also come written in pieces (``RawProduce``, the Kafka listener's: its record
bytes never become a message): this relay is the one place it is grouped by leader, and each
leader's share, and each retry, is written from those pieces, never parsed.

Memory: each request holds its size in the ``ByteBudget`` until its response has left, and
reading stops while the budget is spent or ``MAX_IN_FLIGHT`` requests are pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, cast

import grpc
import structlog

from strom.protocol.v1 import common_pb2, storage_pb2
from strom_gateway.routing.data_path import DataPath, produce_error, produce_share
from strom_gateway.routing.leaders import RETRY_CODES, PartitionItem

log = structlog.get_logger(__name__)

__all__ = ["MAX_IN_FLIGHT", "ProduceStreamRelay", "RawProduce"]

#: Requests one client stream may have in flight through the gateway (as a storage node).
MAX_IN_FLIGHT = 32


@dataclass(frozen=True, slots=True)
class RawProduce:
    """A ProduceRequest's partitions' (topic, partition), in order, and how its bytes are
    written: ``write(indexes)`` serializes the request of those partitions (a leader's share,
    or all of them), ``size`` is the whole request's length."""

    items: Sequence[PartitionItem]
    write: Callable[[Sequence[int]], bytes]
    size: int
    correlation_id: int = 0


#: What a relay takes: a request message, or one written in pieces.
AnyProduce: TypeAlias = storage_pb2.ProduceRequest | RawProduce


def _share(request: AnyProduce, indexes: Sequence[int]) -> storage_pb2.ProduceRequest | bytes:
    """What goes upstream for the partitions ``indexes`` of ``request`` (all of them: the
    request itself, when it is a message)."""
    if isinstance(request, RawProduce):
        return request.write(indexes)
    if len(indexes) == len(request.partitions):
        return request
    return produce_share(request, [request.partitions[i] for i in indexes])


class _Upstream:
    """One ProduceStream to one leader; answers matched to requests by order."""

    def __init__(self, call: grpc.aio.StreamStreamMultiCallable) -> None:
        self._requests: asyncio.Queue[storage_pb2.ProduceRequest | bytes | None]
        self._requests = asyncio.Queue()
        self._waiting: deque[asyncio.Future[storage_pb2.ProduceResponse]] = deque()
        self.broken = False
        self._call = call(self._outgoing())
        self._reader = asyncio.ensure_future(self._read())

    async def _outgoing(self) -> AsyncIterator[storage_pb2.ProduceRequest | bytes]:
        while (request := await self._requests.get()) is not None:
            yield request

    def send(
        self, request: storage_pb2.ProduceRequest | bytes
    ) -> asyncio.Future[storage_pb2.ProduceResponse]:
        """``request``: a message, or its serialized bytes."""
        future: asyncio.Future[storage_pb2.ProduceResponse]
        future = asyncio.get_running_loop().create_future()
        if self.broken:
            future.set_exception(ConnectionError("the upstream stream has ended"))
            return future
        self._waiting.append(future)
        self._requests.put_nowait(request)
        return future

    async def _read(self) -> None:
        problem: BaseException = ConnectionError("the leader ended the stream")
        try:
            async for response in self._call:
                if self._waiting:
                    self._waiting.popleft().set_result(response)
        except grpc.aio.AioRpcError as exc:
            problem = exc
        except asyncio.CancelledError:
            problem = ConnectionError("the gateway closed the stream")
        self.broken = True
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(problem)
                future.exception()  # retrieved by whoever awaits; never "unhandled"

    async def close(self) -> None:
        self._requests.put_nowait(None)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(1.0):
                await asyncio.shield(self._reader)
        self._call.cancel()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


class ProduceStreamRelay:
    """Serves one client ProduceStream."""

    def __init__(self, data: DataPath, *, timeout_s: float) -> None:
        self._data = data
        self._timeout_s = timeout_s
        self._upstreams: dict[str, _Upstream] = {}

    def _upstream(self, address: str) -> _Upstream:
        upstream = self._upstreams.get(address)
        if upstream is None or upstream.broken:
            call = self._data.router.produce_stream(address)
            upstream = self._upstreams[address] = _Upstream(call)
        return upstream

    async def run(
        self, requests: AsyncIterator[AnyProduce]
    ) -> AsyncIterator[storage_pb2.ProduceResponse]:
        pending: asyncio.Queue[tuple[asyncio.Task[storage_pb2.ProduceResponse], int] | None]
        pending = asyncio.Queue(MAX_IN_FLIGHT)
        budget = self._data.budget

        async def read() -> None:
            try:
                async for request in requests:
                    size = request.size if isinstance(request, RawProduce) else request.ByteSize()
                    await budget.acquire(size)
                    try:
                        task = await self._dispatch(request)
                    except BaseException:
                        budget.release(size)
                        raise
                    await pending.put((task, size))
            finally:
                await pending.put(None)

        reader = asyncio.ensure_future(read())
        try:
            while (entry := await pending.get()) is not None:
                task, size = entry
                try:
                    response = await task
                finally:
                    budget.release(size)
                yield response
            await reader
        finally:
            reader.cancel()
            while not pending.empty():
                left = pending.get_nowait()
                if left is not None:
                    left[0].cancel()
                    budget.release(left[1])
            await asyncio.gather(*(u.close() for u in self._upstreams.values()))

    async def _dispatch(self, request: AnyProduce) -> asyncio.Task[storage_pb2.ProduceResponse]:
        """Send the request's shares to their leaders now (keeping order); the task awaits
        the answers."""
        deadline = time.monotonic() + self._timeout_s
        router = self._data.router
        items = request.items if isinstance(request, RawProduce) else list(request.partitions)
        by_leader, final, retry = await router.group(items, range(len(items)), deadline)
        sent: list[tuple[list[int], asyncio.Future[storage_pb2.ProduceResponse]]] = []
        for address, indexes in by_leader.items():
            sent.append((indexes, self._upstream(address).send(_share(request, indexes))))
        later = [i for i, _, _ in retry]
        errors = {i: (code, message) for i, code, message in final}
        return asyncio.ensure_future(
            self._complete(request, items, sent, later, errors, deadline=deadline)
        )

    async def _complete(
        self,
        request: AnyProduce,
        items: Sequence[PartitionItem],
        sent: list[tuple[list[int], asyncio.Future[storage_pb2.ProduceResponse]]],
        later: list[int],
        errors: dict[int, tuple[common_pb2.ErrorCode, str]],
        *,
        deadline: float,
    ) -> storage_pb2.ProduceResponse:
        results: list[storage_pb2.ProducePartitionResult | None] = [None] * len(items)
        for i, (code, message) in errors.items():
            results[i] = produce_error(items[i], code, message)
        retry = list(later)
        for indexes, future in sent:
            try:
                response = await future
            except (grpc.aio.AioRpcError, ConnectionError) as exc:
                log.debug("upstream produce stream failed", error=str(exc))
                retry.extend(indexes)
                continue
            answers = _matched(items, indexes, response)
            whole = len(sent) == 1 and not retry and not errors and len(indexes) == len(items)
            if whole and len(response.partitions) == len(items) and not _retriable(answers):
                return response
            for i, answer in zip(indexes, answers, strict=True):
                results[i] = answer
                if answer.error_code in RETRY_CODES:
                    retry.append(i)
        if retry:
            self._data.router.metadata.mark_stale({items[i].topic for i in retry})
            again = sorted(retry)
            retried = await self._data.produce_partitions(
                items, again, lambda indexes: _share(request, indexes), deadline
            )
            for i, result in zip(again, retried, strict=True):
                results[i] = result
        # Every slot is filled by now: by an answer, an error or a retry's answer.
        return storage_pb2.ProduceResponse(
            correlation_id=request.correlation_id,
            partitions=cast(list[storage_pb2.ProducePartitionResult], results),
        )


def _retriable(answers: Sequence[storage_pb2.ProducePartitionResult]) -> bool:
    return any(p.error_code in RETRY_CODES for p in answers)


def _matched(
    items: Sequence[PartitionItem],
    indexes: Sequence[int],
    response: storage_pb2.ProduceResponse,
) -> Sequence[storage_pb2.ProducePartitionResult]:
    """The leader's answers to the partitions ``indexes`` of ``items`` it was sent, in that
    order: its own list when it has one answer per partition (in request order, as a leader
    answers); otherwise each partition's answer found by name, and NETWORK_EXCEPTION for one
    it left out (whether that was appended is unknown: the client may retry it, as after a
    lost connection)."""
    answers = response.partitions
    if len(answers) == len(indexes):
        return answers
    sent = [(items[i].topic, items[i].partition) for i in indexes]
    by_name = {(a.topic, a.partition): a for a in answers}
    log.warning("leader answered other partitions than sent", sent=len(sent), got=len(answers))
    matched = []
    for i, tp in zip(indexes, sent, strict=True):
        answer = by_name.get(tp)
        if answer is None:
            message = (
                f"the leader answered {len(answers)} of the {len(sent)} partitions it was sent, "
                f"not {tp[0]}-{tp[1]}"
            )
            answer = produce_error(items[i], common_pb2.NETWORK_EXCEPTION, message)
        matched.append(answer)
    return matched
