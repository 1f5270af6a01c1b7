"""TLS for services that serve or call HTTP (the schema registry): ``ssl.SSLContext``s built
from the same settings as the gRPC listeners (``ssl.certfile``, ``ssl.keyfile``,
``ssl.cafile``, ``ssl.client.auth``).

``server_context`` re-reads the certificate and key when either file changes, checked at each
new TLS handshake (as ``strom_server.security.tls`` does for gRPC): a renewed certificate is
served without a restart. ``client_context`` trusts ``cafile`` and presents a certificate when
given one.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from strom.errors import ConfigurationError
from strom_server.runtime.logs import get_logger

__all__ = ["client_context", "server_context"]

log = get_logger(__name__)


def _stamp(paths: list[Path]) -> tuple[tuple[int, int], ...]:
    stamps = []
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            stamps.append((0, 0))
        else:
            stamps.append((status.st_mtime_ns, status.st_size))
    return tuple(stamps)


def _load(certfile: str, keyfile: str, cafile: str, client_auth: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    if client_auth != "none":
        context.load_verify_locations(cafile)
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return context


def server_context(
    certfile: str, keyfile: str, cafile: str = "", client_auth: str = "none"
) -> ssl.SSLContext:
    """A server's TLS context, reloaded when its files change (module docstring)."""
    for what, name in (("ssl.certfile", certfile), ("ssl.keyfile", keyfile)):
        if not name:
            raise ConfigurationError(f"{what} is required for an HTTPS listener")
        if not Path(name).is_file():
            raise ConfigurationError(f"{what}: no such file: {name}")
    if client_auth != "none" and not cafile:
        raise ConfigurationError(f"ssl.client.auth={client_auth} needs ssl.cafile")
    paths = [Path(p) for p in (certfile, keyfile, cafile) if p]
    current = {"stamp": _stamp(paths), "context": _load(certfile, keyfile, cafile, client_auth)}

    def renew(sock: ssl.SSLObject, _name: str | None, _first: ssl.SSLContext) -> None:
        stamp = _stamp(paths)
        if stamp != current["stamp"]:
            try:
                current["context"] = _load(certfile, keyfile, cafile, client_auth)
            except (OSError, ssl.SSLError) as exc:  # half-written files: keep the old ones
                log.warning("tls files changed but cannot be read yet", error=str(exc))
            else:
                current["stamp"] = stamp
                log.info("tls certificate reloaded", files=[str(p) for p in paths])
        context = current["context"]
        assert isinstance(context, ssl.SSLContext)
        if sock.context is not context:
            sock.context = context

    first = current["context"]
    assert isinstance(first, ssl.SSLContext)
    first.sni_callback = renew  # type: ignore[assignment]
    return first


def client_context(cafile: str = "", certfile: str = "", keyfile: str = "") -> ssl.SSLContext:
    """A client's TLS context trusting ``cafile`` (else the system's CAs), presenting
    ``certfile``/``keyfile`` when given."""
    context = ssl.create_default_context(cafile=cafile or None)
    if certfile:
        context.load_cert_chain(certfile, keyfile or None)
    return context
