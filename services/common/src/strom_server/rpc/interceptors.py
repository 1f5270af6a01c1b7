"""The grpc.aio server interceptor of every service: tracing, request logging, metrics and
error mapping, in one wrapper around each RPC.

``RpcObserver`` does, for each call, outermost first:

1. tracing: extracts W3C ``traceparent`` from the metadata and runs the handler in a SERVER
   span named ``package.Service/Method``;
2. request logging: binds ``rpc`` and ``peer`` to the structlog context and logs start and
   end at debug level;
3. metrics: ``rpc.server.duration`` (histogram, ms; its count is the request count) with
   ``rpc.service``, ``rpc.method`` and ``rpc.grpc.status_code`` attributes;
4. error mapping: an exception escaping the handler becomes a gRPC status with the
   ``strom-error-code`` trailer (``strom_server.rpc.errors``); so does a request (or a
   message of a request stream) that does not parse: the wrapped method's deserializer hands
   the failure to the observed call, which raises ``InvalidRequestError("malformed X: ...")``
   (INVALID_ARGUMENT) where grpc itself would answer UNKNOWN.

One plain ``try``/``finally`` rather than four chained interceptors with an async context
manager each: every grpc.aio interceptor layer and generator-based context manager costs
microseconds per RPC, and four of them were a quarter of a storage node's CPU for 16 KiB
produce requests. ``GrpcServer`` does not even install it as an interceptor: it wraps each
method handler as the service is added (``wrap``/``generic``), once per method, so grpc.aio
takes its path without interceptors; ``RpcObserver`` also works as an interceptor.

A streaming-response handler written as an async generator is driven by the wrapper with
``context.write``, so the observation runs in the RPC's own task and context (contextvars, the
current span). Synchronous handlers are served unwrapped: Strom servicers are ``async``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, NoReturn, Protocol

import grpc
import grpc.aio
from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from structlog.contextvars import bind_contextvars, reset_contextvars

from strom.errors import InvalidRequestError
from strom_server.rpc.errors import status_for_exception
from strom_server.runtime.logs import get_logger

__all__ = ["HandlerGuard", "RpcObserver", "end_rpc_span", "final_status", "wrap_handler"]

log = get_logger(__name__)
_debug_gate = logging.getLogger(__name__)  # looked up once: asked on every RPC

#: Runs one call of a handler: (the handler's coroutine, the call's context) -> its result.
Observe = Callable[[Coroutine[Any, Any, Any], grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]
_TRACE_HEADERS = frozenset({"traceparent", "tracestate", "baggage"})


def final_status(
    exc: BaseException | None, context: grpc.aio.ServicerContext[Any, Any]
) -> grpc.StatusCode:
    """The status an RPC ends with, seen from a wrapper around the handler."""
    if exc is None or isinstance(exc, grpc.aio.AbortError):
        code = context.code()
        if isinstance(code, grpc.StatusCode):
            return code
        return grpc.StatusCode.OK if exc is None else grpc.StatusCode.UNKNOWN
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


def end_rpc_span(span: trace.Span, code: grpc.StatusCode) -> None:
    """End an RPC's span (server or client) with its gRPC status; ERROR unless OK."""
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code is not grpc.StatusCode.OK:
        span.set_status(Status(StatusCode.ERROR, code.name))
    span.end()


class _MalformedRequest:
    """What a wrapped method's deserializer returns for bytes that do not parse: the wrapper
    raises ``error`` inside the observed call, so the caller gets INVALID_ARGUMENT with the
    INVALID_REQUEST trailer (grpc itself would answer UNKNOWN, "Unexpected DecodeError")."""

    __slots__ = ("error",)

    def __init__(self, error: InvalidRequestError) -> None:
        self.error = error


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserializer`` returning a ``_MalformedRequest`` instead of raising."""
    if deserializer is None:  # raw bytes: the handler parses them itself
        return None
    descriptor = getattr(getattr(deserializer, "__self__", None), "DESCRIPTOR", None)
    name = getattr(descriptor, "name", "request")

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # protobuf's DecodeError, or whatever a custom one raises
            return _MalformedRequest(InvalidRequestError(f"malformed {name}: {exc}"))

    return deserialize


async def _refuse(error: InvalidRequestError) -> NoReturn:
    raise error


async def _parsed(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A request stream that raises at the first message that did not parse."""
    async for request in requests:
        if isinstance(request, _MalformedRequest):
            raise request.error
        yield request


def _observed_call(
    behavior: Callable[..., Any], request: Any, context: Any, streaming_requests: bool
) -> Any:
    """What the observer runs for one call: the handler's coroutine (or async generator, for
    streamed responses), or a coroutine refusing a (unary) request that did not parse."""
    if streaming_requests:
        return behavior(_parsed(request), context)
    if isinstance(request, _MalformedRequest):
        return _refuse(request.error)
    return behavior(request, context)


def _wrap_unary_response(
    behavior: Callable[..., Any], observe: Observe, streaming_requests: bool
) -> Callable[..., Any] | None:
    if not inspect.iscoroutinefunction(behavior):
        return None

    async def wrapper(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        call = _observed_call(behavior, request, context, streaming_requests)
        return await observe(call, context)

    return wrapper


def _wrap_stream_response(
    behavior: Callable[..., Any], observe: Observe, streaming_requests: bool
) -> Callable[..., Any] | None:
    if inspect.isasyncgenfunction(behavior):

        async def drive(responses: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            if inspect.iscoroutine(responses):  # a refused request: raises
                await responses
            try:
                async for response in responses:
                    await context.write(response)
            finally:
                await responses.aclose()

        async def write_each(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            call = _observed_call(behavior, request, context, streaming_requests)
            await observe(drive(call, context), context)

        return write_each
    if inspect.iscoroutinefunction(behavior):

        async def wrapper(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            call = _observed_call(behavior, request, context, streaming_requests)
            await observe(call, context)

        return wrapper
    return None


def wrap_handler(handler: grpc.RpcMethodHandler, observe: Observe) -> grpc.RpcMethodHandler:
    """``handler`` with each call run through ``observe(coroutine, context)``; a request that
    does not parse is refused inside the observed call (INVALID_ARGUMENT, INVALID_REQUEST).
    Synchronous handlers are returned unchanged."""
    kinds = (
        (handler.unary_unary, _wrap_unary_response, False, grpc.unary_unary_rpc_method_handler),
        (handler.unary_stream, _wrap_stream_response, False, grpc.unary_stream_rpc_method_handler),
        (handler.stream_unary, _wrap_unary_response, True, grpc.stream_unary_rpc_method_handler),
        (
            handler.stream_stream,
            _wrap_stream_response,
            True,
            grpc.stream_stream_rpc_method_handler,
        ),
    )
    for behavior, wrap, streaming_requests, make in kinds:
        if behavior is None:
            continue
        wrapped = wrap(behavior, observe, streaming_requests)
        if wrapped is None:
            return handler
        return make(
            wrapped,
            request_deserializer=_tolerant(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    return handler


class HandlerGuard(Protocol):
    """Wraps a method's handler with checks of each call (``strom_server.security``)."""

    def wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler: ...


class _Method:
    """What stays the same for every call of one method: names and attribute sets."""

    __slots__ = ("_metric_attributes", "method", "name", "service", "span_attributes", "span_name")

    def __init__(self, method: str) -> None:
        self.method = method
        self.span_name = method.lstrip("/")
        self.service, _, self.name = self.span_name.rpartition("/")
        self.span_attributes = {
            "rpc.system": "grpc",
            "rpc.service": self.service,
            "rpc.method": self.name,
        }
        self._metric_attributes: dict[grpc.StatusCode, dict[str, Any]] = {}

    def metric_attributes(self, code: grpc.StatusCode) -> dict[str, Any]:
        found = self._metric_attributes.get(code)
        if found is None:
            found = self._metric_attributes[code] = {
                **self.span_attributes,
                "rpc.grpc.status_code": code.value[0],
            }
        return found


class RpcObserver(grpc.aio.ServerInterceptor):
    """Traces, logs, measures and maps the errors of every RPC (see the module docstring)."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        guard: HandlerGuard | None = None,
    ) -> None:
        """``guard`` (authentication and authorization, ``strom_server.security``) wraps each
        method's handler inside the observation, so its refusals map to statuses too."""
        self._guard = guard
        self._tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(__name__, meter_provider=meter_provider)
        self._duration = meter.create_histogram(
            "rpc.server.duration",
            unit="ms",
            description="Duration of inbound RPCs, from handler start to its end",
        )
        # method -> (the handler grpc resolved, the same wrapped): built once per method.
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        return self.wrap(handler_call_details.method, handler)  # type: ignore[attr-defined]

    def wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """``handler`` of ``method`` (``/package.Service/Method``) observed; one wrapper per
        method and handler, reused for every call."""
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        info = _Method(method)
        guarded = handler if self._guard is None else self._guard.wrap(method, handler)

        async def observe(body: Coroutine[Any, Any, Any], context: Any) -> Any:
            return await self._observe(info, body, context)

        wrapped = wrap_handler(guarded, observe)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def generic(self, handler: grpc.GenericRpcHandler) -> grpc.GenericRpcHandler:
        """A generic handler whose method handlers are observed."""
        return _ObservedGenericHandler(handler, self)

    async def _observe(
        self,
        info: _Method,
        body: Coroutine[Any, Any, Any],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> Any:
        carrier = {
            key: value
            for key, value in context.invocation_metadata() or ()
            if key in _TRACE_HEADERS and isinstance(value, str)
        }
        span = self._tracer.start_span(
            info.span_name,
            context=propagate.extract(carrier) if carrier else None,
            kind=SpanKind.SERVER,
            attributes=info.span_attributes,
        )
        trace_token = otel_context.attach(trace.set_span_in_context(span))
        log_tokens = bind_contextvars(rpc=info.method, peer=context.peer())
        debug = _debug_gate.isEnabledFor(logging.DEBUG)
        if debug:
            log.debug("rpc started")
        started = time.perf_counter()
        failure: BaseException | None = None
        try:
            return await body
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            status = status_for_exception(exc)
            if status.unexpected:
                log.exception("unhandled error in rpc handler", error=type(exc).__name__)
            else:
                log.debug("rpc failed", status=status.code.name, error_code=status.error_code)
            span.record_exception(exc)
            await context.abort(status.code, status.details, status.trailing_metadata)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            code = final_status(failure, context)
            self._duration.record(elapsed_ms, info.metric_attributes(code))
            if debug:
                log.debug("rpc finished", status=code.name, duration_ms=round(elapsed_ms, 3))
            end_rpc_span(span, code)
            reset_contextvars(**log_tokens)
            otel_context.detach(trace_token)


class _ObservedGenericHandler(grpc.GenericRpcHandler):
    def __init__(self, inner: grpc.GenericRpcHandler, observer: RpcObserver) -> None:
        self._inner = inner
        self._observer = observer

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        return self._observer.wrap(handler_call_details.method, handler)  # type: ignore[attr-defined]

    def service_name(self) -> str | None:
        name = getattr(self._inner, "service_name", None)
        return name() if callable(name) else None
