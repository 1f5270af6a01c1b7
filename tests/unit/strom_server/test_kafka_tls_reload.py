"""The Kafka listener's TLS (``http_tls.server_context``, as the schema registry's): the
gateway's certificate served, a renewed certificate served to
the next connection without a restart, and client certificates asked for when configured."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from strom.errors import ConfigurationError
from strom_server.security.certificates import LocalCa
from strom_server.security.http_tls import server_context


async def _served_serial(context: ssl.SSLContext, cafile: Path) -> int:
    """The serial number of the certificate a fresh TLS connection is served."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context(cafile=str(cafile))
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
    return x509.load_der_x509_certificate(der).serial_number


def test_a_renewed_certificate_is_served_to_the_next_connection(tmp_path: Path) -> None:
    ca = LocalCa(tmp_path)
    first = ca.issue("gateway")
    tls = server_context(str(first.certfile), str(first.keyfile), str(ca.cafile), "none")
    serial = asyncio.run(_served_serial(tls, ca.cafile))
    assert serial == x509.load_pem_x509_certificate(first.certfile.read_bytes()).serial_number
    renewed = ca.issue("gateway")  # the same files, rewritten
    expected = x509.load_pem_x509_certificate(renewed.certfile.read_bytes()).serial_number
    assert expected != serial
    assert asyncio.run(_served_serial(tls, ca.cafile)) == expected
    assert asyncio.run(_served_serial(tls, ca.cafile)) == expected


def test_client_certificates_are_asked_for_when_configured(tmp_path: Path) -> None:
    ca = LocalCa(tmp_path)
    pair = ca.issue("gateway")
    required = server_context(str(pair.certfile), str(pair.keyfile), str(ca.cafile), "required")
    assert required.verify_mode == ssl.CERT_REQUIRED
    requested = server_context(str(pair.certfile), str(pair.keyfile), str(ca.cafile), "requested")
    assert requested.verify_mode == ssl.CERT_OPTIONAL
    with pytest.raises(ConfigurationError, match=r"ssl\.cafile"):
        server_context(str(pair.certfile), str(pair.keyfile), "", "required")
    with pytest.raises(ConfigurationError, match=r"ssl\.certfile"):
        server_context("", str(pair.keyfile), "", "none")
