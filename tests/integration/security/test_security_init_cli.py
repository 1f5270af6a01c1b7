"""``strom security init`` and ``strom security add-admin`` (what docker-compose.secure.yml runs)
against a real etcd serving TLS with the certificate ``init`` wrote: the admin's password in
admin.properties is the one stored, a second ``init`` keeps every file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cluster_testkit import assert_ok, run_strom
from strom_testkit import free_port

from strom_server.etcd.binary import find_etcd
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.process import etcd_argv, etcd_is_healthy
from strom_server.etcd.store import EtcdStore
from strom_server.local import secure
from strom_server.local.supervisor import ManagedProcess
from strom_server.security.passwords import PasswordChecker
from strom_server.security.store import SecurityStore

pytestmark = pytest.mark.integration


async def _admin_principal(directory: Path, endpoint: str) -> str:
    etcd = EtcdStore([endpoint], tls=secure.etcd_client_credentials(directory))
    try:
        checker = PasswordChecker(SecurityStore(etcd, ClusterKeys("/strom")).credentials)
        password = secure.admin_options(directory)["sasl_plain_password"]
        return await checker.check("admin", password)
    finally:
        await etcd.close()


def test_init_then_add_admin_on_a_tls_etcd(tmp_path: Path) -> None:
    directory = tmp_path / "security"
    first = assert_ok(run_strom("security", "init", "--dir", str(directory)))
    assert "admin.properties" in first.stdout and "gateway.crt" in first.stdout
    files = {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    again = assert_ok(run_strom("security", "init", "--dir", str(directory)))
    assert "everything already there" in again.stdout
    assert {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()} == files

    tls = secure.etcd_tls(directory)
    client_port = free_port()
    client_url = f"https://127.0.0.1:{client_port}"
    etcd = ManagedProcess(
        name="etcd",
        argv=etcd_argv(
            find_etcd(), name="init-etcd", data_dir=tmp_path / "etcd", host="127.0.0.1",
            client_port=client_port, peer_port=free_port(), tls=tls,
        ),
        log_path=tmp_path / "etcd.log",
        ready=lambda: etcd_is_healthy(client_url, tls=tls),
        address=client_url,
    )  # fmt: skip
    etcd.start()
    try:
        etcd.wait_ready(30.0)
        endpoint = f"127.0.0.1:{client_port}"
        added = assert_ok(
            run_strom(
                "security", "add-admin", "--dir", str(directory), "--etcd-endpoints", endpoint
            )
        )
        assert "stored the super user admin" in added.stdout
        assert asyncio.run(_admin_principal(directory, endpoint)) == "User:admin"
    finally:
        etcd.stop(10.0)
