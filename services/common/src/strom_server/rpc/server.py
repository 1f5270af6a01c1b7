"""The grpc.aio server every Strom service runs: limits, health, reflection, interceptors,
signals and graceful shutdown.

::

    server = GrpcServer(config, "strom-storage", telemetry=telemetry)
    server.add_service(storage_pb2_grpc.add_StorageNodeServicer_to_server, servicer)
    server.on_shutdown(node.close)          # async hooks, run after RPCs have drained
    await server.serve()                    # start, wait for SIGTERM/SIGINT, stop gracefully

Start binds ``config.listen`` (port 0 = a free port; ``server.port`` has the real one) and logs
a ``listening`` event. Messages above ``config.max_message_size`` are refused by gRPC itself
with RESOURCE_EXHAUSTED. The standard health service (``grpc.health.v1.Health``) reports
SERVING for the server (``""``) and for each added service once started, and NOT_SERVING from
the moment shutdown begins; ``set_serving`` changes one service's status. Server reflection
lists the added services.

Stopping (``stop``, or the first SIGTERM/SIGINT under ``serve``): health goes NOT_SERVING, the
server stops accepting RPCs, in-flight RPCs get ``config.shutdown_grace`` seconds to finish
(a second signal cancels them at once), then the shutdown hooks run, last registered first,
each bounded by the same grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from strom_server.rpc.interceptors import HandlerGuard, RpcObserver
from strom_server.runtime.config import ServerConfig
from strom_server.runtime.logs import get_logger
from strom_server.runtime.stopping import run_hooks, stop_signals
from strom_server.runtime.telemetry import Telemetry
from strom_server.runtime.values import split_host_port

__all__ = ["AddServicerFn", "GrpcServer", "ServicerContext", "ShutdownHook"]

log = get_logger(__name__)

#: What every servicer method receives beside its request (typed once for every service).
ServicerContext: TypeAlias = grpc.aio.ServicerContext

AddServicerFn = Callable[[Any, grpc.aio.Server], None]
"""A generated ``add_XServicer_to_server(servicer, server)`` function."""

ShutdownHook = Callable[[], Awaitable[None]]

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class _ServiceNameRecorder:
    """Stands in for the server while an ``add_*_to_server`` runs: notes the service names and
    hands every method handler to the ``RpcObserver`` (tracing, logs, metrics, errors)."""

    def __init__(self, server: grpc.aio.Server, observer: RpcObserver) -> None:
        self._server = server
        self._observer = observer
        self.names: list[str] = []

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        for handler in handlers:
            service_name = getattr(handler, "service_name", None)
            if callable(service_name):
                self.names.append(service_name())
        self._server.add_generic_rpc_handlers([self._observer.generic(h) for h in handlers])

    def add_registered_method_handlers(self, service_name: str, handlers: Any) -> None:
        self.names.append(service_name)
        observed = {
            name: self._observer.wrap(f"/{service_name}/{name}", handler)
            for name, handler in handlers.items()
        }
        self._server.add_registered_method_handlers(service_name, observed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class GrpcServer:
    """One service process's gRPC server (see the module docstring for its life cycle)."""

    def __init__(
        self,
        config: ServerConfig,
        service_name: str,
        *,
        telemetry: Telemetry | None = None,
        interceptors: Sequence[grpc.aio.ServerInterceptor] | None = None,
        options: Sequence[tuple[str, Any]] = (),
        guard: HandlerGuard | None = None,
        credentials: grpc.ServerCredentials | None = None,
        security: Any = None,
    ) -> None:
        """``telemetry`` None uses the global OpenTelemetry providers; every added service's
        handlers run through an ``RpcObserver``; ``interceptors`` are extra grpc.aio
        interceptors (none by default: each costs per call); ``options`` are extra grpc
        channel arguments. ``guard`` checks every call (authentication, ACLs),
        ``credentials`` secure the listener (None: plaintext), ``security`` is the service's
        ``strom_server.security.ServerSecurity`` (None when security is off), kept for the
        services that serve its parts."""
        self.config = config
        self.service_name = service_name
        self.security = security
        self._credentials = credentials
        self._observer = RpcObserver(
            telemetry.tracer_provider if telemetry else None,
            telemetry.meter_provider if telemetry else None,
            guard,
        )
        self._interceptors = list(interceptors or ())
        self._options = list(options)
        self._pending: list[tuple[AddServicerFn, Any]] = []
        self._service_names: list[str] = []
        self._hooks: list[ShutdownHook] = []
        self._draining_hooks: list[ShutdownHook] = []
        self._health = health.aio.HealthServicer()
        self._server: grpc.aio.Server | None = None
        self._port: int | None = None
        self._stop_requested = asyncio.Event()
        self._stopping: asyncio.Future[None] | None = None
        self._forced: asyncio.Task[None] | None = None
        self._signals = 0

    # --- building ------------------------------------------------------------------------

    def add_service(self, add_to_server: AddServicerFn, servicer: Any) -> None:
        """Serve ``servicer`` through its generated ``add_XServicer_to_server`` function."""
        if self._server is not None:
            raise RuntimeError("add services before the server starts")
        self._pending.append((add_to_server, servicer))

    def on_shutdown(self, hook: ShutdownHook) -> None:
        """Run ``await hook()`` during shutdown, after in-flight RPCs finished or timed out."""
        self._hooks.append(hook)

    def on_draining(self, hook: ShutdownHook) -> None:
        """Run ``await hook()`` when shutdown starts, before in-flight RPCs drain: the place to
        end long-lived streams (they would otherwise hold the drain for the whole grace)."""
        self._draining_hooks.append(hook)

    # --- state ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (the real one when ``listen`` asked for port 0)."""
        if self._port is None:
            raise RuntimeError("the server has not started")
        return self._port

    @property
    def address(self) -> str:
        """``host:port`` with the bound port; connectable when ``listen`` had a concrete host."""
        host, _ = split_host_port(self.config.listen)
        host = host or "0.0.0.0"
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def service_names(self) -> tuple[str, ...]:
        """Fully qualified names of the added services (known once started)."""
        return tuple(self._service_names)

    @property
    def health(self) -> health.aio.HealthServicer:
        return self._health

    async def set_serving(self, service: str, serving: bool) -> None:
        """Report ``service`` (``""`` = the whole server) as SERVING or NOT_SERVING."""
        await self._health.set(service, _SERVING if serving else _NOT_SERVING)

    # --- life cycle ----------------------------------------------------------------------

    async def start(self) -> int:
        """Build, bind and start the server; returns the bound port."""
        if self._server is not None:
            raise RuntimeError("the server was already started")
        size = self.config.max_message_size
        server = grpc.aio.server(
            interceptors=self._interceptors or None,
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                # Two processes must never share a port silently.
                ("grpc.so_reuseport", 0),
                *self._options,
            ],
        )
        self._server = server
        for add_to_server, servicer in self._pending:
            recorder = _ServiceNameRecorder(server, self._observer)
            add_to_server(servicer, recorder)  # type: ignore[arg-type]
            self._service_names.extend(n for n in recorder.names if n not in self._service_names)
        health_pb2_grpc.add_HealthServicer_to_server(
            self._health,
            _ServiceNameRecorder(server, self._observer),  # type: ignore[arg-type]
        )
        reflection.enable_server_reflection(
            [*self._service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
        )
        try:
            if self._credentials is None:
                self._port = server.add_insecure_port(self.config.listen)
            else:
                self._port = server.add_secure_port(self.config.listen, self._credentials)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self.config.listen}: {exc}") from exc
        for name in ("", *self._service_names):
            await self._health.set(name, _NOT_SERVING)
        await server.start()
        for name in ("", *self._service_names):
            await self._health.set(name, _SERVING)
        log.info(
            "listening",
            address=self.address,
            port=self._port,
            services=list(self._service_names),
        )
        return self._port

    def request_stop(self) -> None:
        """Ask ``serve`` to shut down (what SIGTERM does); call it from the event loop."""
        self._stop_requested.set()

    async def serve(self, *, handle_signals: bool = True) -> None:
        """Start (if needed), wait for SIGTERM/SIGINT or ``request_stop``, then ``stop``."""
        if self._server is None:
            await self.start()
        with stop_signals(self._on_signal) if handle_signals else contextlib.nullcontext():
            await self._stop_requested.wait()
            await self.stop()

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info("signal received, shutting down", signal=sig.name)
            self.request_stop()
        elif self._server is not None and self._forced is None:
            log.warning("second signal, cancelling in-flight RPCs", signal=sig.name)
            self._forced = asyncio.get_running_loop().create_task(self._server.stop(0))

    async def stop(self, grace: float | None = None) -> None:
        """Graceful shutdown (see the module docstring); later calls wait for the first one."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop(grace))
        await asyncio.shield(self._stopping)

    async def _stop(self, grace: float | None) -> None:
        grace = self.config.shutdown_grace if grace is None else grace
        log.info("stopping", grace_s=grace)
        await self._health.enter_graceful_shutdown()
        await run_hooks(reversed(self._draining_hooks), grace)
        if self._server is not None:
            await self._server.stop(grace)
        await run_hooks(reversed(self._hooks), grace)
        log.info("stopped")

    async def wait_for_termination(self) -> None:
        """Wait until the underlying gRPC server has terminated."""
        if self._server is not None:
            await self._server.wait_for_termination()

    async def __aenter__(self) -> GrpcServer:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()
