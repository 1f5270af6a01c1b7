"""``strom cluster up --secure`` starts the schema registry secured: its own certificate and
the services' security settings, the admin's client settings for the ``_schemas`` topic, an
https URL and a readiness probe that trusts the cluster's CA."""

from __future__ import annotations

from pathlib import Path

from strom_testkit import free_port

from strom.cli.main import build_parser
from strom_server.local import cluster as local
from strom_server.local import secure
from strom_server.local.cluster_cli import _spec


def test_the_secure_registry_process(tmp_path: Path) -> None:
    port = free_port()
    spec = local.LocalClusterSpec(tmp_path, registry_port=port, secure=True)
    registry = {p.name: p for p in spec.processes()}["registry"]
    argv = list(registry.argv)
    flags = secure.service_flags(tmp_path, "registry")
    assert argv[argv.index(flags[0]) :][: len(flags)] == flags
    assert argv[argv.index("--command-config") + 1] == str(secure.admin_properties_path(tmp_path))
    assert (secure.tls_dir(tmp_path) / "registry.crt").is_file()
    assert registry.address == spec.registry_url == f"https://127.0.0.1:{port}"
    assert not registry.ready()  # nothing listens: the https probe answers False, no error


def test_cluster_up_secure_keeps_the_registry(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["cluster", "up", "--secure", "--data-dir", str(tmp_path), "--registry-port", "18081"]
    )
    assert _spec(args, local).registry_port == 18081
