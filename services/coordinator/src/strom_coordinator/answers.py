"""How the coordinator's servicers (groups and transactions) turn a domain call into a
response: a ``StromError`` becomes the response's error fields (a retriable one that is not a
wire error answers COORDINATOR_NOT_AVAILABLE), anything else UNKNOWN_SERVER_ERROR, logged.

A call whose client goes away (gRPC cancels the handler) still runs to its end, as a Kafka
broker completes a request whose connection closed: cancelled between its log write and its
update of the coordinator's memory, a TxnOffsetCommit left a pending record in the log that no
marker would find, and a commit its write but not its cached offset. Only JoinGroup and
SyncGroup, which wait for the rest of the group, stop with their client."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    StromError,
    UnknownServerError,
)
from strom_server.rpc.errors import error_fields
from strom_server.runtime.logs import get_logger

__all__ = ["answer", "as_broker_error", "top_level_error"]

log = get_logger(__name__)

R = TypeVar("R")


def as_broker_error(error: StromError) -> BrokerResponseError:
    """The wire error for ``error``."""
    if isinstance(error, BrokerResponseError):
        return error
    if error.retriable:
        return CoordinatorNotAvailableError(str(error))
    return UnknownServerError(str(error))


#: RPCs that wait for other members and end with their client.
_ENDS_WITH_CLIENT = frozenset({"JoinGroup", "SyncGroup"})
#: Calls still running after their client went away (strong references until they end).
_orphans: set[asyncio.Future[Any]] = set()


async def answer(
    rpc: str, work: Callable[[], Awaitable[R]], fail: Callable[[BrokerResponseError], R]
) -> R:
    """``work()``'s response, or ``fail(error)``'s when it raises."""
    try:
        if rpc in _ENDS_WITH_CLIENT:
            return await work()
        return await _to_the_end(rpc, work())
    except StromError as e:
        return fail(as_broker_error(e))
    except Exception as e:
        log.exception("coordinator_rpc_failed", rpc=rpc)
        return fail(UnknownServerError(f"{rpc} failed: {type(e).__name__}: {e}"))


def top_level_error(response_type: Callable[..., R]) -> Callable[[BrokerResponseError], R]:
    """A ``fail`` building a response that carries only the top-level error fields."""

    def fail(e: BrokerResponseError) -> R:
        code, message = error_fields(e)
        return response_type(error_code=code, error_message=message)

    return fail


async def _to_the_end(rpc: str, call: Awaitable[R]) -> R:
    """Await ``call``; if this handler is cancelled, ``call`` still completes (logged if it
    fails), though nobody waits for its answer."""
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            _orphans.add(task)
            task.add_done_callback(lambda t: _finished_alone(rpc, t))
        raise


def _finished_alone(rpc: str, task: asyncio.Future[Any]) -> None:
    _orphans.discard(task)
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.info("coordinator_rpc_failed_after_client_left", rpc=rpc, error=str(exc))
