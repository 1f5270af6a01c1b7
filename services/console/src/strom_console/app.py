"""The console's web app: ``build_app(config)`` returns the ASGI app (Starlette behind
``guard.Guard``), its routes those of ``routes.ROUTES``; its lifespan starts the sampler and
closes the console's clients.

Pages are server-rendered Jinja2 templates with autoescaping on (``pages``, one module per
area; what they share is in ``web``); ``/fragments/...`` answer the parts that
``static/console.js`` refreshes in place.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from strom_console.config import ConsoleConfig
from strom_console.guard import Guard
from strom_console.routes import ROUTES
from strom_console.web import Console, endpoint

__all__ = ["Console", "build_app"]

_HERE = Path(__file__).parent


def build_app(
    config: ConsoleConfig, password: str | None = None, security: dict[str, Any] | None = None
) -> Guard:
    """The console's ASGI app for ``config`` (``password``: the login's, None for no login;
    ``security``: the clients' security options, from ``--command-config``)."""
    console = Console(config, password, security)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        console.sampler.start()
        try:
            yield
        finally:
            await console.close()

    routes: list[BaseRoute] = [
        Route(r.path, endpoint(console, r.handler), methods=list(r.methods)) for r in ROUTES
    ]
    routes.append(Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.console = console
    return Guard(
        app, console.sessions, read_only=config.read_only, login_required=password is not None
    )
