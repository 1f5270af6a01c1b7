"""Logging in and out (the session cookie; ``strom_console.guard`` enforces the login)."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from strom.errors import SaslAuthenticationFailedError
from strom_console.guard import session_of
from strom_console.security import COOKIE
from strom_console.web import Console, form_field
from strom_server.runtime.logs import get_logger

log = get_logger(__name__)


async def _checked(console: Console, request: Request, form: FormData) -> bool:
    """The user and password of the form pass the login's check (the shared credential
    check of the HTTP services)."""
    assert console.login is not None
    host = request.client.host if request.client else ""
    try:
        await console.login.check(form_field(form, "user"), form_field(form, "password"), host)
    except SaslAuthenticationFailedError:
        return False
    return True


async def page_login(console: Console, request: Request) -> Response:
    return console.render(request, "login.html", failed=False)


async def login(console: Console, request: Request) -> Response:
    form = await request.form()
    session = session_of(request.scope)
    if console.login is not None and await _checked(console, request, form):
        # A new session id on login: an id planted before it is worth nothing after it.
        console.sessions.drop(session.id)
        fresh = console.sessions.new()
        fresh.user = console.config.user
        response = RedirectResponse("/", 303)
        response.set_cookie(COOKIE, fresh.id, httponly=True, samesite="strict", path="/")
        log.info("login", user=fresh.user)
        return response
    return console.render(request, "login.html", 401, failed=True)


async def logout(console: Console, request: Request) -> Response:
    console.sessions.drop(session_of(request.scope).id)
    response = RedirectResponse("/login" if console.login is not None else "/", 303)
    response.delete_cookie(COOKIE, path="/")
    return response
