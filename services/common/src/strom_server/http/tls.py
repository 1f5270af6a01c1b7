"""TLS of an HTTP service, from the security settings every service has: HTTPS for
``security.protocol`` SSL and SASL_SSL (``ssl.certfile``, ``ssl.keyfile``; ``ssl.client.auth``
with ``ssl.cafile`` asks callers for certificates), plain HTTP otherwise. The contexts are
``strom_server.security.http_tls``'s: the certificate is re-read when its files change."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from strom_server.runtime.config import ServerConfig
from strom_server.security.http_tls import client_context, server_context

__all__ = ["HttpTls"]


@dataclass(frozen=True)
class HttpTls:
    """The listener's context (None: plain HTTP) and the one of calls to a peer instance
    (the cluster's CA; this service's certificate when client certificates are asked for)."""

    server: ssl.SSLContext | None = None
    client: ssl.SSLContext | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.server is not None else "http"

    @classmethod
    def of(cls, config: ServerConfig) -> HttpTls:
        """Built from ``config`` (``ConfigurationError`` naming a missing file)."""
        if config.security_protocol not in ("SSL", "SASL_SSL"):
            return cls()
        mtls = config.ssl_client_auth != "none"
        return cls(
            server_context(
                config.ssl_certfile, config.ssl_keyfile, config.ssl_cafile, config.ssl_client_auth
            ),
            client_context(
                config.ssl_cafile,
                config.ssl_certfile if mtls else "",
                config.ssl_keyfile if mtls else "",
            ),
        )
