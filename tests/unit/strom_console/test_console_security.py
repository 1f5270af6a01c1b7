"""Sessions, CSRF tokens, read-only and login: the rule and the ASGI guard that applies it."""

from __future__ import annotations

import asyncio
from typing import Any

from strom_console.__main__ import main
from strom_console.guard import Guard
from strom_console.security import PATHS
from strom_server.http.auth import password_ok
from strom_server.http.sessions import Sessions, decide


def test_the_rule() -> None:
    def rule(method: str, path: str, **kw: Any) -> int:
        args = {"logged_in": False, "login_required": False, "read_only": False, "csrf_ok": False}
        paths = {"public_paths": PATHS.public, "not_changes": PATHS.not_changes}
        return decide(method, path, **{**args, **paths, **kw}).status

    assert rule("GET", "/topics") == 0
    assert rule("POST", "/topics/a/delete") == 403  # no CSRF token
    assert rule("POST", "/topics/a/delete", csrf_ok=True) == 0
    assert rule("POST", "/topics/a/delete", csrf_ok=True, read_only=True) == 403
    assert rule("POST", "/search/start", csrf_ok=True, read_only=True) == 0  # not a change
    assert rule("POST", "/search/start", read_only=True) == 403  # still CSRF-checked
    assert rule("GET", "/topics", login_required=True) == 303
    assert rule("POST", "/topics/a/delete", login_required=True, csrf_ok=True) == 403
    assert rule("GET", "/login", login_required=True) == 0
    assert rule("GET", "/static/console.css", login_required=True) == 0
    assert rule("GET", "/topics", login_required=True, logged_in=True) == 0


def test_csrf_tokens_belong_to_their_session() -> None:
    sessions = Sessions()
    a, b = sessions.new(), sessions.new()
    assert sessions.csrf_ok(a, sessions.csrf_token(a))
    assert not sessions.csrf_ok(b, sessions.csrf_token(a))
    assert not sessions.csrf_ok(a, "")
    assert not sessions.csrf_ok(None, sessions.csrf_token(a))
    assert not Sessions().csrf_ok(a, sessions.csrf_token(a))  # another process's secret


def test_sessions_expire_and_are_bounded() -> None:
    sessions = Sessions(max_sessions=2, idle_s=10)
    first = sessions.new(now=0)
    assert sessions.get(first.id, now=5) is first
    assert sessions.get(first.id, now=16) is None
    kept = [sessions.new(now=20) for _ in range(3)]
    assert sessions.get(kept[0].id, now=21) is None and sessions.get(kept[2].id, now=21)
    assert sessions.get("forged", now=21) is None


def test_password_check() -> None:
    assert password_ok("ops", "pw", "ops", "pw")
    assert not password_ok("ops", "pw", "ops", "PW")
    assert not password_ok("ops", "pw", "root", "pw")


async def _call(guard: Guard, method: str, path: str, body: bytes = b"", **headers: str) -> Any:
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }
    sent: list[dict[str, Any]] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await guard(scope, receive, send)
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent)


def test_the_guard_replays_a_checked_form_to_the_app() -> None:
    seen: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})

    sessions = Sessions()
    guard = Guard(app, sessions, read_only=False, login_required=False)

    async def scenario() -> None:
        status, headers, _ = await _call(guard, "GET", "/")
        cookie = headers[b"set-cookie"].decode().split(";")[0]
        session = sessions.get(cookie.split("=", 1)[1])
        assert session is not None
        token = sessions.csrf_token(session)
        form = f"a=1&csrf_token={token}".encode()
        ctype = "application/x-www-form-urlencoded"
        status, _, body = await _call(guard, "POST", "/x", form, cookie=cookie, content_type=ctype)
        assert (status, body, seen[-1]) == (200, b"done", form)
        status, _, body = await _call(
            guard, "POST", "/x", b"a=1", cookie=cookie, content_type=ctype
        )
        assert status == 403 and b"CSRF" in body
        status, _, _ = await _call(guard, "POST", "/x", b"", cookie=cookie, x_csrf_token=token)
        assert status == 200
        read_only = Guard(app, sessions, read_only=True, login_required=False)
        status, _, body = await _call(
            read_only, "POST", "/x", form, cookie=cookie, content_type=ctype
        )
        assert status == 403 and b"read-only" in body

    asyncio.run(scenario())


def test_a_bad_setting_is_a_configuration_error(capsys: Any) -> None:
    assert main(["--metrics-listen", "not a port"]) == 2
    assert "metrics-listen" in capsys.readouterr().err
