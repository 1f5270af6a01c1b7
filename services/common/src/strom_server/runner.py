"""The ``main`` of every service: config, logging, telemetry, server, ``asyncio.run``.

A service's ``__main__.py``::

    from strom_server.runner import run_service

    async def build(config: StorageConfig, server: GrpcServer) -> None:
        node = await StorageNode.open(config)
        server.add_service(add_StorageNodeServicer_to_server, StorageServicer(node))
        server.on_shutdown(node.close)

    def main() -> None:
        raise SystemExit(run_service(StorageConfig, "strom-storage", build))

An HTTP service (the web console, the schema registry) calls ``run_http_service`` with a
``build(config, http)`` that returns its ASGI app (None: stopped while starting) and adds its
hooks to the ``HttpService`` (``strom_server.http.service``): TLS from its security settings,
signals and graceful stop as a gRPC service's.

Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT included), 1 when start-up or serving
failed (the error is logged), 2 for a configuration error (printed to stderr), 130 for Ctrl-C
during start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from strom.errors import ConfigurationError
from strom_server.etcd.store import configure_tls as configure_etcd_tls
from strom_server.http.service import HttpService
from strom_server.http.tls import HttpTls
from strom_server.rpc.server import GrpcServer
from strom_server.runtime.allocator import tune_allocator
from strom_server.runtime.config import ServerConfig, config_items, load_config
from strom_server.runtime.gc_tuning import tune_gc
from strom_server.runtime.logs import configure_logging, get_logger
from strom_server.runtime.telemetry import Telemetry, setup_telemetry
from strom_server.security.setup import ServerSecurity

__all__ = [
    "BuildFn",
    "HttpBuildFn",
    "run_http_service",
    "run_main",
    "run_service",
    "serve_config",
    "serve_http",
]

log = get_logger(__name__)


class ServiceSettings(Protocol):
    """What the runner reads of a service's settings (``ServerConfig`` has it all; the console
    its own subset)."""

    @property
    def log_level(self) -> str: ...

    @property
    def log_format(self) -> str: ...

    @property
    def metrics_listen(self) -> str: ...

    @property
    def listen(self) -> str: ...


C = TypeVar("C", bound=ServerConfig)
S = TypeVar("S", bound=ServiceSettings)
BuildFn = Callable[[C, GrpcServer], Awaitable[None]]
"""Adds servicers and shutdown hooks to the server; may open resources (logs, etcd leases)."""
HttpBuildFn = Callable[[S, HttpService], Awaitable[Any]]
"""Returns the service's ASGI app (None: stopped while starting) and adds its hooks."""


def _configure_etcd(config: ServerConfig) -> None:
    """etcd over TLS when ``etcd.ssl.cafile`` is set (before any ``EtcdStore`` is made)."""
    if config.etcd_ssl_cafile:
        configure_etcd_tls(config.etcd_ssl_cafile, config.ssl_certfile, config.ssl_keyfile)


async def serve_config(
    config: C,
    service_name: str,
    build: BuildFn[C],
    *,
    telemetry: Telemetry | None = None,
    handle_signals: bool = True,
    freeze_gc: bool = False,
) -> None:
    """Build the server for ``config`` and serve it until a signal (or ``request_stop``);
    ``freeze_gc`` (a service process) tunes the garbage collector once built."""
    _configure_etcd(config)
    security = await ServerSecurity.start(config)
    server = GrpcServer(
        config,
        service_name,
        telemetry=telemetry,
        guard=security.guard if security else None,
        credentials=security.credentials if security else None,
        security=security,
    )
    if security is not None:
        server.on_shutdown(security.close)
    await build(config, server)
    if freeze_gc:
        tune_gc()
    await server.serve(handle_signals=handle_signals)


async def serve_http(
    config: S, service_name: str, build: HttpBuildFn[S], *, handle_signals: bool = True
) -> None:
    """Build the HTTP service for ``config`` and serve it until a signal (or
    ``request_stop``); when ``config`` has the settings every service has, etcd's TLS, the
    listener's TLS and the shutdown grace from them."""
    tls, grace = HttpTls(), 5.0
    if isinstance(config, ServerConfig):
        _configure_etcd(config)
        tls, grace = HttpTls.of(config), config.shutdown_grace
    http = HttpService(service_name, config.listen, tls=tls, grace_s=grace)
    signals = http.signals() if handle_signals else contextlib.nullcontext()
    with signals:
        try:
            app = await build(config, http)
            if app is not None:
                await http.serve(app)
        finally:
            await http.close()


def run_main(
    config_cls: type[S],
    service_name: str,
    main: Callable[[S, Telemetry], Coroutine[Any, Any, None]],
    *,
    argv: Sequence[str] | None = None,
    description: str | None = None,
) -> int:
    """Parse settings, set up logging and telemetry, ``asyncio.run(main(config, telemetry))``;
    returns the process exit code (module docstring). ``run_service`` for a gRPC server,
    ``run_http_service`` for an HTTP one."""
    try:
        config = load_config(config_cls, argv, prog=service_name, description=description)
    except ConfigurationError as exc:
        print(f"{service_name}: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.log_level, config.log_format, service=service_name)
    log.info("starting", config=config_items(config), allocator_tuned=tune_allocator())
    try:
        otlp = getattr(config, "otlp_endpoint", "")
        telemetry = setup_telemetry(service_name, config.metrics_listen, otlp)
    except OSError:
        log.exception("cannot set up telemetry")
        return 1
    try:
        asyncio.run(main(config, telemetry))
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were installed
        log.info("interrupted during start-up")
        return 130
    except Exception:
        log.exception("service failed")
        return 1
    finally:
        telemetry.shutdown()
    return 0


def run_service(
    config_cls: type[C],
    service_name: str,
    build: BuildFn[C],
    *,
    argv: Sequence[str] | None = None,
    description: str | None = None,
) -> int:
    """Parse settings, set up logging and telemetry, serve; returns the process exit code."""

    async def main(config: C, telemetry: Telemetry) -> None:
        await serve_config(config, service_name, build, telemetry=telemetry, freeze_gc=True)

    return run_main(config_cls, service_name, main, argv=argv, description=description)


def run_http_service(
    config_cls: type[S],
    service_name: str,
    build: HttpBuildFn[S],
    *,
    argv: Sequence[str] | None = None,
    description: str | None = None,
) -> int:
    """Parse settings, set up logging and telemetry, serve the HTTP service ``build`` makes;
    returns the process exit code."""

    async def main(config: S, telemetry: Telemetry) -> None:
        await serve_http(config, service_name, build)

    return run_main(config_cls, service_name, main, argv=argv, description=description)
