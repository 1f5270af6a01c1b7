"""Channels that carry a client's security: TLS credentials and a login token per call.

``ChannelSecurity.channel(target, options)`` opens the grpc.aio channel every client part
uses (the gateway, storage nodes, coordinators): insecure for PLAINTEXT; TLS (``ssl_cafile``
to trust, ``ssl_certfile``/``ssl_keyfile`` for a client certificate) for SSL and SASL_SSL;
loopback-only local credentials for SASL_PLAINTEXT. With SASL, every call carries the current
token as ``authorization: Bearer <token>`` (gRPC call credentials), from a ``TokenSource``:
``ScramLogin`` logs in to the gateway's ``Security/Authenticate`` with SCRAM and logs in again
in the background before the token expires (``strom.cluster.login``). Services use the same
class with their own token source (a token they sign themselves).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import grpc
import grpc.aio

__all__ = [
    "AUTHORIZATION_KEY",
    "LOGIN_ERROR_KEY",
    "ChannelSecurity",
    "TokenSource",
    "default_security",
    "set_default_security",
]

#: The metadata key a token travels in (value ``Bearer <token>``).
AUTHORIZATION_KEY = "authorization"


#: Sent instead of a token when logging in failed: the server quotes it in its refusal.
LOGIN_ERROR_KEY = "strom-login-error"


class TokenSource(Protocol):
    """Where a channel's calls get their token, read on gRPC's threads: ``current`` (fast,
    None when there is no valid token) and ``fetch`` (blocks until there is one, or raises)."""

    @property
    def current(self) -> str | None: ...

    def fetch(self) -> str: ...


class _TokenPlugin(grpc.AuthMetadataPlugin):
    def __init__(self, source: TokenSource) -> None:
        self._source = source

    def __call__(
        self, context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback
    ) -> None:
        token = self._source.current
        if token:
            callback(((AUTHORIZATION_KEY, f"Bearer {token}"),), None)
            return
        # Logging in takes round trips: not on gRPC's own thread.
        threading.Thread(
            target=self._fetch, args=(callback,), name="strom-login", daemon=True
        ).start()

    def _fetch(self, callback: grpc.AuthMetadataPluginCallback) -> None:
        try:
            token = self._source.fetch()
        except Exception as exc:  # the call goes out without a token and is refused
            reason = str(exc).replace("\n", " ")[:300] or type(exc).__name__
            callback(((LOGIN_ERROR_KEY, reason),), None)
            return
        callback(((AUTHORIZATION_KEY, f"Bearer {token}"),), None)


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


class ChannelSecurity:
    """Opens channels with a protocol's credentials (see the module docstring)."""

    def __init__(
        self,
        protocol: str = "PLAINTEXT",
        *,
        cafile: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        tokens: TokenSource | None = None,
    ) -> None:
        self.protocol = protocol.upper()
        self.tokens = tokens
        self._cafile, self._certfile, self._keyfile = cafile, certfile, keyfile

    @classmethod
    def plaintext(cls) -> ChannelSecurity:
        return cls()

    @property
    def enabled(self) -> bool:
        return self.protocol != "PLAINTEXT"

    def transport_credentials(self) -> grpc.ChannelCredentials | None:
        """The channel's transport credentials (None: plaintext). Files are re-read each time,
        so a renewed CA or client certificate is used by the next channel."""
        if self.protocol in ("SSL", "SASL_SSL"):
            return grpc.ssl_channel_credentials(
                root_certificates=_read(self._cafile),
                private_key=_read(self._keyfile),
                certificate_chain=_read(self._certfile),
            )
        if self.protocol == "SASL_PLAINTEXT":
            return grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
        return None

    def credentials(self) -> grpc.ChannelCredentials | None:
        transport = self.transport_credentials()
        if transport is None or self.tokens is None:
            return transport
        call = grpc.metadata_call_credentials(_TokenPlugin(self.tokens), name="strom-token")
        return grpc.composite_channel_credentials(transport, call)

    def channel(
        self,
        target: str,
        options: Sequence[tuple[str, Any]] = (),
        interceptors: Sequence[grpc.aio.ClientInterceptor] | None = None,
    ) -> grpc.aio.Channel:
        """A grpc.aio channel to ``target`` with this security."""
        credentials = self.credentials()
        if credentials is None:
            return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
        return grpc.aio.secure_channel(
            target, credentials, options=options, interceptors=interceptors
        )


_default = ChannelSecurity()


def set_default_security(security: ChannelSecurity) -> None:
    """The security of channels opened without one (a service sets its own at start, so that
    the clients it runs inside, such as a coordinator's ``Admin``, call as the service)."""
    global _default
    _default = security


def default_security() -> ChannelSecurity:
    """What ``set_default_security`` set; plaintext unless a service changed it."""
    return _default
