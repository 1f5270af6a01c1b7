"""The console's route table: every page handler is routed, once per path and method, and
every handler in it is a page's (the app serves exactly this table)."""

from __future__ import annotations

import inspect
import pkgutil
from importlib import import_module

from strom_console import pages
from strom_console.routes import ROUTES


def _page_handlers() -> set[object]:
    found = set()
    for info in pkgutil.iter_modules(pages.__path__):
        module = import_module(f"strom_console.pages.{info.name}")
        for name, value in vars(module).items():
            if (
                not name.startswith("_")
                and inspect.iscoroutinefunction(value)
                and value.__module__ == module.__name__
            ):
                found.add(value)
    return found


def test_every_page_handler_is_routed_and_every_route_is_a_page() -> None:
    routed = {route.handler for route in ROUTES}
    handlers = _page_handlers()
    assert routed == handlers, {
        "not routed": sorted(h.__qualname__ for h in handlers - routed),  # type: ignore[attr-defined]
        "not a page": sorted(h.__qualname__ for h in routed - handlers),  # type: ignore[attr-defined]
    }


def test_each_path_and_method_is_routed_once() -> None:
    pairs = [(route.path, method) for route in ROUTES for method in route.methods]
    assert len(pairs) == len(set(pairs)), sorted(p for p in pairs if pairs.count(p) > 1)
    assert ("/healthz", "GET") in pairs and ("/login", "POST") in pairs
