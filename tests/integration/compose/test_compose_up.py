"""docker-compose.yml for real: the Strom image built (from a Debian base made from Debian's
packages unless STROM_IMAGE_BASE names another, e.g. python:3.12-slim), the generated file run
with ``docker compose up -d`` on a project name and host ports of its own, every health check
awaited, then from the host: Strom's client through the gateway, a Kafka client through the
Kafka listener, the console's overview page, a schema registered; one storage node's process
killed and restarted by its restart policy while the others serve. ``down -v`` at the end, even
on failure. The same for docker-compose.secure.yml (``strom security init``'s CA and admin
password copied out of the shared volume; SASL_SSL, the registry over HTTPS). Starts
``dockerd --iptables=false --bridge=none`` when no engine runs (the host's firewall rules stay
untouched); skips where the machine cannot run containers. Not part of ``make test``:
``make compose-test``."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from strom_testkit import free_port_range, wait_until

from strom import Admin, Consumer, NewTopic, Producer
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.compose_file import IMAGE, render
from strom_server.local.compose_secure import SECURITY_DIR, render_secure

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.integration, pytest.mark.compose]

ROOT = Path(__file__).resolve().parents[3]
LOCAL_BASE = "strom-base:bookworm"


def _run(*argv: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done


def _engine_up() -> bool:
    return _run("docker", "info", timeout=30, check=False).returncode == 0


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A running container engine: the machine's, or dockerd started here (and stopped after)."""
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI: this machine cannot run containers")
    if _engine_up():
        yield
        return
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("no container engine running and dockerd cannot be started (needs root)")
    log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
    with log.open("w") as out:
        daemon = subprocess.Popen(
            ["dockerd", "--iptables=false", "--bridge=none"], stdout=out, stderr=out
        )
    deadline = time.monotonic() + 60
    while not _engine_up():
        if daemon.poll() is not None or time.monotonic() > deadline:
            _stop(daemon, signal.SIGKILL)
            pytest.skip(f"dockerd did not start: {log.read_text()[-500:]}")
        time.sleep(1)
    try:
        yield
    finally:
        _stop(daemon, signal.SIGTERM)


def _stop(daemon: subprocess.Popen, sig: signal.Signals) -> None:
    """Stop the dockerd started here: ``sig``, then SIGKILL if it is still up a minute later."""
    daemon.send_signal(sig)
    try:
        daemon.wait(timeout=60)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()


def _compose() -> list[str]:
    if _run("docker", "compose", "version", check=False).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.skip("neither `docker compose` nor docker-compose is installed")


@pytest.fixture(scope="module")
def image(engine: None) -> str:
    """strom:latest built from this checkout."""
    base = os.environ.get("STROM_IMAGE_BASE", LOCAL_BASE)
    if base == LOCAL_BASE and _run("docker", "image", "inspect", base, check=False).returncode:
        _run(str(ROOT / "docker" / "build-debian-base"), base, timeout=1200)
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}  # the classic builder needs no buildx plugin
    argv = ["docker", "build", "-q", "--network", "host", "--build-arg", f"BASE={base}"]
    done = subprocess.run(
        [*argv, "-t", IMAGE, str(ROOT)], capture_output=True, text=True, timeout=1800, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return IMAGE


class Project:
    """One compose project: its file, name and published ports."""

    def __init__(self, directory: Path, secure: bool) -> None:
        base = free_port_range(104)
        self.directory, self.secure = directory, secure
        self.spec = LocalClusterSpec(
            data_dir=Path("/var/lib/strom"),
            base_port=base,
            kafka_port=base + 100,
            registry_port=base + 101,
            console_port=None if secure else base + 102,
        )
        self.file = directory / "docker-compose.yml"
        self.file.write_text(render_secure(self.spec) if secure else render(self.spec))
        self.name = f"stromtest{uuid.uuid4().hex[:8]}"
        self.compose = [*_compose(), "-p", self.name, "-f", str(self.file)]
        self.password = ""

    def fetch_credentials(self) -> None:
        """The CA and the admin's password ``strom security init`` wrote in the volume."""
        gateway = self.containers()["gateway"]["Id"]
        for name in ("tls/ca.crt", "admin.properties"):
            _run("docker", "cp", f"{gateway}:{SECURITY_DIR}/{name}", str(self.directory))
        properties = (self.directory / "admin.properties").read_text().splitlines()
        self.password = next(p.split("=", 1)[1] for p in properties if p.startswith("sasl.pass"))

    @property
    def ca(self) -> str:
        return str(self.directory / "ca.crt")

    def client_options(self) -> dict[str, Any]:
        """Strom client options: through the gateway, as admin over SASL_SSL when secure."""
        if not self.secure:
            return {"gateway_only": True}
        return {
            "gateway_only": True,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "admin",
            "sasl_plain_password": self.password,
            "ssl_cafile": self.ca,
        }

    def kafka_config(self) -> dict[str, str]:
        config = {"bootstrap.servers": f"localhost:{self.spec.kafka_address.rpartition(':')[2]}"}
        if self.secure:
            config |= {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "admin",
                "sasl.password": self.password,
                "ssl.ca.location": self.ca,
            }
        return config

    @property
    def gateway(self) -> str:
        return f"localhost:{self.spec.base_port}"

    def containers(self) -> dict[str, dict]:
        """Service name -> the container's inspect state."""
        label = f"label=com.docker.compose.project={self.name}"
        ids = _run("docker", "ps", "-aq", "--filter", label).stdout.split()
        if not ids:
            return {}
        found = json.loads(_run("docker", "inspect", *ids).stdout)
        return {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in found}

    def all_healthy(self) -> bool:
        containers = self.containers()
        expected = {p.name for p in self.spec.processes()}
        if set(containers) - {"security-init", "security-add-admin"} != expected:
            return False
        return all(  # the one-shot security services carry the image's health check too
            c["State"].get("Health", {}).get("Status") == "healthy"
            if name in expected
            else c["State"]["Status"] == "exited" and c["State"]["ExitCode"] == 0
            for name, c in containers.items()
        )


@pytest.fixture(scope="module", params=["plain", "secure"])
def project(
    request: pytest.FixtureRequest, image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Project]:
    project = Project(tmp_path_factory.mktemp("compose"), secure=request.param == "secure")
    try:
        _run(*project.compose, "up", "-d", "--no-build", timeout=600)
        wait_until(project.all_healthy, timeout_s=300, what="every service healthy", interval_s=2)
        if project.secure:
            project.fetch_credentials()
        yield project
    finally:
        logs = _run(*project.compose, "logs", "--no-color", "--tail", "30", check=False)
        _run(*project.compose, "down", "-v", "--remove-orphans", timeout=300, check=False)
        print(logs.stdout[-20000:])


def _create_topic(project: Project, topic: str) -> None:
    with Admin(project.gateway, **project.client_options()) as admin:
        admin.create_topics([NewTopic(topic, 3, 3)])


def _roundtrip(project: Project, topic: str, values: list[bytes]) -> list[bytes]:
    with Producer(project.gateway, **project.client_options()) as producer:
        for value in values:
            producer.send(topic, value).result(timeout=30)
    with Consumer(
        topic,
        bootstrap_servers=project.gateway,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        **project.client_options(),
    ) as consumer:
        return [record.value for record in consumer]


def test_strom_client_through_the_gateway(project: Project) -> None:
    _create_topic(project, "events")
    values = [f"hello {i}".encode() for i in range(20)]
    assert sorted(_roundtrip(project, "events", values)) == sorted(values)


def test_kafka_client_through_the_kafka_listener(project: Project) -> None:
    _create_topic(project, "kafka-events")
    producer = confluent_kafka.Producer(project.kafka_config())
    for i in range(10):
        producer.produce("kafka-events", f"kafka {i}".encode())
    assert producer.flush(60) == 0
    consumer = confluent_kafka.Consumer(
        {**project.kafka_config(), "group.id": "compose-test", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["kafka-events"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 10 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    assert sorted(seen) == sorted(f"kafka {i}".encode() for i in range(10))


def test_console_overview_page(project: Project) -> None:
    if project.secure:
        pytest.skip("docker-compose.secure.yml has no console")
    with urllib.request.urlopen(f"http://127.0.0.1:{project.spec.console_port}/", timeout=30) as r:
        assert r.status == 200 and "Strom" in r.read().decode()


def test_a_schema_is_registered(project: Project) -> None:
    schema = {"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"}]}
    scheme, context = "http", None
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if project.secure:
        scheme, context = "https", ssl.create_default_context(cafile=project.ca)
        login = base64.b64encode(f"admin:{project.password}".encode()).decode()
        headers["Authorization"] = f"Basic {login}"
    request = urllib.request.Request(
        f"{scheme}://localhost:{project.spec.registry_port}/subjects/events-value/versions",
        data=json.dumps({"schema": json.dumps(schema)}).encode(),
        headers=headers,
    )
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        assert isinstance(json.loads(response.read())["id"], int)


def test_a_killed_storage_node_is_restarted(project: Project) -> None:
    _create_topic(project, "events-restart")
    victim = project.containers()["storage-1"]
    os.kill(victim["State"]["Pid"], signal.SIGKILL)  # a crash, not a `docker stop`

    def restarted() -> bool:
        state = project.containers()["storage-1"]
        return state["RestartCount"] > victim["RestartCount"] and (
            state["State"].get("Health", {}).get("Status") == "healthy"
        )

    values = [f"during {i}".encode() for i in range(5)]
    assert sorted(_roundtrip(project, "events-restart", values)) == sorted(values)
    wait_until(restarted, timeout_s=120, what="storage-1 restarted and healthy", interval_s=1)
    assert project.all_healthy()
