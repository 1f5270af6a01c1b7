"""The server side of logging in: SCRAM exchanges (two steps, state kept between them) that
end with a signed token, and the throttling of failed logins.

Plain Python over a ``credentials`` lookup (user -> stored SCRAM credentials) and a
``TokenIssuer``; the gateway's Security servicer only translates messages. An unknown user
and a wrong password fail the same way, at the same step. After ``FREE_FAILURES`` failures in a
row for one user, each further attempt first waits (0.1 s doubling, up to ``MAX_DELAY_S``);
a success resets the count.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from strom.errors import IllegalSaslStateError, SaslAuthenticationFailedError
from strom.security.scram import ScramCredential, ScramServerExchange
from strom_server.security import audit
from strom_server.security.tokens import TokenIssuer

__all__ = ["FREE_FAILURES", "MAX_DELAY_S", "LoginResult", "LoginThrottle", "ScramAuthenticator"]

FREE_FAILURES = 5
MAX_DELAY_S = 5.0
_SESSION_TTL_S = 30.0
_MAX_SESSIONS = 10_000

CredentialLookup = Callable[[str], Awaitable[list[ScramCredential]]]


@dataclass(frozen=True, slots=True)
class LoginResult:
    server_final: bytes
    token: str
    lifetime_s: float
    principal: str


class LoginThrottle:
    """Failed logins per user, audited: after ``FREE_FAILURES`` in a row each further attempt
    first waits (0.1 s doubling, up to ``MAX_DELAY_S``); a success resets the count."""

    def __init__(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._sleep = sleep
        self._failures: dict[str, int] = {}

    async def wait(self, user: str) -> None:
        """Wait out ``user``'s delay, if any."""
        failures = self._failures.get(user, 0)
        if failures >= FREE_FAILURES:
            await self._sleep(min(0.1 * 2 ** (failures - FREE_FAILURES), MAX_DELAY_S))

    def failed(self, user: str, host: str, reason: str) -> None:
        self._failures[user] = self._failures.get(user, 0) + 1
        audit.login_failed(user, host, reason)

    def succeeded(self, user: str) -> None:
        self._failures.pop(user, None)


class ScramAuthenticator:
    """SCRAM sessions and tokens (see the module docstring)."""

    def __init__(
        self,
        credentials: CredentialLookup,
        issuer: TokenIssuer,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``sleep`` waits out a throttled attempt (injected: tests need not wait)."""
        self._credentials = credentials
        self._issuer = issuer
        self._throttle = LoginThrottle(sleep)
        self._sessions: OrderedDict[str, tuple[ScramServerExchange, float]] = OrderedDict()

    async def first(self, mechanism: str, client_first: bytes, host: str) -> tuple[str, bytes]:
        """Step 1: (session id, server-first-message)."""
        exchange = ScramServerExchange(mechanism)
        user = exchange.parse_first(client_first)
        await self._throttle.wait(user)
        stored = [c for c in await self._credentials(user) if c.mechanism == exchange.mechanism]
        server_first = exchange.server_first(stored[0] if stored else None)
        self._expire()
        session = secrets.token_urlsafe(18)
        self._sessions[session] = (exchange, time.monotonic() + _SESSION_TTL_S)
        return session, server_first

    async def final(self, session: str, client_final: bytes, host: str) -> LoginResult:
        """Step 2: check the proof; the server-final-message and a token."""
        self._expire()
        found = self._sessions.pop(session, None)
        if found is None:
            raise IllegalSaslStateError("unknown or expired SCRAM session; start again")
        exchange = found[0]
        try:
            server_final = exchange.verify_final(client_final)
        except SaslAuthenticationFailedError:
            self._throttle.failed(exchange.username, host, "wrong password or unknown user")
            await self._throttle.wait(exchange.username)
            raise SaslAuthenticationFailedError(
                "authentication failed: invalid credentials"
            ) from None
        self._throttle.succeeded(exchange.username)
        principal = f"User:{exchange.username}"
        token = self._issuer.issue(principal)
        return LoginResult(server_final, token, self._issuer.lifetime_s, principal)

    def _expire(self) -> None:
        now = time.monotonic()
        while self._sessions:
            key, (_, deadline) = next(iter(self._sessions.items()))
            if deadline > now and len(self._sessions) <= _MAX_SESSIONS:
                break
            del self._sessions[key]
