"""TLS on the Kafka listener: the gateway's own ``ssl.certfile``/``ssl.keyfile``/``ssl.cafile``
and ``ssl.client.auth``, the files re-read when they change as its gRPC listener does
(``CertificateFiles``): each new handshake checks their stamps and, when they changed, switches
to a context loaded from the new files (connections already open keep theirs).
"""

from __future__ import annotations

import ssl

from strom.errors import ConfigurationError
from strom_server.security.tls import CertificateFiles

__all__ = ["ReloadingTls", "server_context"]


def server_context(files: CertificateFiles, client_auth: str) -> ssl.SSLContext:
    """A server context (TLS 1.2 at least) serving ``files``; with ``client_auth``
    ``requested``/``required`` it asks for client certificates signed by the CA file."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.certfile, files.keyfile)
    if client_auth != "none":
        if files.cafile is None:
            raise ConfigurationError(f"ssl.client.auth={client_auth} needs ssl.cafile")
        context.load_verify_locations(files.cafile)
        required = client_auth == "required"
        context.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL
    return context


class ReloadingTls:
    """``context`` is what the listener serves: its handshake callback (called for every
    ClientHello, with or without SNI) moves the connection to the newest files' context."""

    def __init__(self, certfile: str, keyfile: str, cafile: str, client_auth: str) -> None:
        self._files = CertificateFiles(certfile, keyfile, cafile if client_auth != "none" else "")
        self._client_auth = client_auth
        self.context = server_context(self._files, client_auth)
        self.context.sni_callback = self._on_hello
        self._current = self.context

    def _load(self) -> ssl.SSLContext:
        return server_context(self._files, self._client_auth)

    def _on_hello(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: object
    ) -> None:
        fresh = self._files.reload_if_changed(self._load)
        if fresh is not None:
            self._current = fresh
        if self._current is not self.context:
            connection.context = self._current
