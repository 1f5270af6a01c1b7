"""The health endpoints every HTTP service answers without authentication: ``GET /healthz``
(the process serves: ``ok``) and ``GET /readyz`` (it is ready for requests: ``ready``, else
503 ``not ready``)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

__all__ = ["HEALTH_PATHS", "alive", "health_routes", "readiness"]

HEALTH_PATHS = ("/healthz", "/readyz")


def alive() -> Response:
    """``/healthz``'s answer."""
    return PlainTextResponse("ok")


def readiness(ready: bool) -> Response:
    """``/readyz``'s answer."""
    if ready:
        return PlainTextResponse("ready")
    return PlainTextResponse("not ready", status_code=503)


def health_routes(ready: Callable[[], bool] = lambda: True) -> list[Route]:
    """``/healthz`` and ``/readyz`` as Starlette routes (GET and HEAD)."""

    async def healthz(_request: Request) -> Response:
        return alive()

    async def readyz(_request: Request) -> Response:
        return readiness(ready())

    return [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]
