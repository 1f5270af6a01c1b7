"""grpc.aio server interceptors: tracing, request logging, metrics and error mapping.

Each interceptor wraps the whole life of an RPC in an async context manager (its ``scope``),
for all four handler kinds: unary and streaming responses alike, the scope closes when the
handler returns, raises or is cancelled. A streaming-response handler written as an async
generator is driven by the wrapper with ``context.write``, so every scope runs in the RPC's own
task and context (contextvars, the current span). Synchronous handlers are served unwrapped:
Strom servicers are ``async``.

``default_interceptors`` gives the chain ``GrpcServer`` installs, outermost first:

1. ``TracingInterceptor``: extracts W3C ``traceparent`` from the metadata and runs the handler
   in a SERVER span named ``package.Service/Method``;
2. ``RequestLoggingInterceptor``: binds ``rpc`` and ``peer`` to the structlog context and logs
   start and end at debug level;
3. ``MetricsInterceptor``: ``rpc.server.duration`` (histogram, ms; its count is the request
   count) with ``rpc.service``, ``rpc.method`` and ``rpc.grpc.status_code`` attributes;
4. ``ErrorMappingInterceptor``: turns an exception escaping the handler into a gRPC status with
   the ``strom-error-code`` trailer (``strom_server.error_status``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import grpc
import grpc.aio
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from structlog.contextvars import bound_contextvars

from strom_server.error_status import status_for_exception
from strom_server.logs import get_logger

__all__ = [
    "ErrorMappingInterceptor",
    "MetricsInterceptor",
    "RequestLoggingInterceptor",
    "RpcInfo",
    "ScopeInterceptor",
    "TracingInterceptor",
    "default_interceptors",
    "final_status",
    "wrap_handler",
]

log = get_logger(__name__)

ScopeFactory = Callable[[grpc.aio.ServicerContext[Any, Any]], AbstractAsyncContextManager[None]]


@dataclass(frozen=True, slots=True)
class RpcInfo:
    """What an interceptor knows about one incoming RPC."""

    method: str
    """Full method path, ``/strom.protocol.v1.StorageNode/ListOffsets``."""
    service: str
    name: str
    kind: str
    """``unary_unary``, ``unary_stream``, ``stream_unary`` or ``stream_stream``."""
    metadata: tuple[tuple[str, str | bytes], ...]

    @classmethod
    def of(cls, details: grpc.HandlerCallDetails, handler: grpc.RpcMethodHandler) -> RpcInfo:
        method: str = details.method  # type: ignore[attr-defined]
        service, _, name = method.lstrip("/").rpartition("/")
        kind = (
            f"{'stream' if handler.request_streaming else 'unary'}_"
            f"{'stream' if handler.response_streaming else 'unary'}"
        )
        metadata = tuple(details.invocation_metadata or ())  # type: ignore[attr-defined]
        return cls(method, service, name, kind, metadata)


def final_status(
    exc: BaseException | None, context: grpc.aio.ServicerContext[Any, Any]
) -> grpc.StatusCode:
    """The status an RPC ends with, seen from a scope around the handler."""
    if exc is None or isinstance(exc, grpc.aio.AbortError):
        code = context.code()
        if isinstance(code, grpc.StatusCode):
            return code
        return grpc.StatusCode.OK if exc is None else grpc.StatusCode.UNKNOWN
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


def _wrap_unary_response(behavior: Callable[..., Any], scope: ScopeFactory) -> Callable[..., Any]:
    if not inspect.iscoroutinefunction(behavior):
        return behavior

    async def wrapper(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async with scope(context):
            return await behavior(request, context)

    return wrapper


def _wrap_stream_response(behavior: Callable[..., Any], scope: ScopeFactory) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(behavior):

        async def write_each(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            async with scope(context):
                responses = behavior(request, context)
                try:
                    async for response in responses:
                        await context.write(response)
                finally:
                    await responses.aclose()

        return write_each
    if inspect.iscoroutinefunction(behavior):

        async def wrapper(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            async with scope(context):
                await behavior(request, context)

        return wrapper
    return behavior


def wrap_handler(handler: grpc.RpcMethodHandler, scope: ScopeFactory) -> grpc.RpcMethodHandler:
    """``handler`` with each call run inside ``scope(context)``."""
    common = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _wrap_unary_response(handler.unary_unary, scope), **common
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _wrap_stream_response(handler.unary_stream, scope), **common
        )
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            _wrap_unary_response(handler.stream_unary, scope), **common
        )
    if handler.stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(
            _wrap_stream_response(handler.stream_stream, scope), **common
        )
    return handler


class ScopeInterceptor(grpc.aio.ServerInterceptor, ABC):
    """An interceptor defined by an async context manager around each RPC."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        info = RpcInfo.of(handler_call_details, handler)
        return wrap_handler(handler, partial(self.scope, info))

    @abstractmethod
    def scope(
        self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AbstractAsyncContextManager[None]:
        """The context manager one RPC runs in."""


class TracingInterceptor(ScopeInterceptor):
    """Continue the caller's trace (W3C traceparent in metadata) in a SERVER span per RPC."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)

    @asynccontextmanager
    async def scope(
        self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[None]:
        carrier = {key: value for key, value in info.metadata if isinstance(value, str)}
        attributes = {"rpc.system": "grpc", "rpc.service": info.service, "rpc.method": info.name}
        with self._tracer.start_as_current_span(
            info.method.lstrip("/"),
            context=propagate.extract(carrier),
            kind=SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            failure: BaseException | None = None
            try:
                yield
            except BaseException as exc:
                failure = exc
                raise
            finally:
                code = final_status(failure, context)
                span.set_attribute("rpc.grpc.status_code", code.value[0])
                if code is not grpc.StatusCode.OK:
                    span.set_status(Status(StatusCode.ERROR, code.name))


class RequestLoggingInterceptor(ScopeInterceptor):
    """Bind ``rpc`` and ``peer`` to the log context; log each RPC at debug level."""

    @asynccontextmanager
    async def scope(
        self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[None]:
        with bound_contextvars(rpc=info.method, peer=context.peer()):
            debug = logging.getLogger(__name__).isEnabledFor(logging.DEBUG)
            if debug:
                log.debug("rpc started", kind=info.kind)
            started = time.perf_counter()
            failure: BaseException | None = None
            try:
                yield
            except BaseException as exc:
                failure = exc
                raise
            finally:
                if debug:
                    log.debug(
                        "rpc finished",
                        status=final_status(failure, context).name,
                        duration_ms=round((time.perf_counter() - started) * 1000, 3),
                    )


class MetricsInterceptor(ScopeInterceptor):
    """A latency histogram per method and status; its count is the request count.

    One instrument only: each OpenTelemetry measurement costs microseconds on every RPC.
    """

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = metrics.get_meter(__name__, meter_provider=meter_provider)
        self._duration = meter.create_histogram(
            "rpc.server.duration",
            unit="ms",
            description="Duration of inbound RPCs, from handler start to its end",
        )

    @asynccontextmanager
    async def scope(
        self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[None]:
        started = time.perf_counter()
        failure: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            failure = exc
            raise
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            code = final_status(failure, context)
            self._duration.record(
                elapsed_ms,
                {
                    "rpc.system": "grpc",
                    "rpc.service": info.service,
                    "rpc.method": info.name,
                    "rpc.grpc.status_code": code.value[0],
                },
            )


class ErrorMappingInterceptor(ScopeInterceptor):
    """An exception escaping a handler becomes a clear status; unexpected ones are logged."""

    @asynccontextmanager
    async def scope(
        self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[None]:
        try:
            yield
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            status = status_for_exception(exc)
            if status.unexpected:
                log.exception("unhandled error in rpc handler", error=type(exc).__name__)
            else:
                log.debug("rpc failed", status=status.code.name, error_code=status.error_code)
            trace.get_current_span().record_exception(exc)
            await context.abort(status.code, status.details, status.trailing_metadata)


def default_interceptors(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> list[grpc.aio.ServerInterceptor]:
    """Tracing, logging, metrics and error mapping, outermost first (None = global providers)."""
    return [
        TracingInterceptor(tracer_provider),
        RequestLoggingInterceptor(),
        MetricsInterceptor(meter_provider),
        ErrorMappingInterceptor(),
    ]
