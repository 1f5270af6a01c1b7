"""SASL on the Kafka listener: SaslHandshake then SaslAuthenticate, the session's lifetime and
re-authentication (KIP-368), as plain Python over the gateway's ``ScramAuthenticator``.

The SCRAM mechanisms are the gRPC login's exchange itself (the same users in etcd, the same
throttling of failed attempts, the same signed token at the end). PLAIN (offered only over
TLS) is checked against the stored SCRAM credential by running that exchange inside the
gateway with the password the client sent. A successful login gives the connection its
principal and the token its backend calls carry; the session ends a little before the token
expires (``session_margin_s``), so that no request is sent on with a token about to expire,
and SaslAuthenticate v1+ tells the client when (``session_lifetime_ms``). A client that
re-authenticates in time keeps its connection; after the session's end, any request other than
the SASL ones closes it.

One ``SaslSession`` per connection: ``admits`` says whether a request may be served now,
``handshake`` and ``authenticate`` answer the two APIs (a failure also says to close).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strom.errors import (
    BrokerResponseError,
    ErrorCode,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
)
from strom.security.scram import ScramClient
from strom_gateway.kafka.protocol.messages import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from strom_server.security.authentication import CredentialLookup, ScramAuthenticator

__all__ = ["PLAIN", "PRE_AUTHENTICATION_APIS", "SCRAM", "Login", "SaslServer", "SaslSession"]

SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN = "PLAIN"
#: What a connection may ask before it has authenticated (anything else closes it).
PRE_AUTHENTICATION_APIS = frozenset({API_VERSIONS.key, SASL_HANDSHAKE.key, SASL_AUTHENTICATE.key})
_FAILED = "authentication failed: invalid credentials"


def session_margin_s(lifetime_s: float) -> float:
    """How long before its token expires a session ends: a tenth of the lifetime, at most 30 s."""
    return min(lifetime_s / 10, 30.0)


@dataclass(frozen=True, slots=True)
class Login:
    """A connection's authenticated session."""

    principal: str
    mechanism: str
    token: str
    #: When the session ends, in ``time.time()`` seconds (before the token expires: services
    #: check it against the same clock).
    expires_at: float
    lifetime_ms: int


class SaslServer:
    """What every connection's session shares: the authenticator and the mechanisms."""

    def __init__(
        self,
        authenticator: ScramAuthenticator,
        credentials: CredentialLookup,
        *,
        plain: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``credentials`` looks a user's stored SCRAM credentials up (PLAIN picks one of its
        mechanisms); ``plain`` offers PLAIN (only over TLS)."""
        self.authenticator = authenticator
        self.credentials = credentials
        self.mechanisms = (*SCRAM, PLAIN) if plain else SCRAM
        self.clock = clock

    def session(self, host: str) -> SaslSession:
        return SaslSession(self, host)


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": b"",
            "session_lifetime_ms": 0}  # fmt: skip


class SaslSession:
    """One connection's SASL state (see the module docstring)."""

    def __init__(self, server: SaslServer, host: str) -> None:
        self._server = server
        self._host = host
        self.login: Login | None = None
        #: The mechanism a handshake chose and the authentication not yet finished.
        self._mechanism: str | None = None
        self._scram_session: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.login is not None

    def expired(self) -> bool:
        return self.login is not None and self._server.clock() >= self.login.expires_at

    def admits(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be served now: the SASL ones and ApiVersions
        always, the rest only within an unexpired session."""
        if api_key in PRE_AUTHENTICATION_APIS:
            return True
        return self.login is not None and not self.expired()

    def handshake(self, mechanism: str) -> dict[str, Any]:
        """SaslHandshake: choose ``mechanism`` (again, to re-authenticate)."""
        mechanisms = list(self._server.mechanisms)
        if mechanism not in mechanisms:
            self._mechanism = None
            code = ErrorCode.UNSUPPORTED_SASL_MECHANISM
            return {"error_code": code, "mechanisms": mechanisms}
        if self.login is not None and mechanism != self.login.mechanism:
            # KIP-368: re-authentication keeps the mechanism (and the principal).
            self._mechanism = None
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
        self._mechanism = mechanism
        self._scram_session = None
        return {"error_code": 0, "mechanisms": mechanisms}

    async def authenticate(self, auth_bytes: bytes) -> tuple[dict[str, Any], bool]:
        """SaslAuthenticate: (the response body, whether to close the connection after it)."""
        mechanism = self._mechanism
        if mechanism is None:
            message = "SaslAuthenticate before a successful SaslHandshake"
            return _error(ErrorCode.ILLEGAL_SASL_STATE, message), True
        try:
            if mechanism == PLAIN:
                return self._finish(await self._plain(auth_bytes)), False
            if self._scram_session is None:
                session, server_first = await self._server.authenticator.first(
                    mechanism, auth_bytes, self._host
                )
                self._scram_session = session
                return {"error_code": 0, "error_message": None, "auth_bytes": server_first,
                        "session_lifetime_ms": 0}, False  # fmt: skip
            session, self._scram_session = self._scram_session, None
            result = await self._server.authenticator.final(session, auth_bytes, self._host)
            return self._finish((result.principal, result.token, result.lifetime_s,
                                 result.server_final)), False  # fmt: skip
        except BrokerResponseError as exc:
            self._mechanism = self._scram_session = None
            return _error(int(exc.code), str(exc) or _FAILED), True
        except (UnicodeDecodeError, ValueError) as exc:
            self._mechanism = self._scram_session = None
            message = f"malformed {mechanism} message: {exc}"
            return _error(ErrorCode.SASL_AUTHENTICATION_FAILED, message), True

    def _finish(self, result: tuple[str, str, float, bytes]) -> dict[str, Any]:
        principal, token, lifetime_s, server_final = result
        previous, mechanism = self.login, self._mechanism
        assert mechanism is not None
        self._mechanism = None
        if previous is not None and previous.principal != principal:
            raise IllegalSaslStateError(
                f"re-authentication as {principal} on a connection of {previous.principal}"
            )
        session_s = lifetime_s - session_margin_s(lifetime_s)
        lifetime_ms = int(session_s * 1000)
        self.login = Login(
            principal, mechanism, token, self._server.clock() + session_s, lifetime_ms
        )
        return {"error_code": 0, "error_message": None, "auth_bytes": server_final,
                "session_lifetime_ms": lifetime_ms}  # fmt: skip

    async def _plain(self, auth_bytes: bytes) -> tuple[str, str, float, bytes]:
        """PLAIN (``authzid NUL user NUL password``) as a SCRAM exchange run here with the
        password, so that it is checked, throttled and tokened like any login."""
        parts = auth_bytes.decode("utf-8").split("\0")
        if len(parts) != 3 or not parts[1]:
            raise SaslAuthenticationFailedError("malformed PLAIN message")
        authorization, user, password = parts
        if authorization and authorization != user:
            raise SaslAuthenticationFailedError("PLAIN: authorizing as another user is refused")
        stored = {c.mechanism for c in await self._server.credentials(user)}
        mechanism = next((m for m in SCRAM if m in stored), SCRAM[0])
        client = ScramClient(mechanism, user, password)
        authenticator = self._server.authenticator
        session, server_first = await authenticator.first(mechanism, client.first(), self._host)
        result = await authenticator.final(session, client.final(server_first), self._host)
        return result.principal, result.token, result.lifetime_s, b""
