"""A local certificate authority for ``strom cluster up --secure`` and tests: a CA, and
certificates it signs for services (names and addresses as subject alternative names, usable
for server and client authentication) and users (the CN is the mTLS principal's name).

Files are PEM: ``ca.crt`` (and ``ca.key``), ``<name>.crt`` and ``<name>.key``; keys are
written readable by the owner only.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificatePair", "LocalCa"]

_VALID_DAYS = 825


@dataclass(frozen=True)
class CertificatePair:
    certfile: Path
    keyfile: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class LocalCa:
    """A CA kept in ``directory`` (created, or loaded when ``ca.crt`` exists)."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cafile = self.directory / "ca.crt"
        keyfile = self.directory / "ca.key"
        if self.cafile.exists() and keyfile.exists():
            self._key = serialization.load_pem_private_key(keyfile.read_bytes(), None)
            self._cert = x509.load_pem_x509_certificate(self.cafile.read_bytes())
            return
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name("Strom local CA"))
            .issuer_name(_name("Strom local CA"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        _write_key(keyfile, key)
        self.cafile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._key, self._cert = key, cert

    def issue(
        self,
        name: str,
        *,
        hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "::1"),
        common_name: str | None = None,
    ) -> CertificatePair:
        """A certificate and key ``<name>.crt``/``<name>.key`` for ``hosts`` (DNS names or IP
        addresses), valid for servers and clients; CN ``common_name`` (default ``name``)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        alternative: list[x509.GeneralName] = []
        for host in hosts:
            try:
                alternative.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                alternative.append(x509.DNSName(host))
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name or name))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if alternative:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(alternative), critical=False
            )
        cert = builder.sign(self._key, hashes.SHA256())  # type: ignore[arg-type]
        pair = CertificatePair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        _write_key(pair.keyfile, key)
        pair.certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return pair
