"""TLS for listeners other than gRPC's (the schema registry's HTTPS, the gateway's Kafka
listener) and for HTTP clients: ``ssl.SSLContext``s built from the same settings as the gRPC
listeners (``ssl.certfile``, ``ssl.keyfile``, ``ssl.cafile``, ``ssl.client.auth``).

``server_context`` re-reads the certificate and key when either file changes, checked at each
new TLS handshake by the gRPC listeners' ``CertificateFiles``: a renewed certificate is served
without a restart. ``client_context`` trusts ``cafile`` and presents a certificate when given
one.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from strom.errors import ConfigurationError
from strom_server.security.tls import CertificateFiles

__all__ = ["client_context", "server_context"]


def _load(files: CertificateFiles, client_auth: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.certfile, files.keyfile)
    if client_auth != "none" and files.cafile is not None:
        context.load_verify_locations(files.cafile)
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return context


def server_context(
    certfile: str, keyfile: str, cafile: str = "", client_auth: str = "none"
) -> ssl.SSLContext:
    """A server's TLS context, reloaded when its files change (module docstring)."""
    for what, name in (("ssl.certfile", certfile), ("ssl.keyfile", keyfile)):
        if not name:
            raise ConfigurationError(f"{what} is required for a TLS listener")
        if not Path(name).is_file():
            raise ConfigurationError(f"{what}: no such file: {name}")
    if client_auth != "none" and not cafile:
        raise ConfigurationError(f"ssl.client.auth={client_auth} needs ssl.cafile")
    files = CertificateFiles(certfile, keyfile, cafile)
    first = _load(files, client_auth)
    current = [first]

    def renew(sock: ssl.SSLObject, _name: str | None, _first: ssl.SSLContext) -> None:
        fresh = files.reload_if_changed(lambda: _load(files, client_auth))
        if fresh is not None:
            current[0] = fresh
        if sock.context is not current[0]:
            sock.context = current[0]

    first.sni_callback = renew  # type: ignore[assignment]
    return first


def client_context(cafile: str = "", certfile: str = "", keyfile: str = "") -> ssl.SSLContext:
    """A client's TLS context trusting ``cafile`` (else the system's CAs), presenting
    ``certfile``/``keyfile`` when given."""
    context = ssl.create_default_context(cafile=cafile or None)
    if certfile:
        context.load_cert_chain(certfile, keyfile or None)
    return context
