"""The secured Kafka listener's gate: which protocol it speaks, SASL before anything else, and
which backend (whose calls carry which principal's token) serves a connection's requests.

``KafkaSecurity.admit`` runs in the listener's read loop, in request order, before a request
is dispatched: on a SASL connection it answers SaslHandshake and SaslAuthenticate itself and
closes the connection on any other request before authentication (or after the session
expired), as Kafka brokers do. Without SASL (PLAINTEXT with the authorizer on) requests are
served as ``User:ANONYMOUS``.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import Any

import structlog

from strom.errors import ConfigurationError, ErrorCode
from strom_gateway.kafka.backend import Backend, CallFailed
from strom_gateway.kafka.listener import Admission, Connection
from strom_gateway.kafka.principals import UserBackends
from strom_gateway.kafka.protocol.frames import Request
from strom_gateway.kafka.protocol.messages import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from strom_gateway.kafka.protocol.schema import Api
from strom_gateway.kafka.sasl import SaslServer, SaslSession

log = structlog.get_logger(__name__)

__all__ = [
    "KAFKA_PROTOCOLS",
    "KafkaSecurity",
    "authorized_as_user",
    "backend_of",
    "listener_protocol",
    "no_sasl_authenticate",
    "no_sasl_handshake",
    "refused_among_unknown",
]

#: The protocols the Kafka listener serves, by the gateway's ``security.protocol``.
KAFKA_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")

_SESSION = "sasl"
BACKEND = "backend"


def listener_protocol(security_protocol: str) -> str:
    """The Kafka listener's protocol: the gateway's own (``SSL`` without SASL is refused: the
    listener could not tell the backend services who the caller is)."""
    protocol = security_protocol.upper()
    if protocol not in KAFKA_PROTOCOLS:
        raise ConfigurationError(
            f"the Kafka listener cannot serve security.protocol={protocol}: "
            f"use one of {', '.join(KAFKA_PROTOCOLS)} (or turn the listener off)"
        )
    return protocol


def _host(peer: str) -> str:
    return peer.rpartition(":")[0].strip("[]") or peer


class KafkaSecurity:
    """The gate of a secured listener (see the module docstring)."""

    def __init__(
        self, sasl: SaslServer | None, backends: UserBackends, tls: ssl.SSLContext | None
    ) -> None:
        self.sasl = sasl
        self.backends = backends
        self.tls = tls

    def opened(self, connection: Connection) -> None:
        if self.sasl is None:
            connection.state[BACKEND] = self.backends.anonymous()
        else:
            connection.state[_SESSION] = self.sasl.session(_host(connection.peer))

    async def closed(self, connection: Connection) -> None:
        session: SaslSession | None = connection.state.get(_SESSION)
        if session is not None and session.login is not None and BACKEND in connection.state:
            await self.backends.release(session.login.principal)

    async def close(self) -> None:
        await self.backends.close()

    def admits(self, api_key: int, connection: Connection) -> bool:
        """Whether a request of ``api_key`` may be served now (logged when not: the listener
        then closes the connection)."""
        session: SaslSession | None = connection.state.get(_SESSION)
        if session is None or session.admits(api_key):
            return True
        log.info(
            "kafka request refused; closing the connection",
            api_key=api_key,
            reason="session expired" if session.authenticated else "not authenticated",
            peer=connection.peer,
            connection=connection.id,
        )
        return False

    async def admit(self, request: Request, connection: Connection) -> Admission | None:
        """None: dispatch ``request``; else what to answer and whether to close."""
        session: SaslSession | None = connection.state.get(_SESSION)
        if session is None:
            return None
        key = request.api.key
        if not self.admits(key, connection):
            return Admission(None, close=True)
        if key == SASL_HANDSHAKE.key:
            return Admission(session.handshake(request.body["mechanism"]))
        if key == SASL_AUTHENTICATE.key:
            before = session.login
            body, close = await session.authenticate(bytes(request.body["auth_bytes"]))
            login = session.login
            if close:
                log.info("kafka authentication failed", peer=connection.peer,
                         error=body["error_message"], connection=connection.id)  # fmt: skip
            elif login is not None and login is not before:
                if before is None:
                    connection.state[BACKEND] = self.backends.acquire(
                        login.principal, login.token, login.expires_at
                    )
                    log.info("kafka client authenticated", principal=login.principal,
                             mechanism=login.mechanism, peer=connection.peer)  # fmt: skip
                else:
                    self.backends.renew(login.principal, login.token, login.expires_at)
            return Admission(body, close=close)
        return None


def authorized_as_user(connection: Connection) -> bool:
    """Whether ``connection``'s requests reach the services as its user (whose ACLs they
    check, refusing a whole request for one topic it may not use)."""
    return BACKEND in connection.state


async def refused_among_unknown(
    backend: Backend, connection: Connection, topics: Iterable[str]
) -> set[str]:
    """Of ``topics`` answered UNKNOWN_TOPIC_OR_PARTITION (a user's routers do not see topics it
    may not describe), those its user may not describe: Kafka answers them
    TOPIC_AUTHORIZATION_FAILED, whether they exist or not. One Metadata call, as the user."""
    names = sorted(set(topics))
    if not names or not authorized_as_user(connection):
        return set()
    try:
        answer = await backend.metadata(names)
    except CallFailed:
        return set()
    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return {t.name for t in answer.topics if t.error_code == refused}


def backend_of(connection: Connection, default: Backend, *, secured: bool, api: Api) -> Backend:
    """The backend serving ``connection``: ``default`` on an unsecured listener, else its
    principal's (the gate admits nothing else before one is set; ApiVersions needs none)."""
    found: Backend | None = connection.state.get(BACKEND)
    if found is not None:
        return found
    if secured and api.key != API_VERSIONS.key:
        raise PermissionError(f"{api.name} reached a secured listener's handler unauthenticated")
    return default


async def no_sasl_handshake(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    """SaslHandshake on a listener without SASL: no mechanism is enabled."""
    return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}


async def no_sasl_authenticate(
    backend: Backend, request: Request, connection: Connection
) -> dict[str, Any]:
    """SaslAuthenticate on a listener without SASL."""
    message = "this listener does not use SASL"
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": message,
            "auth_bytes": b"", "session_lifetime_ms": 0}  # fmt: skip
