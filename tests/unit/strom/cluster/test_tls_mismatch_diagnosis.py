"""A protocol mismatch told from a network failure (strom.cluster.tls_mismatch): gRPC's details
for each case, and the TLS probe against a real TLS listener and a real plaintext one."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.cluster.tls_mismatch import diagnose, speaks_tls
from strom.errors import SslHandshakeFailedError
from strom_server.security.certificates import LocalCa

_LAST = "failed to connect to all addresses; last error: "


def _listen(context: ssl.SSLContext | None) -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                if context is not None:
                    conn = context.wrap_socket(conn, server_side=True)
                conn.recv(1)
            except (OSError, ssl.SSLError):
                pass
            finally:
                conn.close()

    threading.Thread(target=loop, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.fixture
def tls_port(tmp_path: Path) -> Iterator[int]:
    pair = LocalCa(tmp_path).issue("server")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pair.certfile, pair.keyfile)
    yield from _listen(context)


@pytest.fixture
def plain_port() -> Iterator[int]:
    yield from _listen(None)


def test_tls_client_on_a_plaintext_port_and_an_untrusted_certificate() -> None:
    wrong = diagnose(
        _LAST + "UNKNOWN: ipv4:127.0.0.1:9092: Tls handshake failed (TSI_PROTOCOL_FAILURE): "
        "SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER"
    )
    assert isinstance(wrong, SslHandshakeFailedError) and not wrong.retriable
    assert "the server at 127.0.0.1:9092 does not speak TLS" in str(wrong)
    untrusted = diagnose(
        _LAST + "UNKNOWN: ipv6:[::1]:9093: Tls handshake failed: SSL_ERROR_SSL: "
        "error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED"
    )
    assert untrusted is not None and "server at ::1:9093 is not trusted" in str(untrusted)


def test_plaintext_client_on_a_tls_port(tls_port: int, plain_port: int) -> None:
    assert speaks_tls("127.0.0.1", tls_port)
    assert not speaks_tls("127.0.0.1", plain_port)
    closed = _LAST + f"UNAVAILABLE: ipv4:127.0.0.1:{tls_port}: Socket closed"
    found = diagnose(closed)
    assert found is not None
    assert f"the server at 127.0.0.1:{tls_port} requires TLS" in str(found)
    # A TLS client's handshake cut short is a server going away, not a mismatch.
    cut = _LAST + f"UNAVAILABLE: ipv4:127.0.0.1:{tls_port}: Handshake read failed (Socket closed)"
    assert diagnose(cut) is None
    # A closed socket from a server that does not speak TLS stays a network error.
    assert diagnose(_LAST + f"UNAVAILABLE: ipv4:127.0.0.1:{plain_port}: Socket closed") is None
    refused = _LAST + "UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: refused"
    assert diagnose(refused) is None
