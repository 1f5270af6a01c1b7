"""The backends a secured Kafka listener calls through: one set of routers per authenticated
principal, whose channels carry that principal's login token, so every service's own guard
checks the user's ACLs exactly as for a gRPC client (the listener has no authorizer of its
own). Connections without a principal (PLAINTEXT with the authorizer on) share a set of routers
whose calls carry no token (``User:ANONYMOUS``). The gateway's own routers, which call as
``Service:strom``, are never used for a Kafka request of a secured gateway.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from strom.errors import SaslAuthenticationFailedError
from strom.security import ChannelSecurity
from strom_gateway.kafka.backend import Backend
from strom_gateway.routing.controller import ControllerRouter
from strom_gateway.routing.coordinators import CoordinatorRouter
from strom_gateway.routing.data_path import DataPath

__all__ = ["PrincipalTokens", "Routes", "RoutesFactory", "UserBackends"]


@dataclass
class Routes:
    """A set of the gateway's routers and how to close them."""

    router: ControllerRouter
    coordinators: CoordinatorRouter
    data: DataPath
    close: Callable[[], Awaitable[None]]


#: Builds routers whose channels use the given security (None: the process's own).
RoutesFactory = Callable[[ChannelSecurity | None], Routes]


class PrincipalTokens:
    """One principal's token source: the newest token its connections logged in with (read on
    gRPC's threads, hence the lock). With none valid, calls go out without one and fail."""

    def __init__(self, principal: str, clock: Callable[[], float] = time.time) -> None:
        self.principal = principal
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._expires_at = 0.0

    def update(self, token: str, expires_at: float) -> None:
        with self._lock:
            if expires_at > self._expires_at:
                self._token, self._expires_at = token, expires_at

    @property
    def current(self) -> str | None:
        with self._lock:
            return self._token if self._clock() < self._expires_at else None

    def fetch(self) -> str:
        token = self.current
        if token is None:
            raise SaslAuthenticationFailedError(f"the Kafka session of {self.principal} expired")
        return token


@dataclass
class _Entry:
    backend: Backend
    routes: Routes
    tokens: PrincipalTokens
    connections: int = 0


class UserBackends:
    """Backends per principal, opened on a principal's first connection and closed with its
    last."""

    def __init__(self, base: Backend, routes: RoutesFactory, security: ChannelSecurity) -> None:
        """``base`` gives the listener's address and timeouts; ``security`` the protocol and
        TLS files of the channels (its token source is replaced)."""
        self._base = base
        self._routes = routes
        self._security = security
        self._entries: dict[str, _Entry] = {}
        self._anonymous: _Entry | None = None

    def _backend(self, tokens: PrincipalTokens | None) -> tuple[Backend, Routes]:
        security = copy.copy(self._security)
        security.tokens = tokens
        routes = self._routes(security)
        backend = dataclasses.replace(
            self._base, router=routes.router, coordinators=routes.coordinators, data=routes.data
        )
        return backend, routes

    def anonymous(self) -> Backend:
        """The backend of connections without a principal (calls carry no token)."""
        if self._anonymous is None:
            backend, routes = self._backend(None)
            self._anonymous = _Entry(backend, routes, PrincipalTokens("User:ANONYMOUS"))
        return self._anonymous.backend

    def acquire(self, principal: str, token: str, expires_at: float) -> Backend:
        """``principal``'s backend for one more connection (``release`` it when it closes)."""
        entry = self._entries.get(principal)
        if entry is None:
            tokens = PrincipalTokens(principal)
            backend, routes = self._backend(tokens)
            entry = self._entries[principal] = _Entry(backend, routes, tokens)
        entry.tokens.update(token, expires_at)
        entry.connections += 1
        return entry.backend

    def renew(self, principal: str, token: str, expires_at: float) -> None:
        """A connection of ``principal`` re-authenticated: its calls carry the new token."""
        entry = self._entries.get(principal)
        if entry is not None:
            entry.tokens.update(token, expires_at)

    async def release(self, principal: str) -> None:
        entry = self._entries.get(principal)
        if entry is None:
            return
        entry.connections -= 1
        if entry.connections <= 0:
            del self._entries[principal]
            await entry.routes.close()

    async def close(self) -> None:
        entries = list(self._entries.values())
        if self._anonymous is not None:
            entries.append(self._anonymous)
        self._entries.clear()
        self._anonymous = None
        for entry in entries:
            await entry.routes.close()
