"""Sessions, CSRF tokens, the optional login and the read-only rule.

Every browser gets a session (a random id in an ``HttpOnly``, ``SameSite=Strict`` cookie,
state kept in this process). A change (any POST but the few listed in ``NOT_CHANGES``) must
carry the session's CSRF token (form field ``csrf_token`` or header ``X-CSRF-Token``): an HMAC
of the session id under a per-process secret, so another site cannot forge one. With
``--read-only`` every change is refused with 403 whatever it carries. With ``--user``, every
page but the login page and the static files needs a logged-in session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from strom_server.http.auth import password_ok

__all__ = [
    "COOKIE",
    "NOT_CHANGES",
    "PUBLIC_PATHS",
    "Decision",
    "Session",
    "Sessions",
    "decide",
    "password_ok",
]

COOKIE = "strom_console_session"
#: POSTs that change nothing in the cluster: allowed in read-only mode (still CSRF-checked).
NOT_CHANGES = ("/login", "/logout", "/search/")
#: Reachable without a login.
PUBLIC_PATHS = ("/login", "/static/", "/healthz", "/readyz")


@dataclass
class Session:
    id: str
    user: str = ""
    last_seen: float = 0.0


class Sessions:
    """Sessions by id, the least recently used dropped beyond ``max_sessions`` or after
    ``idle_s`` without a request."""

    def __init__(self, max_sessions: int = 10000, idle_s: float = 12 * 3600) -> None:
        self.secret = secrets.token_bytes(32)
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def get(self, session_id: str | None, now: float | None = None) -> Session | None:
        now = time.time() if now is None else now
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if now - session.last_seen > self.idle_s:
            del self._sessions[session_id]
            return None
        session.last_seen = now
        self._sessions.move_to_end(session_id)
        return session

    def new(self, now: float | None = None) -> Session:
        session = Session(secrets.token_urlsafe(24), last_seen=time.time() if now is None else now)
        self._sessions[session.id] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def drop(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def csrf_token(self, session: Session) -> str:
        return hmac.new(self.secret, session.id.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: Session | None, token: str | None) -> bool:
        if session is None or not token:
            return False
        return hmac.compare_digest(self.csrf_token(session), token)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a request before its handler runs."""

    status: int  # 0: go on; 403: refuse; 303: redirect to the login page
    reason: str = ""


def decide(
    method: str,
    path: str,
    *,
    logged_in: bool,
    login_required: bool,
    read_only: bool,
    csrf_ok: bool,
) -> Decision:
    """The rule every request goes through (see the module docstring)."""
    public = any(path == p or (p.endswith("/") and path.startswith(p)) for p in PUBLIC_PATHS)
    if login_required and not logged_in and not public:
        if method in ("GET", "HEAD"):
            return Decision(303, "login required")
        return Decision(403, "login required")
    if method in ("GET", "HEAD"):
        return Decision(0)
    change = not any(path == p or (p.endswith("/") and path.startswith(p)) for p in NOT_CHANGES)
    if read_only and change:
        return Decision(403, "the console is read-only: changes are refused")
    if not csrf_ok:
        return Decision(403, "missing or wrong CSRF token: reload the page and try again")
    return Decision(0)
