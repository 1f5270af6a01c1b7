"""Confluent Schema Registry's REST API on aiohttp.

Handlers only translate: path and query to ``Registry`` calls, results to JSON. Every
``RegistryError`` becomes ``{"error_code", "message"}`` with its HTTP status; an unknown route
is 404 with error code 404, a body that is not JSON 400 (error code 400), anything unexpected
500 with 50001 (and a log line). A write reaching an instance that is not the writer is
forwarded to the writer (``forward``); the answer carries the log offset the write reached,
and the forwarding instance waits until its own state has it, so a client reads its write
back from whichever instance it asks.

With security on, every request but ``GET /`` (the health check) first authenticates the
caller (HTTP Basic against Strom's users: 401 otherwise) and then is authorized by the rule
of its handler (``RULES``; 403 with 40301 otherwise): ``strom_registry.access`` says how.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web
from opentelemetry import metrics, trace

from strom.security.acl import Operation
from strom_registry import errors
from strom_registry.access import ANONYMOUS, Access, forbidden
from strom_registry.registry import Registry
from strom_server.runtime.logs import get_logger

__all__ = ["CONTENT_TYPE", "Node", "build_app"]

log = get_logger(__name__)

#: Confluent's media type; clients accept plain JSON too.
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_OFFSET_HEADER = "X-Strom-Registry-Offset"
_FORWARDED_HEADER = "X-Strom-Registry-Forwarded"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(value), status=status, content_type=CONTENT_TYPE)


def _error(exc: errors.RegistryError) -> web.Response:
    return _json(exc.to_json(), exc.status)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


async def _body(request: web.Request) -> Any:
    text = await request.text()
    try:
        return json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise errors.bad_request(400, f"the body is not JSON: {exc}") from None


def _caller(request: web.Request) -> tuple[str, str]:
    """The (principal, host) the middleware authenticated."""
    return request.get("principal", ANONYMOUS), request.remote or ""


def _schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise errors.schema_not_found() from None


class Routes:
    """The handlers; ``writes`` marks the ones only the writer runs."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.r = node.registry

    async def root(self, _: web.Request) -> web.Response:
        """``{}`` as Confluent answers; a Strom header says whether this instance writes."""
        response = _json({})
        response.headers["X-Strom-Registry-Writer"] = "true" if self.node.is_leader() else "false"
        return response

    async def schema_types(self, _: web.Request) -> web.Response:
        return _json(["JSON", "PROTOBUF", "AVRO"])

    def _visible(self, request: web.Request, subjects: list[str]) -> list[str]:
        if self.node.access.authorizer is None:
            return subjects
        return self.node.access.visible(*_caller(request), subjects)

    def _readable_id(self, request: web.Request) -> int:
        """The id of the path, when the caller may describe a subject using it (else 403)."""
        schema_id = _schema_id(request)
        if self.node.access.authorizer is None:
            return schema_id
        self.r.schema(schema_id)  # 40403 first for an unknown id
        if not self._visible(request, self.r.subjects_of(schema_id, deleted=True)):
            raise forbidden(_caller(request)[0], Operation.DESCRIBE, f"schema id {schema_id}")
        return schema_id

    async def schema_by_id(self, request: web.Request) -> web.Response:
        return _json(self.r.describe_schema(self.r.schema(self._readable_id(request))))

    async def schema_text(self, request: web.Request) -> web.Response:
        return web.Response(text=self.r.schema(self._readable_id(request)).text,
                            content_type="application/json")  # fmt: skip

    async def schema_subjects(self, request: web.Request) -> web.Response:
        subjects = self.r.subjects_of(self._readable_id(request), deleted=_flag(request, "deleted"))
        return _json(self._visible(request, subjects))

    async def schema_versions(self, request: web.Request) -> web.Response:
        found = self.r.versions_of(self._readable_id(request), deleted=_flag(request, "deleted"))
        visible = set(self._visible(request, [v["subject"] for v in found]))
        return _json([v for v in found if v["subject"] in visible])

    async def schemas(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        deleted, latest = _flag(request, "deleted"), _flag(request, "latestOnly")
        found = []
        for subject in self._visible(request, self.r.subjects(deleted=deleted, prefix=prefix)):
            versions = self.r.state.versions(subject, deleted=deleted)
            found += [self.r.describe(e) for e in (versions[-1:] if latest else versions)]
        return _json(found)

    async def subjects(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        subjects = self.r.subjects(deleted=_flag(request, "deleted"), prefix=prefix)
        return _json(self._visible(request, subjects))

    async def subject_versions(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        return _json(self.r.versions(subject, deleted=_flag(request, "deleted")))

    async def subject_version(self, request: web.Request) -> web.Response:
        m = request.match_info
        entry = self.r.version(m["subject"], m["version"], deleted=_flag(request, "deleted"))
        return _json(self.r.describe(entry))

    async def subject_version_schema(self, request: web.Request) -> web.Response:
        m = request.match_info
        entry = self.r.version(m["subject"], m["version"], deleted=_flag(request, "deleted"))
        return web.Response(text=self.r.state.schemas[entry.schema_id].text,
                            content_type="application/json")  # fmt: skip

    async def referenced_by(self, request: web.Request) -> web.Response:
        m = request.match_info
        return _json(self.r.referenced_by(m["subject"], m["version"]))

    async def lookup(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        body = await _body(request)
        return _json(self.r.lookup(subject, body, deleted=_flag(request, "deleted")))

    async def register(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        return _json({"id": await self.r.register(subject, await _body(request))})

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        permanent = _flag(request, "permanent")
        return _json(await self.r.delete_subject(subject, permanent=permanent))

    async def delete_version(self, request: web.Request) -> web.Response:
        m = request.match_info
        permanent = _flag(request, "permanent")
        return _json(await self.r.delete_version(m["subject"], m["version"], permanent=permanent))

    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        level = self.r.config(subject, default_to_global=_flag(request, "defaultToGlobal"))
        return _json({"compatibilityLevel": level})

    async def put_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        level = await self.r.set_config(subject, await _body(request))
        return _json({"compatibility": level})

    async def delete_config(self, request: web.Request) -> web.Response:
        level = await self.r.delete_config(request.match_info.get("subject"))
        return _json({"compatibilityLevel": level})

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        default = subject is None or _flag(request, "defaultToGlobal")
        return _json({"mode": self.r.mode(subject, default_to_global=default)})

    async def put_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        mode = await self.r.set_mode(subject, await _body(request), force=_flag(request, "force"))
        return _json({"mode": mode})

    async def delete_mode(self, request: web.Request) -> web.Response:
        return _json({"mode": await self.r.delete_mode(request.match_info["subject"])})

    async def compatibility(self, request: web.Request) -> web.Response:
        m = request.match_info
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


async def _authorize(node: Node, request: web.Request, handler_name: str, route: str) -> None:
    """Authenticate the caller (kept in ``request["principal"]``) and check the handler's
    rule; ``GET /`` (the health check) needs nothing."""
    if node.access.open or handler_name == "root":
        return
    host = request.remote or ""
    principal = await node.access.principal(request.headers.get("Authorization"), host)
    request["principal"] = principal
    operation = RULES.get(handler_name)
    if operation is not None:
        subject = request.match_info.get("subject")
        node.access.check(principal, host, operation, subject, f"{request.method} {route}")


def _routes(routes: Routes) -> tuple[list[web.RouteDef], set[Handler]]:
    s = "/subjects/{subject}"
    v = s + "/versions/{version}"
    reads = [
        web.get("/", routes.root),
        web.get("/schemas", routes.schemas),
        web.get("/schemas/types", routes.schema_types),
        web.get("/schemas/ids/{id}", routes.schema_by_id),
        web.get("/schemas/ids/{id}/schema", routes.schema_text),
        web.get("/schemas/ids/{id}/subjects", routes.schema_subjects),
        web.get("/schemas/ids/{id}/versions", routes.schema_versions),
        web.get("/subjects", routes.subjects),
        web.get(s + "/versions", routes.subject_versions),
        web.get(v, routes.subject_version),
        web.get(v + "/schema", routes.subject_version_schema),
        web.get(v + "/referencedby", routes.referenced_by),
        web.post(s, routes.lookup),
        web.get("/config", routes.get_config),
        web.get("/config/{subject}", routes.get_config),
        web.get("/mode", routes.get_mode),
        web.get("/mode/{subject}", routes.get_mode),
        web.post("/compatibility" + s + "/versions", routes.compatibility),
        web.post("/compatibility" + v, routes.compatibility),
    ]
    writes = [
        web.post(s + "/versions", routes.register),
        web.delete(s, routes.delete_subject),
        web.delete(v, routes.delete_version),
        web.put("/config", routes.put_config),
        web.put("/config/{subject}", routes.put_config),
        web.delete("/config", routes.delete_config),
        web.delete("/config/{subject}", routes.delete_config),
        web.put("/mode", routes.put_mode),
        web.put("/mode/{subject}", routes.put_mode),
        web.delete("/mode/{subject}", routes.delete_mode),
    ]
    return reads + writes, {w.handler for w in writes}  # type: ignore[attr-defined]


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


async def forward(node: Node, request: web.Request, session: ClientSession) -> web.Response:
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
    try:
        async with session.request(
            request.method, leader.rstrip("/") + request.path_qs, data=await request.read(),
            headers=headers,
        ) as answer:  # fmt: skip
            body = await answer.read()
            offset = answer.headers.get(_OFFSET_HEADER)
    except (ClientError, TimeoutError) as exc:
        raise errors.forwarding_failed(
            f"forwarding to the writer at {leader} failed: {exc}"
        ) from None
    if offset is not None and answer.status < 300:
        await node.wait_for(int(offset))
    return web.Response(body=body, status=answer.status, headers={"Content-Type": CONTENT_TYPE})


def build_app(node: Node) -> web.Application:
    """The aiohttp application serving ``node``."""
    routes = Routes(node)
    table, writes = _routes(routes)
    stats = _Metrics()
    sessions: list[ClientSession] = []

    @web.middleware
    async def confluent(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        route = request.match_info.route.resource
        name = route.canonical if route is not None else "unmatched"
        with stats.tracer.start_as_current_span(f"{request.method} {name}") as span:
            response = await _answer(request, handler, span, name)
        attributes: dict[str, str | int] = {
            "route": name, "method": request.method, "status": response.status,
        }  # fmt: skip
        stats.requests.add(1, attributes)
        stats.duration.record(time.perf_counter() - started, attributes)
        return response

    async def _answer(
        request: web.Request, handler: Handler, span: trace.Span, route: str
    ) -> web.StreamResponse:
        try:
            target = getattr(handler, "__func__", None) or handler
            await _authorize(node, request, getattr(target, "__name__", ""), route)
            is_write = any(getattr(w, "__func__", None) is target for w in writes)
            if is_write and not node.is_leader():
                if not sessions:
                    sessions.append(ClientSession(
                        timeout=ClientTimeout(node.forward_timeout_s),
                        connector=TCPConnector(ssl=node.forward_ssl or True),
                    ))  # fmt: skip
                response: web.StreamResponse = await forward(node, request, sessions[0])
            else:
                response = await handler(request)
                if is_write:
                    response.headers[_OFFSET_HEADER] = str(node.log_position())
        except errors.RegistryError as exc:
            response = _error(exc)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = 'Basic realm="strom-registry"'
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
            response = _error(errors.bad_request(exc.status, f"HTTP {exc.status} {exc.reason}"))
        except web.HTTPException as exc:
            response = exc
        except Exception as exc:
            log.exception("request failed", method=request.method, path=request.path)
            response = _error(errors.store_error(f"internal error: {exc}"))
        span.set_attribute("http.response.status_code", response.status)
        return response

    async def close_sessions(_: web.Application) -> None:
        for session in sessions:
            await session.close()

    app = web.Application(middlewares=[confluent])
    app.add_routes(table)
    app.on_cleanup.append(close_sessions)
    return app
