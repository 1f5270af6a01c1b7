"""What runs beside a secure cluster's services, sharing one cluster:

- the schema registry: it reaches the cluster with a properties file and etcd over TLS, serves
  HTTPS, asks for HTTP Basic credentials checked against Strom's users and authorizes subjects
  through the Topic ACLs of their topic (docs/schema-registry.md). Two instances, so that a
  write reaching the non-writer is forwarded over HTTPS with the caller's credentials;
- clients whose protocol does not match the server's get a clear, non-retriable
  ``SslHandshakeFailedError`` naming the server and the fix, not a network error retried
  until their timeout: a plaintext client (library and CLI) on the TLS gateway, and a TLS
  client on a plaintext gateway (a real gateway process of the same cluster run with
  ``security.protocol=PLAINTEXT``)."""

from __future__ import annotations

import base64
import json
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_testkit import assert_one_line_error, run_strom, start_local_cluster
from registry_testkit import Registries
from security_testkit import SecureCluster
from strom_testkit import free_port

from strom import Admin
from strom.errors import SslHandshakeFailedError, StromError
from strom.security.acl import AclBinding
from strom.serde.registry_client import SchemaRegistryClient, SchemaRegistryError
from strom_server.local import secure
from strom_server.local.supervisor import ManagedProcess
from strom_server.rpc.health_probe import grpc_serving

pytestmark = pytest.mark.integration

AVRO = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
PAYROLL = json.dumps({"type": "record", "name": "Pay", "fields": [{"name": "a", "type": "int"}]})
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    """A secure cluster (no coordinator: nothing here uses a group)."""
    for found in start_local_cluster(
        tmp_path_factory.mktemp("secure-beside"), cluster_class=SecureCluster, secure=True,
        coordinators=0,
    ):  # fmt: skip
        assert isinstance(found, SecureCluster)
        yield found


@pytest.fixture(scope="module")
def registries(cluster: SecureCluster) -> Iterator[Registries]:
    """Users alice (may write topic orders) and bob (no ACL), and two registry instances a
    and b."""
    for user, password in PASSWORDS.items():
        cluster.add_user(user, password)
    cluster.allow(AclBinding.create("TOPIC", "orders", "User:alice", "WRITE"))
    data_dir = cluster.spec.data_dir
    secure.prepare_tls(data_dir, ["registry"])
    flags = [
        *secure.service_flags(data_dir, "registry"),
        "--command-config", str(secure.admin_properties_path(data_dir)),
    ]  # fmt: skip
    found = Registries(cluster, flags=flags, cafile=cluster.cafile)
    try:
        found.start("a")
        found.start("b")
        yield found
    finally:
        found.stop_all()


def _admin_password(registries: Registries) -> str:
    options = secure.admin_options(registries.cluster.spec.data_dir)
    return str(options["sasl_plain_password"])


def call(
    registries: Registries,
    method: str,
    path: str,
    body: Any = None,
    *,
    user: str | None = None,
    password: str | None = None,
    instance: str = "a",
) -> tuple[int, Any, dict[str, str]]:
    """One HTTPS request to an instance; (status, JSON body, headers)."""
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if user is not None:
        if password is None:
            password = _admin_password(registries) if user == "admin" else PASSWORDS[user]
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        registries.url(instance) + path, data=data, method=method, headers=headers
    )
    assert registries.cafile is not None
    context = ssl.create_default_context(cafile=registries.cafile)
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as answer:
            return answer.status, json.loads(answer.read() or b"null"), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null"), dict(exc.headers)


def test_basic_auth_allows_refuses_and_forbids(registries: Registries) -> None:
    status, body, _ = call(
        registries, "POST", "/subjects/payroll-value/versions", {"schema": PAYROLL}, user="admin"
    )
    assert status == 200, body
    payroll_id = body["id"]
    # No credentials, a wrong password, an unknown user: 401, the same answer.
    for user, password in ((None, None), ("alice", "wrong"), ("nobody", "x")):
        status, body, headers = call(registries, "GET", "/subjects", user=user, password=password)
        assert (status, body["error_code"]) == (401, 401), body
        assert headers["WWW-Authenticate"].startswith("Basic")
    # alice may write topic orders: she registers its value schema, through the non-writer
    # instance too (forwarded over HTTPS with her credentials), and reads it back.
    writer = registries.writer()
    other = "b" if writer == "a" else "a"
    key_schema = {"schema": '"string"'}
    for instance, subject, schema in ((writer, "orders-value", {"schema": AVRO}),
                                      (other, "orders-key", key_schema)):  # fmt: skip
        path = f"/subjects/{subject}/versions"
        status, body, _ = call(registries, "POST", path, schema, user="alice", instance=instance)
        assert status == 200, body
        status, body, _ = call(registries, "GET", path + "/latest", user="alice", instance=other)
        assert status == 200 and body["subject"] == subject, body
    # She sees only the subjects of her topic; another topic's subject is 403 (40301).
    status, body, _ = call(registries, "GET", "/subjects", user="alice")
    assert (status, sorted(body)) == (200, ["orders-key", "orders-value"])
    status, body, _ = call(registries, "GET", "/subjects/payroll-value/versions", user="alice")
    assert (status, body["error_code"]) == (403, 40301), body
    status, body, _ = call(registries, "GET", f"/schemas/ids/{payroll_id}", user="alice")
    assert (status, body["error_code"]) == (403, 40301), body
    # WRITE does not imply DELETE; bob has no ACL at all.
    status, body, _ = call(registries, "DELETE", "/subjects/orders-key", user="alice")
    assert (status, body["error_code"]) == (403, 40301), body
    status, body, _ = call(
        registries, "POST", "/subjects/orders-value/versions", {"schema": AVRO}, user="bob"
    )
    assert (status, body["error_code"]) == (403, 40301), body
    status, body, _ = call(registries, "GET", "/subjects", user="bob")
    assert (status, body) == (200, [])
    # The super user sees everything; the health check needs no login.
    status, body, _ = call(registries, "GET", "/subjects", user="admin")
    assert status == 200 and {"orders-key", "orders-value", "payroll-value"} <= set(body)
    assert call(registries, "GET", "/")[0] == 200


def test_confluent_client_with_basic_auth_over_https(registries: Registries) -> None:
    schema_registry = pytest.importorskip("confluent_kafka.schema_registry")
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    def client(user: str, password: str) -> Any:
        return schema_registry.SchemaRegistryClient({
            "url": registries.url("a"),
            "ssl.ca.location": registries.cafile,
            "basic.auth.user.info": f"{user}:{password}",
        })  # fmt: skip

    schema = schema_registry.Schema(AVRO, "AVRO")
    alice = client("alice", PASSWORDS["alice"])
    schema_id = alice.register_schema("orders-value", schema)
    assert json.loads(alice.get_schema(schema_id).schema_str) == json.loads(AVRO)
    assert alice.get_latest_version("orders-value").schema_id == schema_id
    with pytest.raises(SchemaRegistryError) as refused:
        client("bob", PASSWORDS["bob"]).register_schema("orders-value", schema)
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    with pytest.raises(SchemaRegistryError) as unauthenticated:
        client("alice", "wrong").get_subjects()
    assert unauthenticated.value.http_status_code == 401


def test_strom_serde_client_and_cli_with_basic_auth_over_https(registries: Registries) -> None:
    url, cafile = registries.url("a"), registries.cafile
    assert cafile is not None
    alice = SchemaRegistryClient(
        url, basic_auth_user_info=f"alice:{PASSWORDS['alice']}", ssl_cafile=cafile
    )
    with alice:
        schema_id = alice.register("orders-value", AVRO)
        assert json.loads(alice.schema(schema_id).schema) == json.loads(AVRO)
    # Credentials in the URL work too, and never show in the client's URL (error messages).
    in_url = SchemaRegistryClient(
        url.replace("https://", f"https://alice:{PASSWORDS['alice']}@"), ssl_cafile=cafile
    )
    with in_url:
        assert "orders-value" in in_url.subjects()
        assert PASSWORDS["alice"] not in in_url.url
    with (
        SchemaRegistryClient(url, basic_auth_user_info="alice:wrong", ssl_cafile=cafile) as wrong,
        pytest.raises(SchemaRegistryError) as refused,
    ):
        wrong.subjects()
    assert refused.value.status == 401
    with (
        SchemaRegistryClient(url) as untrusted,  # https without the cluster's CA
        pytest.raises(StromError, match="unreachable"),
    ):
        untrusted.subjects()
    listed = run_strom(
        "schemas", "list", "--json", "--registry-url", url,
        "--registry-user-info", f"alice:{PASSWORDS['alice']}", "--registry-cafile", cafile,
    )  # fmt: skip
    assert listed.returncode == 0, listed.explain()
    assert "orders-value" in listed.stdout
    refused_cli = run_strom(
        "schemas", "list", "--registry-url", url, "--registry-user-info", "alice:wrong",
        "--registry-cafile", cafile,
    )  # fmt: skip
    assert_one_line_error(refused_cli, "401")


@pytest.fixture(scope="module")
def plaintext_gateway(cluster: SecureCluster) -> Iterator[str]:
    """A second gateway of the cluster listening without TLS (etcd still over TLS)."""
    spec = cluster.spec
    tls = secure.tls_dir(spec.data_dir)
    address = f"127.0.0.1:{free_port()}"
    process = ManagedProcess(
        name="plaintext-gateway",
        argv=[
            sys.executable, "-m", "strom_gateway", "--listen", address,
            "--etcd-endpoints", f"{spec.host}:{spec.etcd_client_port}",
            "--etcd.ssl.cafile", str(tls / "ca.crt"),
            "--ssl.certfile", str(tls / "gateway.crt"), "--ssl.keyfile", str(tls / "gateway.key"),
            "--kafka-port", f"127.0.0.1:{free_port()}",
        ],
        log_path=spec.data_dir / "logs" / "plaintext-gateway.log",
        ready=lambda: grpc_serving(address),
        address=address,
    )  # fmt: skip
    process.start()
    try:
        process.wait_ready(60.0)
        yield address
    finally:
        process.stop(10.0)


def test_plaintext_client_on_a_tls_port(cluster: SecureCluster) -> None:
    with (
        Admin(cluster.gateway, request_timeout_ms=30000) as admin,
        pytest.raises(SslHandshakeFailedError) as refused,
    ):
        admin.list_topics()
    assert not refused.value.retriable
    message = str(refused.value)
    assert f"the server at {cluster.gateway} requires TLS" in message
    assert "security_protocol=SSL or SASL_SSL" in message
    result = run_strom("topics", "list", "--bootstrap-server", cluster.gateway)
    assert_one_line_error(result, "requires TLS", "security_protocol=SSL or SASL_SSL")


def test_tls_client_on_a_plaintext_port(cluster: SecureCluster, plaintext_gateway: str) -> None:
    with (
        Admin(plaintext_gateway, request_timeout_ms=30000, **cluster.options()) as admin,
        pytest.raises(SslHandshakeFailedError) as refused,
    ):
        admin.list_topics()
    assert not refused.value.retriable
    assert f"the server at {plaintext_gateway} does not speak TLS" in str(refused.value)
