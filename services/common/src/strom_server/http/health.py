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


async def alive(_request: Request | None = None) -> Response:
    return PlainTextResponse("ok")


def readiness(ready: Callable[[], bool]) -> Callable[[Request], object]:
    async def readyz(_request: Request) -> Response:
        if ready():
            return PlainTextResponse("ready")
        return PlainTextResponse("not ready", status_code=503)

    return readyz


def health_routes(ready: Callable[[], bool] = lambda: True) -> list[Route]:
    """``/healthz`` and ``/readyz`` as Starlette routes (GET and HEAD)."""
    return [
        Route("/healthz", alive, methods=["GET"]),
        Route("/readyz", readiness(ready), methods=["GET"]),  # type: ignore[arg-type]
    ]
