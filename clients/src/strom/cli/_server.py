"""Importing server packages by name from the CLI, so that the client distribution never
depends on server code (import-linter forbids a static import)."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["server_module"]


def server_module(name: str, *, command: str, distribution: str) -> ModuleType:
    """Import ``name``; a missing server package becomes a one-line ``RuntimeError`` saying
    which ``distribution`` ``command`` needs."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            f"`{command}` needs the server package {distribution}: pip install {distribution} "
            "(or run `make up` in a Strom checkout)"
        ) from exc
