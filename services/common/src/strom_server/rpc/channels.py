"""Service-to-service gRPC channels that carry the trace context.

``open_channel`` makes a ``grpc.aio`` channel (plaintext, or TLS with the service's token once
``strom_server.security`` has called ``configure``) with Strom's message-size limits and
the client-side tracing interceptors: each call runs in a CLIENT span (a child of the span
current when the call starts) whose W3C ``traceparent`` is injected into the call metadata, so
the callee's ``RpcObserver`` continues the same trace. Use ``tracing_interceptors`` to add the
same to a channel built elsewhere.

A hot path can do without the interceptors (``traced=False``: each grpc.aio client
interceptor costs ~50-100 us per call here) and pass ``metadata=trace_metadata()`` on its
calls instead: the callee's span is then the child of the caller's current span, with no
CLIENT span between them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc
import grpc.aio
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from strom.cluster import channel_options
from strom.security import ChannelSecurity, default_security, set_default_security
from strom_server.rpc.interceptors import end_rpc_span
from strom_server.runtime.values import MiB

__all__ = [
    "PeerChannel",
    "channel_security",
    "configure",
    "open_channel",
    "trace_metadata",
    "tracing_interceptors",
]


class _TracingMixin:
    """Start a CLIENT span per call and put its context into the outgoing metadata."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)
        self._pending: set[asyncio.Task[None]] = set()

    def _start(self, details: grpc.aio.ClientCallDetails) -> tuple[trace.Span, Any]:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        service, _, name = method.lstrip("/").rpartition("/")
        span = self._tracer.start_span(
            method.lstrip("/"),
            kind=SpanKind.CLIENT,
            attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": name},
        )
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        for key, value in trace_metadata(trace.set_span_in_context(span)):
            metadata[key] = value
        new_details = grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )
        return span, new_details

    def _end_when_done(self, span: trace.Span, call: Any) -> Any:
        if not hasattr(call, "add_done_callback"):
            span.end()
            return call

        async def finish(done: Any) -> None:
            try:
                code = await done.code()
            except Exception:  # the call object failed to report; the span still ends
                code = grpc.StatusCode.UNKNOWN
            end_rpc_span(span, code)

        def on_done(done: Any) -> None:
            task = asyncio.get_running_loop().create_task(finish(done))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

        call.add_done_callback(on_done)
        return call


class _UnaryUnary(_TracingMixin, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        # Awaited here and the response returned (grpc.aio allows it): the span ends in line,
        # without a done callback and a task per call as the streaming kinds need.
        span, details = self._start(details)
        code = grpc.StatusCode.UNKNOWN
        try:
            response = await (await continuation(details, request))
            code = grpc.StatusCode.OK
            return response
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            raise
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        finally:
            end_rpc_span(span, code)


class _UnaryStream(_TracingMixin, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        span, details = self._start(details)
        return self._end_when_done(span, await continuation(details, request))


class _StreamUnary(_TracingMixin, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Any, details: Any, request_iterator: Any
    ) -> Any:
        span, details = self._start(details)
        return self._end_when_done(span, await continuation(details, request_iterator))


class _StreamStream(_TracingMixin, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Any, details: Any, request_iterator: Any
    ) -> Any:
        span, details = self._start(details)
        return self._end_when_done(span, await continuation(details, request_iterator))


def tracing_interceptors(
    tracer_provider: trace.TracerProvider | None = None,
) -> list[grpc.aio.ClientInterceptor]:
    """One tracing interceptor per call kind (grpc.aio files each under exactly one kind)."""
    return [
        _UnaryUnary(tracer_provider),
        _UnaryStream(tracer_provider),
        _StreamUnary(tracer_provider),
        _StreamStream(tracer_provider),
    ]


def trace_metadata(context: Context | None = None) -> tuple[tuple[str, str], ...]:
    """A trace context (the current one by default) as gRPC metadata (W3C ``traceparent``/
    ``tracestate``)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return tuple(carrier.items())


def configure(security: ChannelSecurity) -> None:
    """Make every channel opened from now on use ``security`` (TLS and the service's token:
    ``strom_server.security`` sets it at start; plaintext until then), including the clients
    a service runs (``strom.cluster.ClusterClient``, ``strom.Admin``)."""
    set_default_security(security)


def channel_security() -> ChannelSecurity:
    """The security every service-to-service channel of this process uses."""
    return default_security()


def open_channel(
    target: str,
    *,
    max_message_size: int = 64 * MiB,
    tracer_provider: trace.TracerProvider | None = None,
    options: Sequence[tuple[str, Any]] = (),
    traced: bool = True,
    security: ChannelSecurity | None = None,
) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel to ``target`` (``host:port``), insecure unless the process's
    security says otherwise (``configure``); with ``traced`` every call gets a CLIENT span and
    propagates the trace (else see ``trace_metadata``). ``security`` replaces the process's
    (the gateway's Kafka listener calls as the user it authenticated)."""
    return (security or default_security()).channel(
        target,
        options=[*channel_options(max_message_size), *options],
        interceptors=tracing_interceptors(tracer_provider) if traced else None,
    )


class PeerChannel:
    """One channel to a peer whose address may change (a leader, the active controller):
    ``get`` reopens it when the address differs, closing the old one in the background."""

    def __init__(self) -> None:
        self._channel: grpc.aio.Channel | None = None
        self._address = ""
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        return self._address

    def get(self, address: str) -> grpc.aio.Channel:
        if self._channel is None or address != self._address:
            self._retire()
            self._channel = open_channel(address)
            self._address = address
        return self._channel

    def _retire(self) -> None:
        if self._channel is not None:
            task = asyncio.ensure_future(self._channel.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            self._channel = None

    async def close(self) -> None:
        self._retire()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
