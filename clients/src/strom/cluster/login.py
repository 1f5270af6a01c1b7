"""Logging in: a SCRAM exchange with the gateway's ``Security/Authenticate`` for a token, and
``ScramLogin``, the token source of SASL clients.

``ScramLogin`` logs in when a call first needs a token (on a thread of its own: gRPC asks for
call credentials off the event loop), and again in the background once 80% of the token's
lifetime has passed, so calls never wait for a refresh. A failed login is remembered with its
reason, which the server's answer then quotes (SASL_AUTHENTICATION_FAILED).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import grpc

from strom.cluster.transport import translate_errors
from strom.errors import SaslAuthenticationFailedError, StromError, for_code
from strom.protocol.v1 import security_pb2, security_pb2_grpc
from strom.security.channels import ChannelSecurity
from strom.security.config import SecurityConfig
from strom.security.scram import ScramClient

__all__ = ["ScramLogin", "client_security", "login"]

# Log in again when this share of a token's lifetime has passed.
_REFRESH_AT = 0.8
# How long a refused login is answered from memory.
_REFUSED_S = 1.0


def login(
    channel: grpc.Channel, mechanism: str, username: str, password: str, timeout_s: float
) -> tuple[str, float, str]:
    """One SCRAM exchange over a (synchronous) ``channel`` to a gateway: (token, lifetime in
    s, principal). SaslAuthenticationFailedError (or the server's error) when it fails."""
    stub = security_pb2_grpc.SecurityStub(channel)
    scram = ScramClient(mechanism, username, password)
    with translate_errors("login"):
        first: security_pb2.AuthenticateResponse = stub.Authenticate(
            security_pb2.AuthenticateRequest(mechanism=scram.mechanism, message=scram.first()),
            timeout=timeout_s,
        )
        if first.error_code:
            raise for_code(first.error_code, first.error_message)
        final: security_pb2.AuthenticateResponse = stub.Authenticate(
            security_pb2.AuthenticateRequest(
                mechanism=scram.mechanism,
                message=scram.final(first.message),
                session_id=first.session_id,
            ),
            timeout=timeout_s,
        )
    if final.error_code:
        raise for_code(final.error_code, final.error_message)
    scram.verify(final.message)
    return final.token, final.token_lifetime_ms / 1000, final.principal


class ScramLogin:
    """A token source logging in with SCRAM (see the module docstring). Thread-safe."""

    def __init__(
        self, config: SecurityConfig, gateways: Sequence[str], *, timeout_s: float = 30.0
    ) -> None:
        if not config.sasl:
            raise ValueError("ScramLogin needs a SASL security protocol")
        self._config = config
        self._gateways = list(gateways)
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires = 0.0
        self._refresh_at = 0.0
        self._refreshing = False
        self._refused: tuple[SaslAuthenticationFailedError, float] | None = None
        self.principal = ""
        self.error = ""
        self._transport = ChannelSecurity(
            config.security_protocol,
            cafile=config.ssl_cafile,
            certfile=config.ssl_certfile,
            keyfile=config.ssl_keyfile,
        )

    @property
    def current(self) -> str | None:
        """The token when valid (starting a background refresh when due), else None."""
        now = time.monotonic()
        token = self._token
        if token is None or now >= self._expires:
            return None
        if now >= self._refresh_at and not self._refreshing:
            self._refreshing = True
            threading.Thread(target=self._refresh, name="strom-login", daemon=True).start()
        return token

    def fetch(self) -> str:
        """A valid token, logging in first when needed (blocks). After a refused login the
        same refusal is repeated for a second without asking the server again (the server
        throttles failed logins anyway)."""
        with self._lock:
            if self._token is not None and time.monotonic() < self._expires:
                return self._token
            if self._refused is not None and time.monotonic() < self._refused[1]:
                raise SaslAuthenticationFailedError(str(self._refused[0]))
            try:
                return self._login()
            except SaslAuthenticationFailedError as exc:
                self._refused = (exc, time.monotonic() + _REFUSED_S)
                raise

    def _refresh(self) -> None:
        try:
            with self._lock:
                self._login()
        except StromError:
            pass  # the current token stays until it expires; the next call tries again
        finally:
            self._refreshing = False

    def _login(self) -> str:
        error: StromError | None = None
        credentials = self._transport.transport_credentials()
        for target in self._gateways:
            channel = (
                grpc.secure_channel(target, credentials)
                if credentials is not None
                else grpc.insecure_channel(target)
            )
            try:
                token, lifetime, principal = login(
                    channel,
                    self._config.sasl_mechanism,
                    self._config.sasl_plain_username or "",
                    self._config.sasl_plain_password or "",
                    self._timeout_s,
                )
            except SaslAuthenticationFailedError as exc:
                self.error = str(exc)
                raise
            except StromError as exc:
                error = exc
                continue
            finally:
                channel.close()
            now = time.monotonic()
            self._token, self.principal, self.error = token, principal, ""
            self._expires = now + lifetime * 0.98
            self._refresh_at = now + lifetime * _REFRESH_AT
            return token
        assert error is not None
        self.error = str(error)
        raise error


def client_security(config: SecurityConfig, bootstrap_servers: Sequence[str]) -> ChannelSecurity:
    """The channel security of a client with these options: TLS files, and a ``ScramLogin``
    to the bootstrap servers when the protocol is SASL_*."""
    tokens = ScramLogin(config, bootstrap_servers) if config.sasl else None
    return ChannelSecurity(
        config.security_protocol,
        cafile=config.ssl_cafile,
        certfile=config.ssl_certfile,
        keyfile=config.ssl_keyfile,
        tokens=tokens,
    )
