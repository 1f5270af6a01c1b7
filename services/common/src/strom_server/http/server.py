"""``HttpServer``: an ASGI app (Starlette) served by uvicorn on the running event loop, on a
socket this process binds (port 0 picks a free port; ``port`` has the bound one), with the
service's ``ssl.SSLContext`` (``strom_server.http.tls``) when it speaks HTTPS.

``stop`` stops accepting connections, lets in-flight requests finish for ``grace_s`` seconds
and then cancels them; ``stop(force=True)`` cancels them at once. uvicorn's own signal
handling and lifespan protocol are not used: the runner handles the signals, the service its
start and close (``strom_server.runner.run_http_service``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import ssl
from typing import Any

import uvicorn

from strom_server.runtime.logs import get_logger
from strom_server.runtime.values import split_host_port

__all__ = ["HttpServer"]

log = get_logger(__name__)


class HttpServer:
    """One HTTP(S) listener serving one ASGI app (module docstring)."""

    def __init__(
        self, listen: str, *, tls: ssl.SSLContext | None = None, grace_s: float = 5.0
    ) -> None:
        self.listen = listen
        self.tls = tls
        self.grace_s = grace_s
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, app: Any) -> int:
        """Bind and serve ``app``; the bound port. ``OSError`` when the address is taken."""
        sock = _listening_socket(*split_host_port(self.listen))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=max(1, math.ceil(self.grace_s)),
        )
        config.load()
        config.ssl = self.tls  # the service's context (reloaded certificates, client auth)
        server = self._server = uvicorn.Server(config)
        # serve() without uvicorn's signal handlers (the runner's) and lifespan (off).
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[sock])
        self._task = asyncio.create_task(self._run(server, sock))
        return self.port

    @staticmethod
    async def _run(server: uvicorn.Server, sock: socket.socket) -> None:
        await server.main_loop()
        await server.shutdown(sockets=[sock])

    def force(self) -> None:
        """Cancel in-flight requests now (a stop under way stops waiting for them)."""
        if self._server is not None:
            self._server.force_exit = True

    async def stop(self, *, force: bool = False) -> None:
        """Stop serving (module docstring); idempotent."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        if force:
            self.force()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def _listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket. Made with its protocol named (IPPROTO_TCP), as asyncio
    makes its own: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on accepted sockets
    whose protocol says TCP, and with it on every response written in two parts (uvicorn
    writes the head, then the body) waited ~40 ms for the client's delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock
