"""How the admin client calls the gateway: once (``call``), a group or transaction coordinator
RPC asked again while the coordinator moves or loads (``group_call``), and a staged-commit RPC,
safe to repeat, asked again after any retriable failure (``staged_call``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from strom.cluster import ClusterClient, translate_errors
from strom.cluster.retry import Deadline
from strom.errors import StromError, StromTimeoutError, for_code, is_retriable
from strom.protocol.v1 import common_pb2
from strom.types import NodeInfo

__all__ = ["RETRY_BACKOFF_S", "AdminCalls", "check", "node_info"]

#: Wait before asking again (a leader or coordinator moved).
RETRY_BACKOFF_S = 0.1

#: Group calls that change nothing: asked again after a retriable failure of the call itself.
READ_GROUP_CALLS = frozenset(
    {
        "FindCoordinator",
        "OffsetFetch",
        "DescribeGroups",
        "ListGroups",
        "ListTransactions",
        "DescribeTransactions",
        "DescribeProducers",
    }
)


def retriable_code(response: Any) -> int:
    """The first retriable error code of a response, top level or per item (0: none)."""
    code = getattr(response, "error_code", 0)
    if code and is_retriable(code):
        return int(code)
    for field, value in response.ListFields():
        if field.message_type is not None and field.is_repeated:
            for item in value:
                item_code = getattr(item, "error_code", 0)
                if item_code and is_retriable(item_code):
                    return int(item_code)
    return 0


def check(items: Iterable[object], describe: str) -> None:
    """Raise the first per-item error of a response."""
    for item in items:
        code = getattr(item, "error_code", 0)
        if code:
            name = getattr(item, "name", "") or getattr(item, "topic", "")
            partition = getattr(item, "partition", None)
            where = (
                f"{name}-{partition}" if partition is not None and describe == "partition" else name
            )
            message = getattr(item, "error_message", "")
            raise for_code(code, f"{where}: {message}" if message else where)


def node_info(node: common_pb2.Node) -> NodeInfo:
    return NodeInfo(node.node_id, node.host, node.port, node.rack)


class AdminCalls:
    """The admin client's calls to the gateway, within its two timeouts."""

    def __init__(self, cluster: ClusterClient, timeout_s: float, api_timeout_s: float) -> None:
        self._cluster = cluster
        self.timeout_s = timeout_s
        """request_timeout_ms, in seconds: one request's deadline."""
        self.api_timeout_s = api_timeout_s
        """default_api_timeout_ms, in seconds: how long a group call asks again."""

    async def call(self, method: str, request: object, timeout_s: float | None = None) -> Any:
        """``method`` of the gateway, once, within ``timeout_s`` (default request_timeout_ms)."""
        with translate_errors(self._cluster.gateway_address):
            return await getattr(self._cluster.gateway, method)(
                request, timeout=self.timeout_s if timeout_s is None else timeout_s
            )

    async def group_call(self, method: str, request: object) -> Any:
        """A group RPC through the gateway, asked again while its answer carries a retriable
        error (a coordinator loading or moving) until default_api_timeout_ms, each request
        within request_timeout_ms; returns the last answer. A read (``READ_GROUP_CALLS``) is
        also asked again after a retriable failure of the call itself (no answer in time: the
        coordinator paused or unreachable); a change is not, as it may have been applied."""
        deadline = Deadline(self.api_timeout_s)
        while True:
            left = max(deadline.left(), 0.001)
            try:
                response = await self.call(method, request, min(self.timeout_s, left))
            except StromError as exc:
                if not (exc.retriable and method in READ_GROUP_CALLS):
                    raise
                if not deadline.allows(RETRY_BACKOFF_S):
                    raise StromTimeoutError(
                        f"{method} not answered within {self.api_timeout_s * 1000:.0f} ms "
                        f"(default_api_timeout_ms; last error: {exc})"
                    ) from exc
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if not retriable_code(response) or not deadline.allows(RETRY_BACKOFF_S):
                return response
            await asyncio.sleep(RETRY_BACKOFF_S)  # retry backoff: the coordinator is moving

    async def staged_call(self, method: str, request: object, what: str) -> Any:
        """``method`` through the gateway, asked again after retriable errors (transport
        errors included: every staged RPC is safe to repeat) until ``request_timeout_ms``;
        raises the answer's error naming ``what``."""
        deadline = Deadline(self.timeout_s)
        while True:
            try:
                response = await self.call(method, request, max(deadline.left(), 0.001))
            except StromError as exc:
                if not exc.retriable or not deadline.allows(RETRY_BACKOFF_S):
                    raise
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            code = response.error_code
            if not code:
                return response
            if not is_retriable(code) or not deadline.allows(RETRY_BACKOFF_S):
                message = response.error_message or common_pb2.ErrorCode.Name(code)
                raise for_code(code, f"{what}: {message}")
            await asyncio.sleep(RETRY_BACKOFF_S)
