"""A leading underscore means "internal to the package": no module outside a package imports
its underscore modules or names (services, the Spark connector and the benchmarks use public
names such as ``strom.cluster``). Tests are exempt: they may test a module's internals.

import-linter's protected contracts name today's private client modules; this test covers
every one, present and future, and bench/ too, which import-linter does not see.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SOURCE_ROOTS = [
    REPO / "clients" / "src",
    *sorted((REPO / "services").glob("*/src")),
    REPO / "spark_connector" / "src",
]
GENERATED = ("strom", "protocol")


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    """Every module of the distributions and every benchmark, by dotted name."""
    found = {}
    for root in SOURCE_ROOTS:
        for path in root.rglob("*.py"):
            name = _module_name(root, path)
            if tuple(name.split(".")[:2]) != GENERATED:
                found[name] = path
    for path in (REPO / "bench").glob("*.py"):
        found[f"bench.{path.stem}"] = path
    return found


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _owner(dotted: str, modules: set[str]) -> str | None:
    """The package that owns ``dotted`` when it is private (a private module belongs to its
    package; a private name of module M to M's package), else None."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            module = ".".join(parts[: i + 1])
            return ".".join(parts[:i] if module in modules else parts[: i - 1])
    return None


def _imported(tree: ast.Module) -> list[tuple[str, int]]:
    """Absolute dotted names this module imports (``from m import n`` gives ``m.n``)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
    return names


def test_nothing_outside_a_package_imports_its_private_modules_or_names() -> None:
    sources = _sources()
    modules = set(sources)
    reaching = []
    for importer, path in sorted(sources.items()):
        for dotted, line in _imported(ast.parse(path.read_text(), str(path))):
            if not dotted.startswith("strom"):
                continue
            owner = _owner(dotted, modules)
            if owner is not None and not (importer == owner or importer.startswith(owner + ".")):
                reaching.append(f"{path.relative_to(REPO)}:{line} imports {dotted}")
    assert reaching == []


def test_the_rule_sees_private_modules_and_private_names() -> None:
    modules = {"strom.cluster", "strom.producer", "strom.producer._sender", "strom.cli.groups"}
    assert _owner("strom.producer._sender.Sender", modules) == "strom.producer"
    assert _owner("strom.cli.groups._plan", modules) == "strom.cli"
    assert _owner("strom.cluster.ClusterClient", modules) is None
    assert _owner("strom.__version__", modules) is None
