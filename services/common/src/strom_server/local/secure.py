"""``strom cluster up --secure``: TLS files, the super user and the admin's properties file.

Under ``<data-dir>/tls/``: ``ca.crt`` (and its key) and one certificate per service (``gateway``,
``storage-1``, ...). Every service then runs with ``security.protocol=SASL_SSL``, its own
certificate, the authorizer on, ``super.users=User:admin`` and
``allow.everyone.if.no.acl.found=false``, and reaches etcd over TLS with a client certificate
(etcd's client API is https and requires one). The super user ``admin`` gets a random password,
written with the rest of a client's settings to ``<data-dir>/admin.properties`` (owner-only)
for ``--command-config``; a later ``up`` on the same data directory keeps both.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path
from typing import Any

import grpc

from strom.security import properties_to_options, read_properties
from strom.security.scram import DEFAULT_ITERATIONS, make_credential, salted_password
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.process import EtcdTls
from strom_server.etcd.store import EtcdStore
from strom_server.security.certificates import LocalCa
from strom_server.security.store import SecurityStore

__all__ = [
    "ADMIN_USER",
    "admin_options",
    "admin_properties_path",
    "create_admin",
    "etcd_client_credentials",
    "etcd_tls",
    "kafka_properties_path",
    "prepare_tls",
    "service_flags",
    "tls_dir",
    "write_kafka_properties",
]

ADMIN_USER = "admin"
_MECHANISM = "SCRAM-SHA-256"


def tls_dir(data_dir: Path) -> Path:
    return data_dir / "tls"


def admin_properties_path(data_dir: Path) -> Path:
    return data_dir / "admin.properties"


def kafka_properties_path(data_dir: Path) -> Path:
    return data_dir / "kafka-client.properties"


def write_kafka_properties(data_dir: Path, bootstrap: str) -> Path:
    """``<data-dir>/kafka-client.properties`` (owner-only): what a Kafka client (librdkafka's
    names) needs to reach the gateway's Kafka listener as the admin over SASL_SSL."""
    options = admin_options(data_dir)
    text = (
        f"bootstrap.servers={bootstrap}\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={options['sasl_mechanism']}\n"
        f"sasl.username={options['sasl_plain_username']}\n"
        f"sasl.password={options['sasl_plain_password']}\n"
        f"ssl.ca.location={options['ssl_cafile']}\n"
    )
    path = kafka_properties_path(data_dir)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path


def prepare_tls(data_dir: Path, service_names: list[str]) -> None:
    """The CA, a certificate per service (missing ones only) and admin.properties."""
    ca = LocalCa(tls_dir(data_dir))
    for name in service_names:
        if not (ca.directory / f"{name}.crt").exists():
            ca.issue(name)
    path = admin_properties_path(data_dir)
    if not path.exists():
        text = (
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={_MECHANISM}\n"
            f"sasl.username={ADMIN_USER}\n"
            f"sasl.password={secrets.token_urlsafe(18)}\n"
            f"ssl.cafile={ca.cafile}\n"
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)


def admin_options(data_dir: Path) -> dict[str, Any]:
    """The admin's client options (``security_protocol=...``), from admin.properties."""
    return properties_to_options(read_properties(admin_properties_path(data_dir)))


def service_flags(data_dir: Path, name: str) -> list[str]:
    """The security settings of service ``name``."""
    directory = tls_dir(data_dir)
    return [
        "--security.protocol", "SASL_SSL",
        "--ssl.certfile", str(directory / f"{name}.crt"),
        "--ssl.keyfile", str(directory / f"{name}.key"),
        "--ssl.cafile", str(directory / "ca.crt"),
        "--authorizer.enabled",
        "--super.users", f"User:{ADMIN_USER}",
        "--no-allow.everyone.if.no.acl.found",
        "--etcd.ssl.cafile", str(directory / "ca.crt"),
    ]  # fmt: skip


def etcd_tls(data_dir: Path) -> EtcdTls:
    """etcd's TLS files (its certificate doubles as the local tools' client certificate)."""
    directory = tls_dir(data_dir)
    return EtcdTls(directory / "etcd.crt", directory / "etcd.key", directory / "ca.crt")


def etcd_client_credentials(data_dir: Path) -> grpc.ChannelCredentials:
    files = etcd_tls(data_dir)
    return grpc.ssl_channel_credentials(
        files.cafile.read_bytes(), files.keyfile.read_bytes(), files.certfile.read_bytes()
    )


async def _store_admin(endpoint: str, prefix: str, password: str, data_dir: Path) -> None:
    etcd = EtcdStore([endpoint], tls=etcd_client_credentials(data_dir))
    try:
        salt = secrets.token_bytes(16)
        salted = salted_password(_MECHANISM, password, salt, DEFAULT_ITERATIONS)
        credential = make_credential(_MECHANISM, salted, salt, DEFAULT_ITERATIONS)
        await SecurityStore(etcd, ClusterKeys(prefix)).put_credential(ADMIN_USER, credential)
    finally:
        await etcd.close()


def create_admin(data_dir: Path, etcd_endpoint: str, prefix: str = "/strom") -> None:
    """Store the admin's SCRAM credential (salted, from admin.properties) in etcd."""
    password = admin_options(data_dir)["sasl_plain_password"]
    asyncio.run(_store_admin(etcd_endpoint, prefix, password, data_dir))
