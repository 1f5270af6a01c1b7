"""How the coordinator's servicers (groups and transactions) turn a domain call into a
response: a ``StromError`` becomes the response's error fields (a retriable one that is not a
wire error answers COORDINATOR_NOT_AVAILABLE), anything else UNKNOWN_SERVER_ERROR, logged."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

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


async def answer(
    rpc: str, work: Callable[[], Awaitable[R]], fail: Callable[[BrokerResponseError], R]
) -> R:
    """``work()``'s response, or ``fail(error)``'s when it raises."""
    try:
        return await work()
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
