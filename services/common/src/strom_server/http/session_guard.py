"""``SessionGuard``: the ASGI middleware in front of every handler of a browser-facing HTTP
service: session cookie, login, read-only, CSRF.

It reads a POST's form body itself (``application/x-www-form-urlencoded``, up to
``max_body`` bytes) to find the ``csrf_token`` field, then replays the body to the handler; a
request carrying the token in the ``X-CSRF-Token`` header is not read. The rule itself is
``sessions.decide``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from strom_server.http.sessions import Session, Sessions, decide

__all__ = ["SessionGuard", "SessionPaths", "session_of"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return ""


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed cookie header is ignored, not a crash
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


async def _plain(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True, slots=True)
class SessionPaths:
    """A service's session cookie name and the paths its rule treats apart."""

    cookie: str
    #: Reachable without a login (a path ending in ``/``: everything below it).
    public: tuple[str, ...] = ()
    #: POSTs that change nothing: allowed when read-only (still CSRF-checked).
    not_changes: tuple[str, ...] = ()


class SessionGuard:
    """Applies ``sessions.decide`` to every HTTP request before ``app`` sees it."""

    def __init__(
        self,
        app: ASGIApp,
        sessions: Sessions,
        paths: SessionPaths,
        *,
        read_only: bool,
        login_required: bool,
        max_body: int = 32 * 1024 * 1024,
    ) -> None:
        self.app = app
        self.sessions = sessions
        self.paths = paths
        self.read_only = read_only
        self.login_required = login_required
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = self.sessions.get(_cookie(scope, self.paths.cookie))
        extra: list[tuple[bytes, bytes]] = []
        if session is None:
            session = self.sessions.new()
            cookie = f"{self.paths.cookie}={session.id}; Path=/; HttpOnly; SameSite=Strict"
            extra.append((b"set-cookie", cookie.encode()))
        scope.setdefault("state", {})["session"] = session
        method = scope["method"]
        token = _header(scope, b"x-csrf-token") or None
        body = b""
        if method not in ("GET", "HEAD") and token is None:
            body, too_large = await self._read_body(receive)
            if too_large:
                await _plain(send, 413, "request body too large", extra)
                return
            if _header(scope, b"content-type").startswith("application/x-www-form-urlencoded"):
                fields = parse_qs(body.decode("latin-1"), keep_blank_values=True)
                found = fields.get("csrf_token")
                token = found[0] if found else None
        decision = decide(
            method,
            scope["path"],
            logged_in=bool(session.user),
            login_required=self.login_required,
            read_only=self.read_only,
            csrf_ok=self.sessions.csrf_ok(session, token),
            public_paths=self.paths.public,
            not_changes=self.paths.not_changes,
        )
        if decision.status == 303:
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [(b"location", b"/login"), (b"content-length", b"0"), *extra],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if decision.status:
            await _plain(send, decision.status, decision.reason, extra)
            return
        if method not in ("GET", "HEAD") and not _header(scope, b"x-csrf-token"):
            receive = _replay(body, receive)
        await self.app(scope, receive, _with_headers(send, extra))

    async def _read_body(self, receive: Receive) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", True
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks), False


def _replay(body: bytes, then: Receive) -> Receive:
    """The body already read, then the connection's own messages (its disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await then()

    return receive


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    if not extra:
        return send

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = dict(message)
            message["headers"] = [*message.get("headers", ()), *extra]
        await send(message)

    return sending


def session_of(scope: Scope) -> Session:
    """The session the guard attached to the request."""
    session: Session = scope["state"]["session"]
    return session
