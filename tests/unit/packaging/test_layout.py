"""Packaging rules of the design: prefixed import names only, one-way dependencies."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DISTRIBUTION_DIRS = [
    REPO / "clients",
    *sorted((REPO / "services").glob("*/")),
    REPO / "spark_connector",
]


def _with_pyproject() -> list[Path]:
    return [d for d in DISTRIBUTION_DIRS if (d / "pyproject.toml").is_file()]


def test_every_distribution_ships_only_strom_prefixed_packages() -> None:
    dists = _with_pyproject()
    assert REPO / "clients" in dists and REPO / "services" / "common" in dists
    for dist in dists:
        packages = [
            p.name
            for p in (dist / "src").iterdir()
            if p.is_dir() and not p.name.endswith(".egg-info") and p.name != "__pycache__"
        ]
        assert packages, dist
        assert all(name == "strom" or name.startswith("strom_") for name in packages), packages


def test_generic_folder_names_are_not_installed(tmp_path: Path) -> None:
    """Only strom-prefixed names are installed: from outside the checkout (where the folders
    would be namespace packages of the current directory) none of the folders imports."""
    for folder in ("clients", "services", "proto", "spark_connector"):
        assert not (REPO / folder / "__init__.py").exists()
    probe = (
        "import importlib.util, sys\n"
        "found = [n for n in ('clients', 'services', 'proto', 'spark_connector', 'common',"
        " 'storage') if importlib.util.find_spec(n)]\n"
        "sys.exit(f'importable: {found}' if found else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_distribution_names_match_import_names() -> None:
    expected = {
        "clients": ("strom", "strom"),
        "common": ("strom-server", "strom_server"),
        "spark_connector": ("strom-spark", "strom_spark"),
    }
    for dist in _with_pyproject():
        name = tomllib.loads((dist / "pyproject.toml").read_text())["project"]["name"]
        dist_name, import_name = expected.get(
            dist.name, (f"strom-{dist.name}", f"strom_{dist.name}")
        )
        assert name == dist_name
        assert (dist / "src" / import_name / "__init__.py").is_file()
        assert importlib.metadata.version(name)  # installed by make's set-up


def test_client_distribution_does_not_depend_on_server_packages() -> None:
    requires = importlib.metadata.requires("strom") or []
    base = [r for r in requires if "extra ==" not in r]
    assert not any(
        r.startswith(("strom-server", "etcd", "python3-etcd3", "opentelemetry")) for r in base
    ), base


def test_import_linter_contracts_hold() -> None:
    """The contracts in the root pyproject.toml (one-way layers, pure domain code)."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
