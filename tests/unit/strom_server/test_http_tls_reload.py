"""HTTPS certificates (strom_server.security.http_tls): the server context serves the files'
current certificate, re-read at the next handshake after they change, clients without SNI
(an IP address) included; a client context trusts the CA it is given."""

from __future__ import annotations

import shutil
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.errors import ConfigurationError
from strom_server.security.certificates import LocalCa
from strom_server.security.http_tls import client_context, server_context


@pytest.fixture
def ca(tmp_path: Path) -> LocalCa:
    return LocalCa(tmp_path / "ca")


def _serve(context: ssl.SSLContext) -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)  # so that the loop sees ``stop``
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(10)
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"x")
            except (OSError, ssl.SSLError):
                conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def _common_name(port: int, cafile: Path) -> str:
    context = client_context(str(cafile))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.recv(1)
        subject = tls.getpeercert()["subject"]
    return dict(pair[0] for pair in subject)["commonName"]


def test_a_renewed_certificate_is_served_without_a_restart(ca: LocalCa, tmp_path: Path) -> None:
    first, second = ca.issue("first"), ca.issue("second")
    certfile, keyfile = tmp_path / "server.crt", tmp_path / "server.key"
    shutil.copy(first.certfile, certfile)
    shutil.copy(first.keyfile, keyfile)
    context = server_context(str(certfile), str(keyfile))
    for port in _serve(context):
        assert _common_name(port, ca.cafile) == "first"
        shutil.copy(second.certfile, certfile)
        shutil.copy(second.keyfile, keyfile)
        assert _common_name(port, ca.cafile) == "second"


def test_bad_settings_are_named(ca: LocalCa, tmp_path: Path) -> None:
    pair = ca.issue("server")
    with pytest.raises(ConfigurationError, match=r"ssl\.certfile is required"):
        server_context("", str(pair.keyfile))
    with pytest.raises(ConfigurationError, match=r"ssl\.keyfile: no such file"):
        server_context(str(pair.certfile), str(tmp_path / "missing.key"))
    with pytest.raises(ConfigurationError, match=r"needs ssl\.cafile"):
        server_context(str(pair.certfile), str(pair.keyfile), "", "required")
