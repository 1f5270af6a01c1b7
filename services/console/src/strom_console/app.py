"""The console's web app: ``build_app(console)`` returns the ASGI app (Starlette behind
``guard.Guard``), its routes those of ``routes.ROUTES``; the shared HTTP layer serves it
(``strom_server.http``), and ``__main__`` starts the sampler and closes the console's clients.

Pages are server-rendered Jinja2 templates with autoescaping on (``pages``, one module per
area; what they share is in ``web``); ``/fragments/...`` answer the parts that
``static/console.js`` refreshes in place.
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from strom_console.guard import Guard
from strom_console.routes import ROUTES
from strom_console.web import Console, endpoint

__all__ = ["Console", "build_app"]

_HERE = Path(__file__).parent


def build_app(console: Console) -> Guard:
    """The ASGI app serving ``console``."""
    routes: list[BaseRoute] = [
        Route(r.path, endpoint(console, r.handler), methods=list(r.methods)) for r in ROUTES
    ]
    routes.append(Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"))
    app = Starlette(routes=routes)
    app.state.console = console
    return Guard(
        app,
        console.sessions,
        read_only=console.config.read_only,
        login_required=console.login is not None,
    )
