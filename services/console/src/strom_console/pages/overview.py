"""The overview page (nodes, controllers, totals), its refreshed fragment, and the health
endpoints (the shared HTTP layer's answers): ``/healthz``, and ``/readyz`` once the sampler
has reached the cluster."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from strom_console import overview
from strom_console.web import Console
from strom_server.http.health import alive, readiness


async def _overview_data(console: Console) -> overview.Overview:
    snap = await console.current()
    assert snap.overview is not None  # every sample derives it
    return snap.overview


async def page_overview(console: Console, request: Request) -> Response:
    return console.render(request, "overview.html", o=await _overview_data(console))


async def fragment_overview(console: Console, request: Request) -> Response:
    return console.render(request, "_overview.html", o=await _overview_data(console))


async def healthz(console: Console, request: Request) -> Response:
    return alive()


async def readyz(console: Console, request: Request) -> Response:
    return readiness(console.sampler.snapshot.taken > 0)
