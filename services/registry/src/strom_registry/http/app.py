"""Confluent Schema Registry's REST API, a Starlette app served by the shared HTTP layer
(``strom_server.http``).

Handlers only translate: path and query to ``Registry`` calls, results to JSON. Every
``RegistryError`` becomes ``{"error_code", "message"}`` with its HTTP status; an unknown route
is 404 with error code 404, a known route with another method 405 (error code 405), a body
that is not JSON 400 (error code 400), anything unexpected 500 with 50001 (and a log line). A
write reaching an instance that is not the writer is forwarded to the writer (``forward``);
the answer carries the log offset the write reached, and the forwarding instance waits until
its own state has it, so a client reads its write back from whichever instance it asks.

With security on, every request but ``GET /`` (the health check) and the shared layer's
``/healthz`` and ``/readyz`` first authenticates the caller (HTTP Basic against Strom's
users: 401 otherwise) and then is authorized by the rule of its handler (``RULES``; 403 with
40301 otherwise): ``strom_registry.access`` says how.

Path parameters are matched on the path with ``%2F`` left encoded, so a subject may hold a
``/`` (as Confluent's clients send it); the handlers see it decoded.
"""

from __future__ import annotations

import json
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx2
from opentelemetry import metrics, trace
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from strom.security.acl import Operation
from strom_registry import errors
from strom_registry.access import ANONYMOUS, CHALLENGE, Access, forbidden
from strom_registry.registry import Registry
from strom_server.http.errors import status_of
from strom_server.http.health import health_routes
from strom_server.runtime.logs import get_logger

__all__ = ["CONTENT_TYPE", "Node", "build_app"]

log = get_logger(__name__)

#: Confluent's media type; clients accept plain JSON too.
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_OFFSET_HEADER = "X-Strom-Registry-Offset"
_FORWARDED_HEADER = "X-Strom-Registry-Forwarded"
_CHARSET = "; charset=utf-8"
#: The largest request body read (aiohttp's default, which the API had before).
MAX_BODY = 1024 * 1024

Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Node:
    """What the handlers need: the registry, who writes, the log position to wait for."""

    registry: Registry
    is_leader: Callable[[], bool]
    leader_url: Callable[[], str | None]
    log_position: Callable[[], int]
    wait_for: Callable[[int], Awaitable[None]]
    forward_timeout_s: float = 30.0
    #: Authentication and authorization of requests (default: none).
    access: Access = field(default_factory=Access)
    #: TLS of forwarded writes (the writer's URL is https): the cluster's CA.
    forward_ssl: ssl.SSLContext | None = None


def _json(value: Any, status: int = 200) -> Response:
    return Response(json.dumps(value), status, media_type=CONTENT_TYPE + _CHARSET)


def _text(schema: str) -> Response:
    return Response(schema, media_type="application/json" + _CHARSET)


def _header(response: Response, name: str, value: str) -> None:
    """Add a header as written (Starlette's ``headers`` would send the name lower-cased)."""
    response.raw_headers.append((name.encode("latin-1"), value.encode("latin-1")))


def _error(exc: errors.RegistryError) -> Response:
    """Confluent's body, with the status of the layer's one mapping (a ``RegistryError``
    carries its own)."""
    return _json(exc.to_json(), status_of(exc))


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def _param(request: Request, name: str) -> Any:
    value = request.path_params.get(name)
    return None if value is None else value.replace("%2F", "/")


def _params(request: Request) -> dict[str, Any]:
    return {name: _param(request, name) for name in request.path_params}


async def _read(request: Request) -> bytes:
    """The request's body, at most ``MAX_BODY`` bytes (413 beyond)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise errors.bad_request(413, f"the body is larger than {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _body(request: Request) -> Any:
    text = (await _read(request)).decode("utf-8", errors="replace")
    try:
        return json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise errors.bad_request(400, f"the body is not JSON: {exc}") from None


def _host(request: Request) -> str:
    return request.client.host if request.client else ""


def _caller(request: Request) -> tuple[str, str]:
    """The (principal, host) the middleware authenticated."""
    return getattr(request.state, "principal", ANONYMOUS), _host(request)


def _schema_id(request: Request) -> int:
    try:
        return int(request.path_params["id"])
    except ValueError:
        raise errors.schema_not_found() from None


class Routes:
    """The handlers; ``writes`` marks the ones only the writer runs."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.r = node.registry

    async def root(self, _: Request) -> Response:
        """``{}`` as Confluent answers; a Strom header says whether this instance writes."""
        response = _json({})
        _header(response, "X-Strom-Registry-Writer", "true" if self.node.is_leader() else "false")
        return response

    async def schema_types(self, _: Request) -> Response:
        return _json(["JSON", "PROTOBUF", "AVRO"])

    def _visible(self, request: Request, subjects: list[str]) -> list[str]:
        if self.node.access.authorizer is None:
            return subjects
        return self.node.access.visible(*_caller(request), subjects)

    def _readable_id(self, request: Request) -> int:
        """The id of the path, when the caller may describe a subject using it (else 403)."""
        schema_id = _schema_id(request)
        if self.node.access.authorizer is None:
            return schema_id
        self.r.schema(schema_id)  # 40403 first for an unknown id
        if not self._visible(request, self.r.subjects_of(schema_id, deleted=True)):
            raise forbidden(_caller(request)[0], Operation.DESCRIBE, f"schema id {schema_id}")
        return schema_id

    async def schema_by_id(self, request: Request) -> Response:
        return _json(self.r.describe_schema(self.r.schema(self._readable_id(request))))

    async def schema_text(self, request: Request) -> Response:
        return _text(self.r.schema(self._readable_id(request)).text)

    async def schema_subjects(self, request: Request) -> Response:
        subjects = self.r.subjects_of(self._readable_id(request), deleted=_flag(request, "deleted"))
        return _json(self._visible(request, subjects))

    async def schema_versions(self, request: Request) -> Response:
        found = self.r.versions_of(self._readable_id(request), deleted=_flag(request, "deleted"))
        visible = set(self._visible(request, [v["subject"] for v in found]))
        return _json([v for v in found if v["subject"] in visible])

    async def schemas(self, request: Request) -> Response:
        prefix = request.query_params.get("subjectPrefix", "")
        deleted, latest = _flag(request, "deleted"), _flag(request, "latestOnly")
        found = []
        for subject in self._visible(request, self.r.subjects(deleted=deleted, prefix=prefix)):
            versions = self.r.state.versions(subject, deleted=deleted)
            found += [self.r.describe(e) for e in (versions[-1:] if latest else versions)]
        return _json(found)

    async def subjects(self, request: Request) -> Response:
        prefix = request.query_params.get("subjectPrefix", "")
        subjects = self.r.subjects(deleted=_flag(request, "deleted"), prefix=prefix)
        return _json(self._visible(request, subjects))

    async def subject_versions(self, request: Request) -> Response:
        subject = _param(request, "subject")
        return _json(self.r.versions(subject, deleted=_flag(request, "deleted")))

    async def subject_version(self, request: Request) -> Response:
        m = _params(request)
        entry = self.r.version(m["subject"], m["version"], deleted=_flag(request, "deleted"))
        return _json(self.r.describe(entry))

    async def subject_version_schema(self, request: Request) -> Response:
        m = _params(request)
        entry = self.r.version(m["subject"], m["version"], deleted=_flag(request, "deleted"))
        return _text(self.r.state.schemas[entry.schema_id].text)

    async def referenced_by(self, request: Request) -> Response:
        m = _params(request)
        return _json(self.r.referenced_by(m["subject"], m["version"]))

    async def lookup(self, request: Request) -> Response:
        subject = _param(request, "subject")
        body = await _body(request)
        return _json(self.r.lookup(subject, body, deleted=_flag(request, "deleted")))

    async def register(self, request: Request) -> Response:
        subject = _param(request, "subject")
        return _json({"id": await self.r.register(subject, await _body(request))})

    async def delete_subject(self, request: Request) -> Response:
        subject = _param(request, "subject")
        permanent = _flag(request, "permanent")
        return _json(await self.r.delete_subject(subject, permanent=permanent))

    async def delete_version(self, request: Request) -> Response:
        m = _params(request)
        permanent = _flag(request, "permanent")
        return _json(await self.r.delete_version(m["subject"], m["version"], permanent=permanent))

    async def get_config(self, request: Request) -> Response:
        subject = _param(request, "subject")
        level = self.r.config(subject, default_to_global=_flag(request, "defaultToGlobal"))
        return _json({"compatibilityLevel": level})

    async def put_config(self, request: Request) -> Response:
        subject = _param(request, "subject")
        level = await self.r.set_config(subject, await _body(request))
        return _json({"compatibility": level})

    async def delete_config(self, request: Request) -> Response:
        level = await self.r.delete_config(_param(request, "subject"))
        return _json({"compatibilityLevel": level})

    async def get_mode(self, request: Request) -> Response:
        subject = _param(request, "subject")
        default = subject is None or _flag(request, "defaultToGlobal")
        return _json({"mode": self.r.mode(subject, default_to_global=default)})

    async def put_mode(self, request: Request) -> Response:
        subject = _param(request, "subject")
        mode = await self.r.set_mode(subject, await _body(request), force=_flag(request, "force"))
        return _json({"mode": mode})

    async def delete_mode(self, request: Request) -> Response:
        return _json({"mode": await self.r.delete_mode(_param(request, "subject"))})

    async def compatibility(self, request: Request) -> Response:
        m = _params(request)
        problems = self.r.check_compatibility(m["subject"], m.get("version"), await _body(request))
        answer: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            answer["messages"] = problems
        return _json(answer)


#: What each handler needs on the subject of its path (on the global settings when the path
#: names none); handlers not listed need only an authenticated caller (lists filter what they
#: show, a schema by id checks its subjects: ``Routes``).
RULES: dict[str, Operation] = {
    "subject_versions": Operation.DESCRIBE,
    "subject_version": Operation.DESCRIBE,
    "subject_version_schema": Operation.DESCRIBE,
    "referenced_by": Operation.DESCRIBE,
    "lookup": Operation.DESCRIBE,
    "compatibility": Operation.DESCRIBE,
    "register": Operation.WRITE,
    "delete_subject": Operation.DELETE,
    "delete_version": Operation.DELETE,
    "get_config": Operation.DESCRIBE_CONFIGS,
    "get_mode": Operation.DESCRIBE_CONFIGS,
    "put_config": Operation.ALTER_CONFIGS,
    "delete_config": Operation.ALTER_CONFIGS,
    "put_mode": Operation.ALTER_CONFIGS,
    "delete_mode": Operation.ALTER_CONFIGS,
}


async def _authorize(node: Node, request: Request, handler_name: str, route: str) -> None:
    """Authenticate the caller (kept in ``request.state.principal``) and check the handler's
    rule; ``GET /`` (the health check) needs nothing."""
    if node.access.open or handler_name == "root":
        return
    host = _host(request)
    principal = await node.access.principal(request.headers.get("Authorization"), host)
    request.state.principal = principal
    operation = RULES.get(handler_name)
    if operation is not None:
        subject = _param(request, "subject")
        node.access.check(principal, host, operation, subject, f"{request.method} {route}")


#: (method, path, handler name, writes): every route of the API.
_S = "/subjects/{subject}"
_V = _S + "/versions/{version}"
TABLE: tuple[tuple[str, str, str, bool], ...] = (
    ("GET", "/", "root", False),
    ("GET", "/schemas", "schemas", False),
    ("GET", "/schemas/types", "schema_types", False),
    ("GET", "/schemas/ids/{id}", "schema_by_id", False),
    ("GET", "/schemas/ids/{id}/schema", "schema_text", False),
    ("GET", "/schemas/ids/{id}/subjects", "schema_subjects", False),
    ("GET", "/schemas/ids/{id}/versions", "schema_versions", False),
    ("GET", "/subjects", "subjects", False),
    ("GET", _S + "/versions", "subject_versions", False),
    ("GET", _V, "subject_version", False),
    ("GET", _V + "/schema", "subject_version_schema", False),
    ("GET", _V + "/referencedby", "referenced_by", False),
    ("POST", _S, "lookup", False),
    ("GET", "/config", "get_config", False),
    ("GET", "/config/{subject}", "get_config", False),
    ("GET", "/mode", "get_mode", False),
    ("GET", "/mode/{subject}", "get_mode", False),
    ("POST", "/compatibility" + _S + "/versions", "compatibility", False),
    ("POST", "/compatibility" + _V, "compatibility", False),
    ("POST", _S + "/versions", "register", True),
    ("DELETE", _S, "delete_subject", True),
    ("DELETE", _V, "delete_version", True),
    ("PUT", "/config", "put_config", True),
    ("PUT", "/config/{subject}", "put_config", True),
    ("DELETE", "/config", "delete_config", True),
    ("DELETE", "/config/{subject}", "delete_config", True),
    ("PUT", "/mode", "put_mode", True),
    ("PUT", "/mode/{subject}", "put_mode", True),
    ("DELETE", "/mode/{subject}", "delete_mode", True),
)


class _Metrics:
    def __init__(self) -> None:
        self.tracer = trace.get_tracer("strom.registry")
        meter = metrics.get_meter("strom.registry")
        self.requests = meter.create_counter(
            "strom.registry.requests", description="REST requests answered, by route and status"
        )
        self.duration = meter.create_histogram(
            "strom.registry.request.duration", unit="s", description="REST request latency"
        )


async def forward(node: Node, request: Request, client: httpx2.AsyncClient) -> Response:
    """Send a write to the elected writer and return its answer (50003/50004 when it fails)."""
    leader = node.leader_url()
    if leader is None:
        raise errors.unknown_leader("no registry writer is elected right now; retry")
    if request.headers.get(_FORWARDED_HEADER):
        raise errors.forwarding_failed(
            "the instance this request was forwarded to is not the writer"
        )
    headers = {"Content-Type": "application/json", _FORWARDED_HEADER: "1"}
    if "Authorization" in request.headers:  # the writer checks the caller again
        headers["Authorization"] = request.headers["Authorization"]
    path_qs = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
    if request.url.query:
        path_qs += "?" + request.url.query
    try:
        answer = await client.request(
            request.method, leader.rstrip("/") + path_qs, content=await _read(request),
            headers=headers,
        )  # fmt: skip
    except httpx2.HTTPError as exc:
        raise errors.forwarding_failed(
            f"forwarding to the writer at {leader} failed: {exc}"
        ) from None
    offset = answer.headers.get(_OFFSET_HEADER)
    if offset is not None and answer.status_code < 300:
        await node.wait_for(int(offset))
    return Response(answer.content, answer.status_code, headers={"Content-Type": CONTENT_TYPE})


class RegistryApp:
    """The ASGI app (routing on the path with ``%2F`` still encoded: module docstring) and
    the client forwarding writes to the writer, closed by ``close``."""

    def __init__(self, app: ASGIApp, client: httpx2.AsyncClient) -> None:
        self.app = app
        self._client = client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and b"%2" in raw:
            parts = re.split("%2[fF]", raw.decode("latin-1").partition("?")[0])
            scope = dict(scope, path="%2F".join(unquote(p) for p in parts))
        await self.app(scope, receive, send)

    async def close(self) -> None:
        await self._client.aclose()


def build_app(node: Node) -> RegistryApp:
    """The ASGI application serving ``node``."""
    routes = Routes(node)
    stats = _Metrics()
    client = httpx2.AsyncClient(
        timeout=node.forward_timeout_s, verify=node.forward_ssl or True, trust_env=False
    )

    async def observed(request: Request, name: str, answer: Callable[[], Awaitable[Response]]
                       ) -> Response:  # fmt: skip
        started = time.perf_counter()
        with stats.tracer.start_as_current_span(f"{request.method} {name}") as span:
            try:
                response = await answer()
            except Exception as exc:
                if not isinstance(exc, errors.RegistryError):  # a bug: 500, 50001
                    log.exception("request failed", method=request.method, path=request.url.path)
                    exc = errors.store_error(f"internal error: {exc}")
                response = _error(exc)
                if response.status_code == 401:
                    _header(response, "WWW-Authenticate", CHALLENGE)
            span.set_attribute("http.response.status_code", response.status_code)
        attributes: dict[str, str | int] = {
            "route": name, "method": request.method, "status": response.status_code,
        }  # fmt: skip
        stats.requests.add(1, attributes)
        stats.duration.record(time.perf_counter() - started, attributes)
        return response

    def endpoint(path: str, handler_name: str, writes: bool) -> Handler:
        handler: Handler = getattr(routes, handler_name)

        async def answer(request: Request) -> Response:
            await _authorize(node, request, handler_name, path)
            if writes and not node.is_leader():
                return await forward(node, request, client)
            response = await handler(request)
            if writes:
                _header(response, _OFFSET_HEADER, str(node.log_position()))
            return response

        async def call(request: Request) -> Response:
            return await observed(request, path, lambda: answer(request))

        return call

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        phrase = "Not Found" if exc.status_code == 404 else "Method Not Allowed"

        async def answer() -> Response:
            raise errors.bad_request(exc.status_code, f"HTTP {exc.status_code} {phrase}")

        return await observed(request, "unmatched", answer)

    by_path: dict[str, dict[str, Handler]] = {}
    for method, path, name, writes in TABLE:
        by_path.setdefault(path, {})[method] = endpoint(path, name, writes)
    api: list[Route] = []
    for path, by_method in by_path.items():
        if "GET" in by_method:
            by_method["HEAD"] = by_method["GET"]

        async def dispatch(request: Request, by_method: dict[str, Handler] = by_method) -> Response:
            return await by_method[request.method](request)

        api.append(Route(path, dispatch, methods=list(by_method)))
    app = Starlette(routes=[*health_routes(), *api], exception_handlers={HTTPException: refused})
    app.router.redirect_slashes = False  # /subjects/ is 404, as it was
    return RegistryApp(app, client)
