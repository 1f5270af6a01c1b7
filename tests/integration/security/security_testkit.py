"""A secure cluster for the security tests: TLS on every service, SCRAM logins, ACLs on
(``strom cluster up --secure``'s settings), and helpers for users, ACLs and clients. The
folder's conftest re-exports the ``cluster`` fixture."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cluster_testkit import LocalCluster, start_local_cluster

from strom import Admin
from strom.security.acl import AclBinding
from strom_server.local import secure


@dataclass
class SecureCluster(LocalCluster):
    """A LocalCluster started with ``secure=True``; ``admin()`` logs in as the super user."""

    def start(self, ready_timeout_s: float = 90.0) -> None:
        super().start(ready_timeout_s)
        secure.create_admin(self.spec.data_dir, f"{self.spec.host}:{self.spec.etcd_client_port}")

    @property
    def cafile(self) -> str:
        return str(secure.tls_dir(self.spec.data_dir) / "ca.crt")

    def options(self, user: str | None = None, password: str | None = None) -> dict[str, Any]:
        """Client options: the admin's, or ``user``'s (SASL_SSL, the cluster's CA)."""
        if user is None:
            return dict(secure.admin_options(self.spec.data_dir))
        return {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": user,
            "sasl_plain_password": password,
            "ssl_cafile": self.cafile,
        }

    def admin(self, **options: Any) -> Admin:
        return Admin(self.gateway, request_timeout_ms=20000, **(options or self.options()))

    def add_user(self, name: str, password: str) -> None:
        with self.admin() as admin:
            admin.upsert_scram_user(name, password)

    def allow(self, *acls: AclBinding) -> None:
        with self.admin() as admin:
            admin.create_acls(list(acls))

    def revoke(self, *acls: AclBinding) -> None:
        with self.admin() as admin:
            for acl in acls:
                admin.delete_acls(acl)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    yield from start_local_cluster(  # type: ignore[misc]
        tmp_path_factory.mktemp("secure-cluster"), cluster_class=SecureCluster, secure=True
    )
