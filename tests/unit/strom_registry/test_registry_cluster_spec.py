"""The schema registry in the local cluster's definition: ``strom cluster up`` starts one on
8081 unless ``--registry-port 0``; tests and benchmarks get none unless they ask."""

from __future__ import annotations

from pathlib import Path

from strom.cli.main import build_parser
from strom_server.local.cluster import LocalClusterSpec


def test_a_registry_port_adds_the_registry_process(tmp_path: Path) -> None:
    assert "registry" not in {p.name for p in LocalClusterSpec(tmp_path).processes()}
    spec = LocalClusterSpec(tmp_path, base_port=19092, registry_port=18081)
    processes = {p.name: p for p in spec.processes()}
    registry = processes["registry"]
    assert list(registry.argv[1:5]) == ["-m", "strom_registry", "--listen", "127.0.0.1:18081"]
    assert "127.0.0.1:19092" in registry.argv  # it bootstraps through the gateway
    names = list(processes)
    assert names.index("registry") > names.index("gateway")
    assert spec.ports()["schema registry"] == 18081
    assert spec.registry_url == "http://127.0.0.1:18081"


def test_cluster_up_defaults_to_8081() -> None:
    args = build_parser().parse_args(["cluster", "up"])
    assert args.registry_port == 8081
    args = build_parser().parse_args(["cluster", "up", "--registry-port", "0"])
    assert args.registry_port == 0
