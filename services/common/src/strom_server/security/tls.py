"""TLS for a service's listener, its certificate and key re-read when the files change.

``listener_credentials(...)`` gives grpc's dynamic TLS credentials: at each new connection grpc
asks for the current certificate configuration, and the files' modification times and sizes
decide whether to read them again, so a renewed certificate is served without a restart.
With ``client_auth="required"`` a client must present a certificate signed by ``cafile``
(its CN may then be the caller's principal); ``"requested"`` asks for one without requiring
it. SASL_PLAINTEXT uses grpc's local credentials: loopback connections only, for tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import grpc

from strom.errors import ConfigurationError
from strom_server.runtime.logs import get_logger

__all__ = ["CertificateFiles", "listener_credentials"]

log = get_logger(__name__)
Loaded = TypeVar("Loaded")


class CertificateFiles:
    """A certificate, key and optional CA, read again when any of them changes."""

    def __init__(self, certfile: str, keyfile: str, cafile: str = "") -> None:
        for what, name in (("ssl.certfile", certfile), ("ssl.keyfile", keyfile)):
            if not name:
                raise ConfigurationError(f"{what} is required for a TLS listener")
        self.paths = [Path(p) for p in (certfile, keyfile, cafile) if p]
        for path in self.paths:
            if not path.is_file():
                raise ConfigurationError(f"no such file: {path}")
        self._certfile, self._keyfile = Path(certfile), Path(keyfile)
        self._cafile = Path(cafile) if cafile else None
        self._stamp = self._stamps()

    def _stamps(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for path in self.paths:
            try:
                status = os.stat(path)
            except OSError:
                stamps.append((0, 0))
            else:
                stamps.append((status.st_mtime_ns, status.st_size))
        return tuple(stamps)

    def configuration(self) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(self._keyfile.read_bytes(), self._certfile.read_bytes())],
            root_certificates=self._cafile.read_bytes() if self._cafile else None,
        )

    @property
    def certfile(self) -> Path:
        return self._certfile

    @property
    def keyfile(self) -> Path:
        return self._keyfile

    @property
    def cafile(self) -> Path | None:
        return self._cafile

    def changed_configuration(self) -> grpc.ServerCertificateConfiguration | None:
        """A new configuration when a file changed since the last read, else None."""
        return self.reload_if_changed(self.configuration)

    def reload_if_changed(self, load: Callable[[], Loaded]) -> Loaded | None:
        """``load()`` when a file changed since the last read, else None (also when the
        changed files cannot be loaded yet: the old ones keep being served)."""
        stamp = self._stamps()
        if stamp == self._stamp:
            return None
        try:
            loaded = load()
        except (OSError, ValueError) as exc:  # half-written files: keep serving the old ones
            log.warning("tls files changed but cannot be read yet", error=str(exc))
            return None
        self._stamp = stamp
        log.info("tls certificate reloaded", files=[str(p) for p in self.paths])
        return loaded


def listener_credentials(
    protocol: str, certfile: str, keyfile: str, cafile: str, client_auth: str
) -> grpc.ServerCredentials | None:
    """A listener's credentials for ``protocol`` (None: PLAINTEXT)."""
    protocol = protocol.upper()
    if protocol == "PLAINTEXT":
        return None
    if protocol == "SASL_PLAINTEXT":
        return grpc.local_server_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    if client_auth != "none" and not cafile:
        raise ConfigurationError(f"ssl.client.auth={client_auth} needs ssl.cafile")
    files = CertificateFiles(certfile, keyfile, cafile if client_auth != "none" else "")
    return grpc.dynamic_ssl_server_credentials(
        files.configuration(),
        files.changed_configuration,
        require_client_authentication=client_auth == "required",
    )
