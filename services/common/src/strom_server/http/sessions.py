"""Browser sessions of an HTTP service: the session store, CSRF tokens and the rule every
request goes through (login, read-only, CSRF).

Every browser gets a session (a random id in an ``HttpOnly``, ``SameSite=Strict`` cookie,
state kept in this process). A change (any POST but the service's ``not_changes``) must carry
the session's CSRF token (form field ``csrf_token`` or header ``X-CSRF-Token``): an HMAC of
the session id under a per-process secret, so another site cannot forge one. Read-only,
every change is refused with 403 whatever it carries. With a login required, every path but
the service's ``public_paths`` needs a logged-in session. ``session_guard`` applies the rule
in front of an ASGI app.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Decision", "Session", "Sessions", "decide"]


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
    public_paths: Sequence[str] = (),
    not_changes: Sequence[str] = (),
) -> Decision:
    """The rule every request goes through (see the module docstring). A path in
    ``public_paths`` needs no login, one in ``not_changes`` is a POST that changes nothing
    (allowed when read-only); a path ending in ``/`` covers what starts with it."""
    public = _matches(path, public_paths)
    if login_required and not logged_in and not public:
        if method in ("GET", "HEAD"):
            return Decision(303, "login required")
        return Decision(403, "login required")
    if method in ("GET", "HEAD"):
        return Decision(0)
    change = not _matches(path, not_changes)
    if read_only and change:
        return Decision(403, "the console is read-only: changes are refused")
    if not csrf_ok:
        return Decision(403, "missing or wrong CSRF token: reload the page and try again")
    return Decision(0)


def _matches(path: str, paths: Sequence[str]) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in paths)
