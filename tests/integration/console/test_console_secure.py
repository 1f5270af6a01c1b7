"""The console of a secure cluster, started as ``strom cluster up --secure`` starts it: it
reaches the cluster as the super user (admin.properties), and its pages need the admin's
login; a stranger gets the login page and nothing else. It and the registry answer health and a
bad password alike (the shared HTTP layer)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import httpx2
import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from conftest import HttpSession
from strom_testkit import free_port, wait_until

from strom import Admin, NewTopic
from strom.serde.registry_client import SchemaRegistryClient
from strom_server.local import secure

pytestmark = pytest.mark.integration


class _SecureCluster(LocalCluster):
    def start(self, ready_timeout_s: float = 90.0) -> None:
        """As ``strom cluster up --secure``: the admin exists once etcd is up (the registry
        logs in as admin before it is ready)."""
        for process in self.spec.processes():
            self.processes[process.name] = process
            self.started.append(process)
            process.start()
            process.wait_ready(ready_timeout_s)
            if process.role == "etcd":
                secure.create_admin(
                    self.spec.data_dir, f"{self.spec.host}:{self.spec.etcd_client_port}"
                )

    def admin(self) -> Admin:
        options = secure.admin_options(self.spec.data_dir)
        return Admin(self.gateway, request_timeout_ms=20000, **options)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_local_cluster(
        tmp_path_factory.mktemp("secure-console"),
        cluster_class=_SecureCluster,
        secure=True,
        console_port=free_port(),
        registry_port=free_port(),
    )


def test_the_console_of_a_secure_cluster_needs_the_admins_login(secured: LocalCluster) -> None:
    spec = secured.spec
    options = secure.admin_options(spec.data_dir)
    with secured.admin() as admin:
        admin.create_topics([NewTopic("guarded-orders", 2, 1)])
    stranger = HttpSession(spec.console_url)
    assert stranger.get("/topics")[0] == 303  # to the login page
    stranger.get("/login")
    assert stranger.post("/login", {"user": "admin", "password": "guess"})[0] == 401
    assert stranger.get("/topics")[0] == 303

    client = HttpSession(spec.console_url)
    client.get("/login")
    password = options["sasl_plain_password"]
    assert client.post("/login", {"user": "admin", "password": password})[0] == 303

    def listed() -> str | None:
        status, body = client.get("/topics")
        return body if status == 200 and "guarded-orders" in body else None

    wait_until(listed, 60, "the topic listed through the secure cluster")
    status, body = client.get("/")
    assert status == 200
    assert body.count('class="node-row"') == 3 and "active" in body


def test_the_console_reads_the_secure_registry_as_its_user(secured: LocalCluster) -> None:
    spec = secured.spec
    options = secure.admin_options(spec.data_dir)
    password = str(options["sasl_plain_password"])
    schema = '{"type": "record", "name": "Guarded", "fields": [{"name": "id", "type": "long"}]}'
    with SchemaRegistryClient(
        spec.registry_url,
        basic_auth_user_info=f"admin:{password}",
        ssl_cafile=str(options["ssl_cafile"]),
    ) as registry:
        registry.register("guarded-orders-value", schema)
    client = HttpSession(spec.console_url)
    client.get("/login")
    assert client.post("/login", {"user": "admin", "password": password})[0] == 303
    status, body = client.get("/schemas")
    assert status == 200 and "guarded-orders-value" in body, body[:2000]


def test_both_http_services_answer_health_and_refuse_a_bad_password_alike(
    secured: LocalCluster,
) -> None:
    """The console and the registry run on the shared HTTP layer: its /healthz and /readyz
    answer without credentials, and a wrong password for the same user is 401 from both (the
    registry's HTTP Basic against the SCRAM users, the console's login against its user)."""
    spec = secured.spec
    options = secure.admin_options(spec.data_dir)
    password = str(options["sasl_plain_password"])
    ca = ssl.create_default_context(cafile=str(options["ssl_cafile"]))
    registry = httpx2.Client(base_url=spec.registry_url, verify=ca)
    console = httpx2.Client(base_url=spec.console_url)
    with registry, console:
        for service in (registry, console):
            alive = service.get("/healthz")
            assert (alive.status_code, alive.text) == (200, "ok"), service.base_url
        wait_until(
            lambda: all(s.get("/readyz").text == "ready" for s in (registry, console)),
            60,
            "both services ready",
        )
        refused = registry.get("/subjects", auth=("admin", password + "-wrong"))
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Basic")
        assert refused.json()["error_code"] == 401
        assert registry.get("/subjects", auth=("admin", password)).status_code == 200

        login = HttpSession(spec.console_url)
        login.get("/login")
        wrong = {"user": "admin", "password": password + "-wrong"}
        assert login.post("/login", wrong)[0] == 401
        assert login.post("/login", {"user": "admin", "password": password})[0] == 303
